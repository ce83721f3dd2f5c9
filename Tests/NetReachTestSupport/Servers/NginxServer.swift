import Foundation

/// nginx on 127.0.0.1, started by a test with a configuration in a temporary directory, one
/// `server` per behaviour the TLS and decoding tests need:
///
/// | Port | What |
/// |---|---|
/// | ``trusted`` | https with `server.pem` (localhost, 127.0.0.1, ::1) |
/// | ``wrongHost`` | https with `other.pem` (other.invalid) |
/// | ``expired`` | https with `expired.pem` |
/// | ``mutual`` | https with `server.pem`, and `ssl_verify_client on` against the test CA |
/// | ``plain`` | http; `/data.json` is a highly compressible JSON file sent gzipped (`gzip_min_length 0`) |
/// | ``notYetValid`` | https with `future.pem` |
/// | ``addressOnly`` | https with `ip-only.pem` (the address 127.0.0.1 only) |
/// | ``nameOnly`` | https with `name-only.pem` (the name localhost only) |
///
/// Every location answers 200 with a short body; the access log (``accessLog()``) shows what
/// reached nginx as HTTP. A request whose handshake failed never appears there.
///
/// ```swift
/// let nginx = try await NginxServer.start(certificates: certificates)
/// // ... and at the end: await nginx.stop()
/// ```
package final class NginxServer: Sendable {
    package let trusted: Int
    package let wrongHost: Int
    package let expired: Int
    package let mutual: Int
    package let plain: Int
    package let notYetValid: Int
    package let addressOnly: Int
    package let nameOnly: Int
    private let directory: TemporaryDirectory
    private let process: ExternalServer

    /// An RFC 8908 captive-portal API on the trusted server: `/captive` (406 unless asked for
    /// `application/captive+json`), `/not-captive`, and `/captive-number` (`"captive": 1`, not a boolean).
    package static let captivePortalAPI = #"""
        location = /captive {
            default_type application/captive+json;
            if ($http_accept != "application/captive+json") { return 406; }
            return 200 '{"captive": true, "user-portal-url": "https://login.test/portal", "venue-info-url": "http://venue.test/", "seconds-remaining": 30, "can-extend-session": true}';
        }
        location = /not-captive { default_type application/captive+json; return 200 '{"captive": false}'; }
        location = /captive-number { default_type application/captive+json; return 200 '{"captive": 1}'; }
        """#

    /// The JSON `/data.json` serves (about 5 MB).
    package let json: Data

    private init(ports: [Int], directory: TemporaryDirectory, process: ExternalServer, json: Data) {
        (trusted, wrongHost, expired, mutual, plain) = (ports[0], ports[1], ports[2], ports[3], ports[4])
        (notYetValid, addressOnly, nameOnly) = (ports[5], ports[6], ports[7])
        self.directory = directory
        self.process = process
        self.json = json
    }

    package static func start(certificates: TestCertificates) async throws -> NginxServer {
        try await ExternalServer.withFreePorts(8) { ports in try await start(certificates: certificates, ports: ports) }
    }

    private static func start(certificates: TestCertificates, ports: [Int]) async throws -> NginxServer {
        let nginx = try ExternalServer.require("nginx")
        let directory = try TemporaryDirectory("netreach-nginx")
        // The same object over and over: gzip shrinks it about 100 times and more.
        let json = try await offPool { () throws -> Data in
            let item = #"{"id":12345,"name":"NetReach test item","tags":["alpha","beta","gamma"],"ok":true}"#
            let json = Data(("[" + Array(repeating: item, count: 60_000).joined(separator: ",") + "]\n").utf8)
            try FileManager.default.createDirectory(atPath: directory.path("www"), withIntermediateDirectories: true)
            try json.write(to: directory.url.appendingPathComponent("www/data.json"))
            return json
        }
        let cert = { (name: String) in
            "ssl_certificate \(certificates.path("\(name).pem")); ssl_certificate_key \(certificates.path("\(name).key"));"
        }
        let reply = #"location / { return 200 "ok\n"; }"#
        let http = """
                types { application/json json; }
                server {
                    listen 127.0.0.1:\(ports[0]) ssl; \(cert("server"))
                    \(Self.captivePortalAPI)
                    \(reply)
                }
                server { listen 127.0.0.1:\(ports[1]) ssl; \(cert("other")) \(reply) }
                server { listen 127.0.0.1:\(ports[2]) ssl; \(cert("expired")) \(reply) }
                server { listen 127.0.0.1:\(ports[5]) ssl; \(cert("future")) \(reply) }
                server { listen 127.0.0.1:\(ports[6]) ssl; \(cert("ip-only")) \(reply) }
                server { listen 127.0.0.1:\(ports[7]) ssl; \(cert("name-only")) \(reply) }
                server {
                    listen 127.0.0.1:\(ports[3]) ssl; \(cert("server"))
                    ssl_verify_client on; ssl_client_certificate \(certificates.path("ca.pem"));
                    location / { return 200 "client $ssl_client_s_dn\\n"; }
                }
                server {
                    listen 127.0.0.1:\(ports[4]);
                    root \(directory.path("www"));
                    gzip on; gzip_types application/json; gzip_min_length 0; gzip_comp_level 6;
                }
            """
        let process = try await launch(nginx, http: http, ports: ports, in: directory)
        return NginxServer(ports: ports, directory: directory, process: process, json: json)
    }

    /// Writes a configuration whose `http` block holds `http` (after the access log and temporary
    /// paths, all in `directory`), starts nginx with it and waits for `ports`; removes `directory`
    /// if that fails.
    fileprivate static func launch(
        _ nginx: String, http: String, ports: [Int], in directory: TemporaryDirectory
    ) async throws -> ExternalServer {
        let temp = directory.path("tmp")
        let configuration = """
            daemon off;
            master_process off;
            worker_processes 1;
            pid \(directory.path("nginx.pid"));
            error_log \(directory.path("error.log")) info;
            events { worker_connections 64; }
            http {
                access_log \(directory.path("access.log"));
                client_body_temp_path \(temp); proxy_temp_path \(temp); fastcgi_temp_path \(temp);
                uwsgi_temp_path \(temp); scgi_temp_path \(temp);
            \(http)
            }
            """
        do {
            try FileManager.default.createDirectory(atPath: temp, withIntermediateDirectories: true)
            try configuration.write(toFile: directory.path("nginx.conf"), atomically: true, encoding: .utf8)
            return try await ExternalServer.start(
                executable: nginx,
                arguments: [
                    "-e", directory.path("error.log"), "-p", directory.url.path, "-c", directory.path("nginx.conf"),
                ],
                logFile: directory.url.appendingPathComponent("stdout.log"), ports: ports)
        } catch {
            directory.remove()
            throw error
        }
    }

    /// The access log's lines so far (nginx writes each when the request is done).
    package func accessLog() -> [String] {
        Self.accessLog(in: directory)
    }

    fileprivate static func accessLog(in directory: TemporaryDirectory) -> [String] {
        let text = (try? String(contentsOfFile: directory.path("access.log"), encoding: .utf8)) ?? ""
        return text.split(separator: "\n").map(String.init)
    }

    /// Terminates nginx and removes its directory.
    package func stop() async {
        await process.stop()
        directory.remove()
    }
}

/// Makes certificates, starts nginx with them, runs `body`, and stops and removes everything.
package func withNginx(_ body: (NginxServer, TestCertificates) async throws -> Void) async throws {
    let certificates = try await TestCertificates.make()
    defer { certificates.remove() }
    let nginx = try await NginxServer.start(certificates: certificates)
    do {
        try await body(nginx, certificates)
    } catch {
        await nginx.stop()
        throw error
    }
    await nginx.stop()
}

/// nginx serving what a TLS client refuses by default, and one server it must accept, for the TLS
/// floor tests (issue 47): the files of `TestCertificates.make(weak: true)`, every location answering
/// 200 `ok`.
///
/// | Port | What |
/// |---|---|
/// | ``tlsv1`` | TLS 1.0 only, `server.pem` |
/// | ``tlsv13`` | TLS 1.3 only, `server.pem` |
/// | ``rsa1024`` | `rsa1024.pem`: an RSA key of 1024 bits |
/// | ``sha1`` | `sha1.pem`: signed with SHA-1 |
/// | ``weakIntermediate`` | `via-weak-ca.pem` (fine) and the `weak-ca.pem` that issued it (signed with SHA-1) |
///
/// Debian's OpenSSL 3 runs at security level 2, under which nginx refuses to load an RSA-1024 key
/// (`SSL_CTX_use_certificate ... ee key too small`) and to speak TLS 1.0, so the `http` block sets
/// `ssl_ciphers DEFAULT@SECLEVEL=0` before any certificate.
///
/// ```swift
/// try await withLegacyNginx { nginx, certificates in
///     // https://127.0.0.1:\(nginx.rsa1024)/ ...
/// }
/// ```
package final class LegacyTLSNginx: Sendable {
    package let tlsv1: Int
    package let tlsv13: Int
    package let rsa1024: Int
    package let sha1: Int
    package let weakIntermediate: Int
    private let directory: TemporaryDirectory
    private let process: ExternalServer

    private init(ports: [Int], directory: TemporaryDirectory, process: ExternalServer) {
        (tlsv1, tlsv13, rsa1024, sha1, weakIntermediate) = (ports[0], ports[1], ports[2], ports[3], ports[4])
        self.directory = directory
        self.process = process
    }

    package static func start(certificates: TestCertificates) async throws -> LegacyTLSNginx {
        try await ExternalServer.withFreePorts(5) { ports in
            let nginx = try ExternalServer.require("nginx")
            let directory = try TemporaryDirectory("netreach-nginx-legacy")
            let server = { (port: Int, certificate: String, key: String, extra: String) in
                """
                server {
                    listen 127.0.0.1:\(port) ssl; \(extra)
                    ssl_certificate \(certificates.path(certificate)); ssl_certificate_key \(certificates.path(key));
                    location / { return 200 "ok\\n"; }
                }
                """
            }
            let http = [
                "ssl_ciphers DEFAULT@SECLEVEL=0;",
                server(ports[0], "server.pem", "server.key", "ssl_protocols TLSv1;"),
                server(ports[1], "server.pem", "server.key", "ssl_protocols TLSv1.3;"),
                server(ports[2], "rsa1024.pem", "rsa1024.key", ""),
                server(ports[3], "sha1.pem", "sha1.key", ""),
                server(ports[4], "via-weak-ca-chain.pem", "via-weak-ca.key", ""),
            ].joined(separator: "\n")
            let process = try await NginxServer.launch(nginx, http: http, ports: ports, in: directory)
            return LegacyTLSNginx(ports: ports, directory: directory, process: process)
        }
    }

    /// The access log's lines so far: a request whose handshake failed never appears there.
    package func accessLog() -> [String] {
        NginxServer.accessLog(in: directory)
    }

    /// Terminates nginx and removes its directory.
    package func stop() async {
        await process.stop()
        directory.remove()
    }
}

/// Makes the weak certificates too, starts ``LegacyTLSNginx`` with them, runs `body`, and stops and
/// removes everything.
package func withLegacyNginx(_ body: (LegacyTLSNginx, TestCertificates) async throws -> Void) async throws {
    let certificates = try await TestCertificates.make(weak: true)
    defer { certificates.remove() }
    let nginx = try await LegacyTLSNginx.start(certificates: certificates)
    do {
        try await body(nginx, certificates)
    } catch {
        await nginx.stop()
        throw error
    }
    await nginx.stop()
}
