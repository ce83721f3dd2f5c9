import Foundation
import HTTPTypes
import NetReach
import NetReachConnectivity
import NetReachHTTP
import NetReachTestSupport
import NetReachURLSession
import Testing

@testable import NetReachAsyncHTTPClient

/// The TLS floors (issue 47) against nginx serving what curl on Debian refuses, beside curl in the
/// same test: TLS 1.0 only, an RSA-1024 key, a SHA-1-signed leaf, a SHA-1-signed intermediate, and
/// TLS 1.3 only (which must work). Each refusal is compared on every path a connection is made:
/// `NetworkService` on AsyncHTTPClient, the connectivity prober, and URLSession; nginx's access log
/// proves no request arrived.
@Suite(
    "TLS floor and certificate strength against nginx, beside curl", .offPool,
    .enabled(if: ExternalServer.available("nginx", "openssl", "curl")), .serialized, .timeLimit(.minutes(3)))
struct TLSFloorTests {
    static let tooWeak = "which is too weak; a SHA-2 digest is required"

    /// Each refused server: curl's exit status and words (with `--cacert`), the reason NetReach
    /// gives, and what URLSession says (it cannot trust the test CA, so libcurl's first complaint).
    static func refusals(
        _ nginx: LegacyTLSNginx
    ) -> [(
        port: Int, curlExit: Int32, curlSays: String, reason: TLSFailureReason, urlSession: TLSFailureReason
    )] {
        [
            (
                nginx.tlsv1, 35, "legacy sigalg disallowed or unsupported",
                .protocolVersionTooOld("the server speaks TLS 1.0; at least TLS 1.2 is required"), .untrusted
            ),
            (
                nginx.rsa1024, 60, "EE certificate key too weak",
                .keyTooWeak("the server's RSA key has 1024 bits; at least 2048 are required"),
                .keyTooWeak(
                    "a key in the server's certificate chain is too small (OpenSSL: EE certificate key too weak)")
            ),
            (
                nginx.sha1, 60, "CA signature digest algorithm too weak",
                .digestTooWeak("the server's certificate is signed with SHA-1, \(tooWeak)"), .untrusted
            ),
            (
                nginx.weakIntermediate, 60, "CA signature digest algorithm too weak",
                .digestTooWeak("the 'NetReach Weak CA' CA certificate is signed with SHA-1, \(tooWeak)"), .untrusted
            ),
        ]
    }

    @Test("Refused by default as curl refuses: NetworkService on AsyncHTTPClient, the prober, URLSession; nothing sent")
    func refusedByDefault() async throws {
        let curl = try ExternalServer.require("curl")
        try await withLegacyNginx { nginx, certificates in
            let ca = certificates.path("ca.pem")
            let trusting = settings(TLSSettings(trustRoots: .file(ca)))
            let service = NetworkService(transport: try AsyncHTTPClientTransport(settings: trusting), monitor: nil)
            let prober = AsyncHTTPClientProber(settings: trusting)
            for (port, curlExit, curlSays, reason, urlSessionReason) in Self.refusals(nginx) {
                let curlRun = try await ChildProcess.run(
                    curl, ["-sS", "-o", "/dev/null", "--cacert", ca, "https://127.0.0.1:\(port)/curl"])
                #expect(
                    curlRun.status == curlExit && curlRun.standardError.contains(curlSays),
                    "curl on \(port): \(curlRun.status) \(curlRun.standardError)")
                #expect(reason.isCertificateRejection == (curlExit == 60), "\(reason) is not curl's \(curlExit)")

                let failure = try await Self.serviceFailure(service, "https://127.0.0.1:\(port)/refused-\(port)")
                #expect(failure?.tlsFailureReason == reason, "\(port): \(String(describing: failure))")
                #expect(failure?.detail == "TLS handshake with 127.0.0.1 failed: \(reason)")
                #expect(failure?.requestWasProvablyNotSent == true)

                let probe = ConnectivityProbe(
                    try #require(URL(string: "https://127.0.0.1:\(port)/probe-\(port)")), expecting: .status(200))
                let result = await prober.probe(probe, over: .ipv4, timeout: .seconds(60))
                #expect(result.verdict == .intercepted("TLS handshake with 127.0.0.1 failed: \(reason)"), "\(result)")

                let viaURLSession = try await expectFailure(
                    URLSessionTransport(), "https://127.0.0.1:\(port)/urlsession-\(port)")
                #expect(viaURLSession.tlsFailureReason == urlSessionReason, "\(port): \(viaURLSession)")
                #expect(viaURLSession.requestWasProvablyNotSent)
            }
            let log = nginx.accessLog()
            #expect(log.allSatisfy { !$0.contains("GET /") && !$0.contains("HEAD /") }, "\(log)")
        }
    }

    @Test("TLS 1.3 only works by default, and with a TLS 1.3 floor, as with curl")
    func tls13Works() async throws {
        let curl = try ExternalServer.require("curl")
        try await withLegacyNginx { nginx, certificates in
            let ca = certificates.path("ca.pem")
            let url = "https://127.0.0.1:\(nginx.tlsv13)/tls13"
            #expect(try await ChildProcess.run(curl, ["-sS", "-o", "/dev/null", "--cacert", ca, url]).status == 0)
            #expect(
                try await ChildProcess.run(curl, ["-sS", "-o", "/dev/null", "--tlsv1.3", "--cacert", ca, url]).status
                    == 0)
            for minimum in [TLSProtocolVersion.tlsv12, .tlsv13] {
                let transport = try AsyncHTTPClientTransport(
                    settings: settings(TLSSettings(trustRoots: .file(ca), minimumProtocolVersion: minimum)))
                #expect(try await get(transport, url).body == "ok\n", "\(minimum)")
            }
        }
    }

    @Test("Each floor is lowered only by its own setting, as curl --tlsv1.0 --ciphers DEFAULT@SECLEVEL=0 does")
    func loweringSettings() async throws {
        let curl = try ExternalServer.require("curl")
        try await withLegacyNginx { nginx, certificates in
            let ca = certificates.path("ca.pem")
            let lowered = try AsyncHTTPClientTransport(
                settings: settings(
                    TLSSettings(trustRoots: .file(ca), minimumProtocolVersion: .tlsv1, allowsWeakCertificates: true)))
            for (port, _, _, _, _) in Self.refusals(nginx) {
                let url = "https://127.0.0.1:\(port)/lowered"
                let curlRun = try await ChildProcess.run(
                    curl,
                    ["-sS", "-o", "/dev/null", "--tlsv1.0", "--ciphers", "DEFAULT@SECLEVEL=0", "--cacert", ca, url])
                #expect(curlRun.status == 0, "curl on \(port): \(curlRun.standardError)")
                #expect(try await get(lowered, url).body == "ok\n", "\(port)")
            }
            // One floor lowered leaves the other.
            let oldVersions = try AsyncHTTPClientTransport(
                settings: settings(TLSSettings(trustRoots: .file(ca), minimumProtocolVersion: .tlsv1)))
            #expect(try await get(oldVersions, "https://127.0.0.1:\(nginx.tlsv1)/old").status == 200)
            let weakKey = try await expectFailure(oldVersions, "https://127.0.0.1:\(nginx.rsa1024)/weak-key")
            #expect(weakKey.tlsFailureReason?.isCertificateRejection == true, "\(weakKey)")
            let weakAllowed = try AsyncHTTPClientTransport(
                settings: settings(TLSSettings(trustRoots: .file(ca), allowsWeakCertificates: true)))
            #expect(try await get(weakAllowed, "https://127.0.0.1:\(nginx.sha1)/sha1").status == 200)
            let old = try await expectFailure(weakAllowed, "https://127.0.0.1:\(nginx.tlsv1)/old")
            if case .protocolVersionTooOld = old.tlsFailureReason {} else { Issue.record("\(old)") }
        }
    }

    @Test("Verification off skips the strength check but keeps the version floor, as curl -k")
    func insecure() async throws {
        let curl = try ExternalServer.require("curl")
        try await withLegacyNginx { nginx, _ in
            let insecure = try AsyncHTTPClientTransport(settings: settings(TLSSettings(verifiesCertificates: false)))
            for port in [nginx.rsa1024, nginx.sha1, nginx.weakIntermediate] {
                let url = "https://127.0.0.1:\(port)/insecure"
                #expect(try await ChildProcess.run(curl, ["-sS", "-o", "/dev/null", "-k", url]).status == 0)
                #expect(try await get(insecure, url).status == 200, "\(port)")
            }
            let url = "https://127.0.0.1:\(nginx.tlsv1)/insecure-old"
            #expect(try await ChildProcess.run(curl, ["-sS", "-o", "/dev/null", "-k", url]).status == 35)
            let old = try await expectFailure(insecure, url)
            #expect(
                old.tlsFailureReason
                    == .protocolVersionTooOld("the server speaks TLS 1.0; at least TLS 1.2 is required"))
        }
    }

    @Test("The chain of a server certificate is read once per process, whatever the transport")
    func chainReadOnce() async throws {
        try await withLegacyNginx { nginx, certificates in
            let ca = certificates.path("ca.pem")
            let leaf = try certificates.der("via-weak-ca.pem")
            ChainStrengthCheck.verdicts.withLock { $0[leaf] = nil }
            for attempt in 0..<2 {
                let transport = try AsyncHTTPClientTransport(settings: settings(TLSSettings(trustRoots: .file(ca))))
                let error = try await expectFailure(transport, "https://127.0.0.1:\(nginx.weakIntermediate)/\(attempt)")
                #expect(error.tlsFailureReason?.isCertificateRejection == true)
                #expect(ChainStrengthCheck.verdicts.withLock { $0[leaf] } != nil, "a verdict kept for the leaf")
            }
        }
    }

    /// The transport failure `url` ends with through `service`, or `nil` (recorded) if another.
    static func serviceFailure(_ service: NetworkService, _ url: String) async throws -> TransportError? {
        do {
            _ = try await service.send(.get(url))
            Issue.record("\(url): expected a failure")
        } catch {
            if case .transport(let failure, _) = error.reason { return failure }
            Issue.record("\(url): \(error)")
        }
        return nil
    }
}

/// Settings with `tls` and no proxy (the environment of the test run must not matter).
private func settings(_ tls: TLSSettings) -> TransportSettings {
    TransportSettings(tls: tls, proxy: .environment([:]))
}
