import Foundation
import HTTPTypes
import NetReachHTTP
import NetReachTestSupport
import NetReachURLSession
import OpenAPIRuntime
import Testing

@testable import NetReachAsyncHTTPClient

/// TLS settings against a real nginx with certificates made for the test: trust, host names,
/// expiry, client certificates, verification off. A failed handshake is ``TransportError/Kind/tlsFailure``,
/// names the host and the reason, and nginx's access log proves the request never arrived.
@Suite(
    "TLS against nginx", .offPool, .enabled(if: ExternalServer.available("nginx", "openssl")), .serialized,
    .timeLimit(.minutes(2)))
struct TLSTransportTests {
    // MARK: AsyncHTTPClientTransport

    @Test("Trusting the test CA from a PEM file gives 200")
    func trustedByFile() async throws {
        try await withNginx { nginx, certificates in
            let transport = try AsyncHTTPClientTransport(
                settings: settings(TLSSettings(trustRoots: .file(certificates.path("ca.pem")))))
            let (status, body) = try await get(transport, "https://127.0.0.1:\(nginx.trusted)/trusted")
            #expect(status == 200)
            #expect(body == "ok\n")
        }
    }

    @Test("Trusting the test CA from a hashed directory gives 200, by name and by IPv6 address too")
    func trustedByDirectory() async throws {
        try await withNginx { nginx, certificates in
            let transport = try AsyncHTTPClientTransport(
                settings: settings(TLSSettings(trustRoots: .directory(certificates.path("capath")))))
            #expect(try await get(transport, "https://127.0.0.1:\(nginx.trusted)/by-directory").status == 200)
            #expect(try await get(transport, "https://localhost:\(nginx.trusted)/by-name").status == 200)
        }
    }

    @Test("SSL_CERT_FILE chooses the trust roots when nothing explicit is set")
    func sslCertFileFromEnvironment() async throws {
        try await withNginx { nginx, certificates in
            let environment = ["SSL_CERT_FILE": certificates.path("ca.pem")]
            #expect(TLSSettings.TrustRoots.default.resolved(in: environment) == .file(certificates.path("ca.pem")))
            let transport = try AsyncHTTPClientTransport(settings: settings(TLSSettings()), environment: environment)
            #expect(try await get(transport, "https://127.0.0.1:\(nginx.trusted)/from-environment").status == 200)
            // Explicit roots win over the environment.
            let explicit = TLSSettings.TrustRoots.directory("/nonexistent")
            #expect(explicit.resolved(in: environment) == explicit)
        }
    }

    @Test("An untrusted certificate is a TLS failure naming the host, and nothing reached nginx")
    func untrusted() async throws {
        try await withNginx { nginx, _ in
            let transport = try AsyncHTTPClientTransport(settings: settings(TLSSettings()))
            let error = try await expectFailure(transport, "https://127.0.0.1:\(nginx.trusted)/untrusted")
            #expect(error.kind == .tlsFailure, "\(error)")
            #expect(error.requestWasProvablyNotSent)
            #expect(error.detail.contains("127.0.0.1") && error.detail.contains("certificate"), "\(error.detail)")
            #expect(!error.detail.contains("/"), "a path in the detail: \(error.detail)")
            #expect(!nginx.accessLog().contains { $0.contains("/untrusted") })
        }
    }

    @Test("A certificate for another host name is a TLS failure saying so")
    func wrongHostName() async throws {
        try await withNginx { nginx, certificates in
            let transport = try AsyncHTTPClientTransport(
                settings: settings(TLSSettings(trustRoots: .file(certificates.path("ca.pem")))))
            let error = try await expectFailure(transport, "https://127.0.0.1:\(nginx.wrongHost)/wrong-host")
            #expect(error.kind == .tlsFailure, "\(error)")
            #expect(error.detail.contains("another host name") && error.detail.contains("127.0.0.1"), "\(error.detail)")
            #expect(!nginx.accessLog().contains { $0.contains("/wrong-host") })
        }
    }

    @Test("An expired, a not yet valid and an untrusted certificate each say so, as curl does")
    func refusedCertificatesSayWhy() async throws {
        let curl = try ExternalServer.require("curl")
        try await withNginx { nginx, certificates in
            let trusting = try AsyncHTTPClientTransport(
                settings: settings(TLSSettings(trustRoots: .file(certificates.path("ca.pem")))))
            let system = try AsyncHTTPClientTransport(settings: settings(TLSSettings()))
            let cases:
                [(
                    transport: AsyncHTTPClientTransport, port: Int, trustsCA: Bool, reason: TLSFailureReason,
                    curlSays: String
                )] = [
                    (trusting, nginx.expired, true, .expired, "certificate has expired"),
                    (trusting, nginx.notYetValid, true, .notYetValid, "certificate is not yet valid"),
                    (system, nginx.trusted, false, .untrusted, "unable to get local issuer certificate"),
                ]
            for (transport, port, trustsCA, reason, curlSays) in cases {
                let url = "https://127.0.0.1:\(port)/refused-\(port)"
                let curlRun = try await ChildProcess.run(
                    curl,
                    ["-sS", "-o", "/dev/null"] + (trustsCA ? ["--cacert", certificates.path("ca.pem")] : []) + [url])
                #expect(
                    curlRun.status == 60 && curlRun.standardError.contains(curlSays),
                    "curl: \(curlRun.status) \(curlRun.standardError)")
                let error = try await expectFailure(transport, url)
                #expect(error.kind == .tlsFailure && error.tlsFailureReason == reason, "\(url): \(error)")
                #expect(error.detail == "TLS handshake with 127.0.0.1 failed: \(reason.description)")
                #expect(error.requestWasProvablyNotSent)
            }
            // Neither the failed handshakes nor the look at their certificates sent a request.
            #expect(
                !nginx.accessLog().contains { $0.contains("/refused-") || $0.contains("HEAD") }, "\(nginx.accessLog())")
        }
    }

    @Test(
        "A certificate must name the URL's host, as curl decides: an address-only one is not for a name, a name-only one not for the address"
    )
    func certificateNamesTheURLsHost() async throws {
        let curl = try ExternalServer.require("curl")
        try await withNginx { nginx, certificates in
            let transport = try AsyncHTTPClientTransport(
                settings: settings(TLSSettings(trustRoots: .file(certificates.path("ca.pem")))))
            let cases: [(host: String, port: Int, accepted: Bool)] = [
                ("localhost", nginx.addressOnly, false), ("127.0.0.1", nginx.addressOnly, true),
                ("127.0.0.1", nginx.nameOnly, false), ("localhost", nginx.nameOnly, true),
                ("localhost", nginx.trusted, true), ("127.0.0.1", nginx.trusted, true),
            ]
            for (host, port, accepted) in cases {
                let curlRun = try await ChildProcess.run(
                    curl,
                    [
                        "-s", "-o", "/dev/null", "--cacert", certificates.path("ca.pem"),
                        "https://\(host):\(port)/curl-\(port)",
                    ])
                #expect(curlRun.status == (accepted ? 0 : 60), "curl on \(host):\(port) exited \(curlRun.status)")
                let url = "https://\(host):\(port)/ours-\(host)-\(port)"
                if accepted {
                    #expect(try await get(transport, url).status == 200, "\(url)")
                } else {
                    let error = try await expectFailure(transport, url)
                    #expect(error.tlsFailureReason == .hostnameMismatch, "\(url): \(error)")
                    #expect(
                        error.detail
                            == "TLS handshake with \(host) failed: the server's certificate is for another host name")
                    #expect(!nginx.accessLog().contains { $0.contains("/ours-\(host)-\(port)") })
                }
            }
        }
    }

    @Test(
        "Wildcards stand for one whole left-most label, below two labels at least",
        arguments: [
            ("*.example.com", "a.example.com", true), ("*.example.com", "A.Example.COM", true),
            ("*.example.com", "example.com", false), ("*.example.com", "a.b.example.com", false),
            ("*.com", "example.com", false), ("f*.example.com", "foo.example.com", false),
            ("example.com.", "example.com", true), ("*", "localhost", false), ("", "", false),
            ("exa*mple.com", "exa*mple.com", false),
        ])
    func wildcards(pattern: String, name: String, matches: Bool) {
        #expect(ServerIdentity.matches(pattern: pattern, name: name.lowercased()) == matches)
    }

    @Test("Mutual TLS: with the client certificate nginx sees it; without, nginx answers 400")
    func mutualTLS() async throws {
        try await withNginx { nginx, certificates in
            let roots = TLSSettings.TrustRoots.file(certificates.path("ca.pem"))
            let identity = TLSSettings.ClientIdentity(
                certificateChainFile: certificates.path("client.pem"), privateKeyFile: certificates.path("client.key"))
            let withCertificate = try AsyncHTTPClientTransport(
                settings: settings(TLSSettings(trustRoots: roots, clientIdentity: identity)))
            let (status, body) = try await get(withCertificate, "https://127.0.0.1:\(nginx.mutual)/mutual")
            #expect(status == 200)
            #expect(body.contains("CN=netreach-client"), "\(body)")
            // nginx completes the handshake and refuses at the HTTP level ("No required SSL
            // certificate was sent"), which is a response, not a transport failure.
            let without = try AsyncHTTPClientTransport(settings: settings(TLSSettings(trustRoots: roots)))
            #expect(try await get(without, "https://127.0.0.1:\(nginx.mutual)/no-certificate").status == 400)
        }
    }

    @Test("Verification off accepts an untrusted, expired or misnamed certificate")
    func insecure() async throws {
        try await withNginx { nginx, _ in
            let transport = try AsyncHTTPClientTransport(settings: settings(TLSSettings(verifiesCertificates: false)))
            for port in [nginx.trusted, nginx.wrongHost, nginx.expired] {
                #expect(try await get(transport, "https://127.0.0.1:\(port)/insecure").status == 200)
            }
        }
    }

    @Test("A file that is missing or not PEM is refused when the transport is made")
    func badFiles() async throws {
        let certificates = try await TestCertificates.make()
        defer { certificates.remove() }
        let missing = #expect(throws: TransportSettingsError.self) {
            _ = try AsyncHTTPClientTransport(settings: settings(TLSSettings(trustRoots: .file("/nonexistent/ca.pem"))))
        }
        #expect(missing?.kind == .unreadableFile)
        #expect(missing?.detail.contains("/nonexistent/ca.pem") == true)
        let notPEM = #expect(throws: TransportSettingsError.self) {
            _ = try AsyncHTTPClientTransport(
                settings: settings(TLSSettings(trustRoots: .file(certificates.path("ca.cnf")))))
        }
        #expect(notPEM?.kind == .invalidCredentials)
        let wrongKey = #expect(throws: TransportSettingsError.self) {
            let identity = TLSSettings.ClientIdentity(
                certificateChainFile: certificates.path("client.pem"), privateKeyFile: certificates.path("server.key"))
            _ = try AsyncHTTPClientTransport(settings: settings(TLSSettings(clientIdentity: identity)))
        }
        #expect(wrongKey?.kind == .invalidCredentials)
    }

    @Test("The trust roots file is read up to its first certificate, wherever that starts")
    func firstCertificateAnywhere() async throws {
        let certificates = try await TestCertificates.make()
        defer { certificates.remove() }
        let pem = try String(contentsOfFile: certificates.path("ca.pem"), encoding: .utf8)
        // Before the first read's end, across it (the marker split between two reads), after it.
        for start in [0, 65_536 - 10, 65_536, 200_000] {
            let path = certificates.path("roots-\(start).pem")
            let preamble = start == 0 ? "" : String(repeating: "#", count: start - 1) + "\n"
            try (preamble + pem).write(toFile: path, atomically: false, encoding: .utf8)
            _ = try AsyncHTTPClientTransport(settings: settings(TLSSettings(trustRoots: .file(path))))
        }
        let path = certificates.path("no-certificate.pem")
        try String(repeating: "-----BEGIN CERTIFICATE----\n", count: 10_000).write(
            toFile: path, atomically: false, encoding: .utf8)
        let refused = #expect(throws: TransportSettingsError.self) {
            _ = try AsyncHTTPClientTransport(settings: settings(TLSSettings(trustRoots: .file(path))))
        }
        #expect(refused?.kind == .invalidCredentials)
    }

    // MARK: URLSessionTransport

    @Test("URLSession: an untrusted certificate is a TLS failure naming the host, and nothing reached nginx")
    func urlSessionUntrusted() async throws {
        try await withNginx { nginx, _ in
            let error = try await expectFailure(
                URLSessionTransport(), "https://127.0.0.1:\(nginx.trusted)/urlsession-untrusted")
            #expect(error.kind == .tlsFailure, "\(error)")
            #expect(error.requestWasProvablyNotSent)
            #expect(
                error.detail
                    == "TLS handshake with 127.0.0.1 failed: the server's certificate is not trusted (it does not chain to a trusted root)"
            )
            #expect(!nginx.accessLog().contains { $0.contains("/urlsession-untrusted") })
        }
    }

    @Test("URLSession refuses TLS settings FoundationNetworking cannot honour, when it is made")
    func urlSessionRefusesWhatItCannotDo() throws {
        let identity = TLSSettings.ClientIdentity(certificateChainFile: "/tmp/client.pem")
        let refused: [TransportSettings] = [
            settings(TLSSettings(trustRoots: .file("/tmp/ca.pem"))),
            settings(TLSSettings(trustRoots: .directory("/tmp/capath"))),
            settings(TLSSettings(clientIdentity: identity)),
            settings(TLSSettings(verifiesCertificates: false)),
            // libcurl's TLS floors are OpenSSL's: neither lower nor higher ones can be set.
            settings(TLSSettings(minimumProtocolVersion: .tlsv1)),
            settings(TLSSettings(minimumProtocolVersion: .tlsv13)),
            settings(TLSSettings(allowsWeakCertificates: true)),
        ]
        for settings in refused {
            let error = #expect(throws: TransportSettingsError.self) {
                try URLSessionTransport.check(settings, environment: [:])
            }
            #expect(error?.kind == .unsupported, "\(String(describing: error))")
        }
        let fromEnvironment = #expect(throws: TransportSettingsError.self) {
            try URLSessionTransport.check(settings(TLSSettings()), environment: ["SSL_CERT_FILE": "/tmp/ca.pem"])
        }
        #expect(fromEnvironment?.detail.contains("SSL_CERT_FILE") == true)
        try URLSessionTransport.check(settings(TLSSettings()), environment: [:])
        // The system's own store named in the environment is what libcurl uses anyway.
        try URLSessionTransport.check(
            settings(TLSSettings()),
            environment: ["SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt", "SSL_CERT_DIR": "/etc/ssl/certs"])
    }

    @Test(
        "libcurl's TLS messages map to reasons",
        arguments: [
            ("SSL certificate problem: unable to get local issuer certificate", "not trusted"),
            ("SSL certificate problem: self-signed certificate", "not trusted"),
            ("SSL certificate problem: certificate has expired", "expired"),
            ("SSL: no alternative certificate subject name matches target host name '127.0.0.1'", "another host name"),
            (
                "OpenSSL/3.0.19: error:0A00042E:SSL routines::tlsv1 alert protocol version",
                "tlsv1 alert protocol version"
            ),
            ("OpenSSL/3.0.19: error:0A00010B:SSL routines::wrong version number", "did not answer with TLS"),
            (
                "OpenSSL SSL_read: error:0A00045C:SSL routines::tlsv13 alert certificate required, errno 0",
                "client certificate"
            ),
        ])
    func curlMessages(message: String, reason: String) throws {
        let parsed = try #require(TLSFailureReason(curlMessage: message))
        #expect(parsed.description.contains(reason), "\(parsed)")
        #expect(TLSFailureReason(curlMessage: "Could not connect to server") == nil)
    }
}

// MARK: - Helpers

/// Settings with `tls` and no proxy (the environment of the test run must not matter).
private func settings(_ tls: TLSSettings) -> TransportSettings {
    TransportSettings(tls: tls, proxy: .environment([:]))
}

/// GETs `url`; returns the status and the body as text.
func get(
    _ transport: any HTTPTransport, _ url: String, headers: HTTPFields = [:]
) async throws -> (status: Int, body: String) {
    let (status, data) = try await getData(transport, url, headers: headers)
    return (status, String(decoding: data, as: UTF8.self))
}

/// GETs `url`; returns the status and the body.
func getData(
    _ transport: any HTTPTransport, _ url: String, headers: HTTPFields = [:]
) async throws -> (status: Int, body: Data) {
    let parsed = try #require(URL(string: url))
    let authority = try #require(
        parsed.host.map { host in
            let bracketed = host.contains(":") ? "[\(host)]" : host
            return parsed.port.map { "\(bracketed):\($0)" } ?? bracketed
        })
    let path = (parsed.path.isEmpty ? "/" : parsed.path) + (parsed.query.map { "?\($0)" } ?? "")
    let request = HTTPRequest(
        method: .get, scheme: parsed.scheme, authority: authority, path: path, headerFields: headers)
    let (response, body) = try await transport.send(
        request, body: nil, options: TransportOptions(stallTimeout: .seconds(20)))
    return (response.status.code, try await Data(collecting: body, upTo: 256 << 20))
}

/// GETs `url` and expects a ``TransportError``.
func expectFailure(_ transport: any HTTPTransport, _ url: String) async throws -> TransportError {
    do {
        let (status, _) = try await getData(transport, url)
        Issue.record("expected a TransportError, got \(status)")
        throw ExternalServerError.commandFailed("unexpected response \(status)")
    } catch let error as TransportError {
        return error
    }
}
