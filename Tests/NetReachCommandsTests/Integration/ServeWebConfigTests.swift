import Foundation
import NetReachTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `serve --web.config.file` as operators use it: curl and a real Prometheus over TLS with basic
/// authentication, client certificates judged side by side with Prometheus's own server reading
/// the same file (exporter-toolkit, the reference), and a SIGHUP that changes the certificate and
/// the users. Everything on 127.0.0.1; one test at a time (each starts Prometheus or Chromium).
@Suite(
    "netreach serve --web.config.file (integration)", .offPool, .serialized,
    .enabled(if: ExternalServer.available("openssl", "htpasswd", "prometheus", "curl")), .timeLimit(.minutes(4)))
struct ServeWebConfigTests {
    /// A directory with the test CA's certificates, a user `prom` whose password is `s3cret`
    /// (hashed by htpasswd -B, as operators hash it), and a self-signed client certificate.
    struct Files {
        let certificates: TestCertificates
        let directory: TemporaryDirectory
        let promHash: String

        static func make() async throws -> Files {
            let certificates = try await TestCertificates.make()
            let directory = try TemporaryDirectory("netreach-web")
            let made = try await ChildProcess.run(try ExternalServer.require("htpasswd"), ["-nbB", "prom", "s3cret"])
            let line = String(decoding: made.output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            let hash = String(try #require(line.split(separator: ":", maxSplits: 1).last, "htpasswd: \(line)"))
            let selfSigned = try await ChildProcess.run(
                try ExternalServer.require("openssl"),
                [
                    "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", directory.path("self.key"), "-out", directory.path("self.pem"), "-days", "1",
                    "-subj", "/CN=stranger", "-addext", "extendedKeyUsage=clientAuth",
                ])
            try #require(selfSigned.status == 0, "\(selfSigned.standardError)")
            return Files(certificates: certificates, directory: directory, promHash: hash)
        }

        func remove() {
            certificates.remove()
            directory.remove()
        }

        func cert(_ name: String) -> String { certificates.path(name) }

        /// TLS with the `server` certificate, and `prom` as the one user.
        var tlsWithProm: String {
            """
            tls_server_config:
              cert_file: \(cert("server.pem"))
              key_file: \(cert("server.key"))
            basic_auth_users:
              prom: \(promHash)
            """
        }

        /// Writes `web.yml` (replacing it) and returns its path.
        @discardableResult
        func write(_ text: String, as name: String = "web.yml") throws -> String {
            let path = directory.path(name)
            try text.write(toFile: path + ".new", atomically: false, encoding: .utf8)
            guard rename(path + ".new", path) == 0 else { throw ExternalServerError.commandFailed("rename \(path)") }
            return path
        }
    }

    /// curl's status for `url` (0: no HTTP answer, as when the handshake fails), with `extra`.
    static func status(_ url: String, _ extra: [String] = []) async throws -> Int {
        try await ServeClient.get(url, extra: ["-o", "/dev/null"] + extra).status
    }

    @Test func everyEndpointButTheHealthChecksAsksForThePasswordOverTLS() async throws {
        let files = try await Files.make()
        defer { files.remove() }
        let web = try files.write(
            """
            tls_server_config:
              cert_file: \(files.cert("server.pem"))
              key_file: \(files.cert("server.key"))
              min_version: TLS13
            http_server_config:
              headers:
                X-Frame-Options: deny
                X-Content-Type-Options: nosniff
            basic_auth_users:
              prom: \(files.promHash)
            """)
        let serve = try NetreachProcess.start(["serve", "--listen", "127.0.0.1:0", "--web.config.file", web])
        defer { serve.kill() }
        let base = try await ServeClient.baseURL(of: serve)
        #expect(base.hasPrefix("https://127.0.0.1:"), "\(serve.standardError)")
        let ca = ["--cacert", files.cert("ca.pem")]
        let prom = ca + ["-u", "prom:s3cret"]

        for path in [
            "/metrics", "/", "/api/v1/path", "/api/v1/events", "/probe?target=127.0.0.1", "/readyz?verbose",
            "/health", "/no-such-page",
        ] {
            let denied = try await ServeClient.get(base + path, extra: ca + ["-D", "-", "-o", "/dev/null"])
            #expect(denied.status == 401, "\(path) without a password: \(denied)")
            #expect(denied.body.contains("WWW-Authenticate: Basic realm=\"netreach\""), "\(path): \(denied.body)")
            #expect(denied.body.contains("X-Frame-Options: deny"), "\(path): \(denied.body)")
            #expect(try await Self.status(base + path, ca + ["-u", "prom:wrong"]) == 401, "\(path), a wrong password")
            #expect(try await Self.status(base + path, ca + ["-u", "other:s3cret"]) == 401, "\(path), a wrong name")
        }
        let metrics = try await ServeClient.get(base + "/metrics", extra: prom)
        #expect(metrics.status == 200 && metrics.body.contains("netreach_build_info"), "\(metrics)")
        let page = try await ServeClient.get(base + "/", extra: prom)
        #expect(page.status == 200 && page.body.contains("EventSource"), "\(page.status)")
        // The event stream, behind the same password: its first event arrives.
        let events = try await ServeClient.get(base + "/api/v1/events", extra: prom + ["-N", "--max-time", "3"])
        #expect(events.status == 200 && events.body.contains("data: "), "\(events)")
        // The kubelet's and systemd's checks answer without it; a word each.
        for path in ["/livez", "/readyz"] {
            let open = try await ServeClient.get(base + path, extra: ca)
            #expect(open.status == 200, "\(path): \(open)")
        }
        // TLS only, and only as new as the file says.
        #expect(try await Self.status(base.replacingOccurrences(of: "https:", with: "http:") + "/livez") != 200)
        #expect(try await Self.status(base + "/livez", ca + ["--tls-max", "1.2"]) == 0)
        #expect(try await Self.status(base + "/livez", ca + ["--tlsv1.3"]) == 200)
        // A name the certificate does not carry is refused by the client, as for any server.
        #expect(try await Self.status(base + "/livez", ["--cacert", files.cert("other.pem")]) == 0)
        serve.signal(SIGTERM)
        #expect(await serve.exitStatus() == 0, "\(serve.standardError)")
    }

    /// Each `client_auth_type`, with no client certificate, one the client CA issued, and a
    /// self-signed one: serve lets in exactly whom Prometheus's own server (exporter-toolkit,
    /// reading the same file) lets in, and that is Go's table.
    @Test func clientCertificatesAreJudgedAsExporterToolkitJudgesThem() async throws {
        let files = try await Files.make()
        defer { files.remove() }
        let clients: [(String, [String])] = [
            ("none", []),
            ("issued by the client CA", ["--cert", files.cert("client.pem"), "--key", files.cert("client.key")]),
            ("self-signed", ["--cert", files.directory.path("self.pem"), "--key", files.directory.path("self.key")]),
        ]
        // Go's crypto/tls: who gets in, per client above.
        let expected: [(String, [Bool])] = [
            ("NoClientCert", [true, true, true]),
            ("RequestClientCert", [true, true, true]),
            ("RequireAnyClientCert", [false, true, true]),
            ("VerifyClientCertIfGiven", [true, true, false]),
            ("RequireAndVerifyClientCert", [false, true, false]),
        ]
        for (mode, admitted) in expected {
            let caLine = mode == "NoClientCert" ? "" : "\n  client_ca_file: \(files.cert("ca.pem"))"
            let web = try files.write(
                """
                tls_server_config:
                  cert_file: \(files.cert("server.pem"))
                  key_file: \(files.cert("server.key"))
                  client_auth_type: \(mode)\(caLine)
                """)
            let serve = try NetreachProcess.start(["serve", "--listen", "127.0.0.1:0", "--web.config.file", web])
            defer { serve.kill() }
            let serveBase = try await ServeClient.baseURL(of: serve)
            let reference = try await PrometheusServer.start(webConfig: web, in: files.directory)
            defer { reference.stop() }
            for ((client, flags), admits) in zip(clients, admitted) {
                let ca = ["--cacert", files.cert("ca.pem")] + flags
                let ours = try await Self.status(serveBase + "/metrics", ca)
                let theirs = try await Self.status(reference.base + "/metrics", ca)
                #expect((ours == 200) == admits, "\(mode), client certificate \(client): serve answered \(ours)")
                #expect((ours == 200) == (theirs == 200), "\(mode), \(client): serve \(ours), Prometheus \(theirs)")
                print("ServeWebConfigTests: \(mode), client certificate \(client): serve \(ours), Prometheus \(theirs)")
            }
        }
    }

    /// Prometheus's scrape settings, unchanged: `scheme: https`, `tls_config.ca_file` and
    /// `basic_auth` scrape serve (up 1); the same with a wrong password is up 0 with a 401.
    @Test func prometheusScrapesOverTLSWithBasicAuthAndAWrongPasswordIsUpZero() async throws {
        let files = try await Files.make()
        defer { files.remove() }
        let serve = try NetreachProcess.start(
            ["serve", "--listen", "127.0.0.1:0", "--web.config.file", try files.write(files.tlsWithProm)])
        defer { serve.kill() }
        let target = try await ServeClient.baseURL(of: serve).replacingOccurrences(of: "https://", with: "")
        try files.write("s3cret\n", as: "password")
        func job(_ name: String, _ password: String) -> String {
            """
              - job_name: \(name)
                scheme: https
                tls_config:
                  ca_file: \(files.cert("ca.pem"))
                basic_auth:
                  username: prom
                  \(password)
                static_configs:
                  - targets: ["\(target)"]
            """
        }
        let configuration = try files.write(
            """
            global:
              scrape_interval: 1s
            scrape_configs:
            \(job("right", "password_file: \(files.directory.path("password"))"))
            \(job("wrong", "password: nope"))
            """, as: "prometheus.yml")
        let prometheus = try await PrometheusServer.start(configuration: configuration, in: files.directory)
        defer { prometheus.stop() }
        var targets: [String: (health: String, error: String)] = [:]
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline, !Task.isCancelled {
            targets = await prometheus.targets()
            if targets["right"]?.health == "up", targets["wrong"]?.health == "down" { break }
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect(targets["right"]?.health == "up", "\(targets) \(prometheus.standardError.suffix(2000))")
        #expect(targets["wrong"]?.health == "down", "\(targets)")
        #expect(targets["wrong"]?.error.contains("401") == true, "\(targets)")
        let up = try await ServeClient.get(prometheus.base + "/api/v1/query?query=netreach_build_info")
        #expect(up.body.contains("\"job\":\"right\""), "\(up.body)")
        print("ServeWebConfigTests: Prometheus's targets: \(targets)")
    }

    /// SIGHUP puts a new certificate and new users in force for new connections; a file that would
    /// turn TLS off, or that is broken, changes nothing and says so.
    @Test func sighupChangesTheCertificateAndUsersAndRefusesToTurnTLSOff() async throws {
        let files = try await Files.make()
        defer { files.remove() }
        func tls(_ name: String, users: String) -> String {
            """
            tls_server_config:
              cert_file: \(files.cert("\(name).pem"))
              key_file: \(files.cert("\(name).key"))
            basic_auth_users:
            \(users)
            """
        }
        let web = try files.write(tls("server", users: "  prom: \(files.promHash)"))
        let serve = try NetreachProcess.start(["serve", "--listen", "127.0.0.1:0", "--web.config.file", web])
        defer { serve.kill() }
        let base = try await ServeClient.baseURL(of: serve)
        let port = try #require(base.split(separator: ":").last.map(String.init))
        let ca = ["--cacert", files.cert("ca.pem"), "-k"]
        #expect(try await Self.subject(port) == "CN=localhost")
        #expect(try await Self.status(base + "/metrics", ca + ["-u", "prom:s3cret"]) == 200)

        // The other certificate, and a user of its own: in force for the next connection.
        let hash = try await ChildProcess.run(try ExternalServer.require("htpasswd"), ["-nbB", "ops", "n3w"])
        let opsLine = String(decoding: hash.output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        try files.write(
            tls("other", users: "  " + opsLine.replacingOccurrences(of: ":", with: ": ", range: opsLine.range(of: ":")))
        )
        serve.signal(SIGHUP)
        await LabPoll.until("serve says it reloaded", timeout: .seconds(30)) {
            serve.standardError.contains("reloaded \(web)")
        }
        #expect(try await Self.subject(port) == "CN=other.invalid", "\(serve.standardError)")
        #expect(try await Self.status(base + "/metrics", ca + ["-u", "prom:s3cret"]) == 401)
        let reloaded = try await ServeClient.get(base + "/metrics", extra: ca + ["-u", "ops:n3w"])
        #expect(reloaded.status == 200)
        #expect(reloaded.body.contains("netreach_config_last_reload_successful 1"), "\(reloaded.body.prefix(300))")

        // Plain HTTP by a reload: refused, with the reason; still TLS with the other certificate.
        for (file, reason) in [
            (
                "basic_auth_users:\n  ops: \(opsLine.split(separator: ":", maxSplits: 1)[1])\n",
                "TLS cannot be turned off"
            ),
            (tls("server", users: "  ops: not-a-hash"), "is not a bcrypt hash"),
        ] {
            try files.write(file)
            serve.signal(SIGHUP)
            await LabPoll.until("serve says why it did not reload", timeout: .seconds(30)) {
                serve.standardError.contains(reason)
            }
            #expect(try await Self.subject(port) == "CN=other.invalid")
            let kept = try await ServeClient.get(base + "/metrics", extra: ca + ["-u", "ops:n3w"])
            #expect(kept.status == 200)
            #expect(kept.body.contains("netreach_config_last_reload_successful 0"), "\(reason)")
        }
        #expect(serve.isRunning)
        serve.signal(SIGTERM)
        #expect(await serve.exitStatus() == 0, "\(serve.standardError)")
    }

    /// A Kubernetes Secret as the kubelet updates it: each file a link through `..data`, which is
    /// swapped for a link to a new directory in one rename. serve serves the renewed certificate
    /// and takes the new users without a signal; a renewal that is broken keeps what runs.
    @Test func aSecretRenewedAsTheKubeletRenewsItIsServedWithoutASignal() async throws {
        let files = try await Files.make()
        defer { files.remove() }
        let secret = files.directory.path("secret")
        let manager = FileManager.default
        func publish(_ generation: String, certificate: String, users: String) throws {
            let directory = "\(secret)/..\(generation)"
            try manager.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try manager.copyItem(atPath: files.cert("\(certificate).pem"), toPath: "\(directory)/tls.crt")
            try manager.copyItem(atPath: files.cert("\(certificate).key"), toPath: "\(directory)/tls.key")
            try "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\nbasic_auth_users:\n\(users)"
                .write(toFile: "\(directory)/web.yml", atomically: true, encoding: .utf8)
            try manager.createSymbolicLink(atPath: "\(secret)/..data_tmp", withDestinationPath: "..\(generation)")
            guard rename("\(secret)/..data_tmp", "\(secret)/..data") == 0 else {
                throw ExternalServerError.commandFailed("rename ..data_tmp")
            }
        }
        try publish("one", certificate: "server", users: "  prom: \(files.promHash)\n")
        for name in ["tls.crt", "tls.key", "web.yml"] {
            try manager.createSymbolicLink(atPath: "\(secret)/\(name)", withDestinationPath: "..data/\(name)")
        }
        let serve = try NetreachProcess.start(
            ["serve", "--listen", "127.0.0.1:0", "--web.config.file", "\(secret)/web.yml"])
        defer { serve.kill() }
        let base = try await ServeClient.baseURL(of: serve)
        let port = try #require(base.split(separator: ":").last.map(String.init))
        #expect(try await Self.subject(port) == "CN=localhost")

        // Renewed: the other certificate, and no password for prom any more but a broken one.
        try publish("two", certificate: "other", users: "  prom: \(files.promHash)\n")
        var subject = ""
        for _ in 0..<100 where subject != "CN=other.invalid" {
            try await Task.sleep(for: .milliseconds(300))
            subject = try await Self.subject(port)
        }
        #expect(subject == "CN=other.invalid", "\(serve.standardError)")
        #expect(serve.standardError.contains("changed, now in force"), "\(serve.standardError)")

        try publish("three", certificate: "server", users: "  prom: not-a-hash\n")
        await LabPoll.until("serve says the broken renewal is not used", timeout: .seconds(30)) {
            _ = try? ChildProcess.runBlocking(
                ServeClient.curl, ["-sk", "-o", "/dev/null", base + "/livez"], timeout: .seconds(10))
            return serve.standardError.contains("is not a bcrypt hash")
        }
        #expect(try await Self.subject(port) == "CN=other.invalid")
        #expect(try await Self.status(base + "/metrics", ["-k", "-u", "prom:s3cret"]) == 200)
        serve.signal(SIGTERM)
        #expect(await serve.exitStatus() == 0, "\(serve.standardError)")
    }

    /// The status page in Chromium behind the password, as a person meets it: a prompt they
    /// cancel gets "Unauthorized" and no paths; the password typed once shows the paths, and the
    /// page's event stream (a request of its own) is sent with it too.
    @Test(.enabled(if: ExternalServer.available("chromium")))
    func theStatusPageAndItsEventStreamWorkInABrowserOnceThePasswordIsGiven() async throws {
        let files = try await Files.make()
        defer { files.remove() }
        let serve = try NetreachProcess.start(
            ["serve", "--listen", "127.0.0.1:0", "--web.config.file", try files.write(files.tlsWithProm)])
        defer { serve.kill() }
        let base = try await ServeClient.baseURL(of: serve)
        let driver = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Scripts/status_page_auth_driver.py").path
        let run = try await ChildProcess.run(
            "/usr/bin/python3", [driver, base + "/", "prom", "s3cret", files.cert("server.pem")],
            timeout: .seconds(150))
        try #require(run.status == 0, "driver: \(run.standardError)")
        let report = try #require(
            try JSONSerialization.jsonObject(with: Data(run.standardOutput.utf8)) as? [String: Any])
        #expect(report["refusedChallenges"] as? Int == 1, "\(report)")
        #expect((report["refusedText"] as? String)?.contains("Unauthorized") == true, "\(report)")
        #expect(report["challenges"] as? Int == 1, "\(report)")
        #expect(report["pathShown"] as? Bool == true, "\(report)")
        #expect(report["streamOpen"] as? Bool == true, "\(report)")
        print("ServeWebConfigTests: the status page in Chromium behind the password: \(report)")
        serve.signal(SIGTERM)
        #expect(await serve.exitStatus() == 0, "\(serve.standardError)")
    }

    /// `Deploy/netreach/web.yml` filled in as its comments say: the reference's own checker
    /// (`promtool check web-config`, exporter-toolkit's Validate) and serve both take it.
    @Test(.enabled(if: ExternalServer.available("promtool")))
    func deploysWebConfigurationIsValidForPromtoolAndServe() async throws {
        let files = try await Files.make()
        defer { files.remove() }
        let web = try await DeployWebConfig.install(
            in: files.directory.url.path, certificates: files.certificates, password: "s3cret")
        let checked = try await ChildProcess.run(try ExternalServer.require("promtool"), ["check", "web-config", web])
        #expect(checked.status == 0, "\(checked.standardOutput)\(checked.standardError)")
        let serve = try NetreachProcess.start(["serve", "--listen", "127.0.0.1:0", "--web.config.file", web])
        defer { serve.kill() }
        let base = try await ServeClient.baseURL(of: serve)
        let ca = ["--cacert", files.cert("ca.pem")]
        #expect(try await Self.status(base + "/metrics", ca + ["-u", "\(DeployWebConfig.user):s3cret"]) == 200)
        serve.signal(SIGTERM)
        #expect(await serve.exitStatus() == 0, "\(serve.standardError)")
    }

    @Test func aFileThatCannotBeUsedStopsServeAtStartWithExit78() async throws {
        let files = try await Files.make()
        defer { files.remove() }
        let cases: [(String, String)] = [
            (
                "tls_server_config:\n  cert_file: \(files.cert("server.pem"))\n  key_file: \(files.cert("other.key"))\n",
                "does not belong to the certificate"
            ),
            (
                "tls_server_config:\n  cert_file: \(files.cert("missing.pem"))\n  key_file: \(files.cert("server.key"))\n",
                "cert_file cannot be read"
            ),
            (
                "tls_server_config:\n  cert_file: \(files.cert("server.key"))\n  key_file: \(files.cert("server.key"))\n",
                "cert_file cannot be read"
            ),
            ("basic_auth_users:\n  prom: s3cret\n", "is not a bcrypt hash"),
            (
                "tls_server_config:\n  cert_file: a\n  key_file: b\n  cipher_suites: [TLS_AES_128_GCM_SHA256]\n",
                "cipher_suites is not supported"
            ),
        ]
        for (text, reason) in cases {
            let web = try files.write(text)
            let finished = try await ChildProcess.run(
                try NetreachProcess.executable().path, ["serve", "--listen", "127.0.0.1:0", "--web.config.file", web])
            #expect(finished.status == 78, "\(reason): \(finished.standardError)")
            #expect(finished.standardError.contains(reason), "\(finished.standardError)")
        }
        let missing = try await ChildProcess.run(
            try NetreachProcess.executable().path, ["serve", "--web.config.file", "/nonexistent/web.yml"])
        #expect(
            missing.status == 78 && missing.standardError.contains("/nonexistent/web.yml"), "\(missing.standardError)")
    }

    /// The subject of the certificate a new connection to 127.0.0.1:`port` is shown.
    static func subject(_ port: String) async throws -> String {
        let openssl = try ExternalServer.require("openssl")
        let shown = try await ChildProcess.run(
            "/bin/sh",
            [
                "-c",
                "\(openssl) s_client -connect 127.0.0.1:\(port) </dev/null 2>/dev/null | \(openssl) x509 -noout -subject",
            ],
            timeout: .seconds(30))
        let line = String(decoding: shown.output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return line.replacingOccurrences(of: "subject=", with: "").replacingOccurrences(of: " ", with: "")
    }
}

/// Prometheus's own server on 127.0.0.1: a scraper, or (with `webConfig`) exporter-toolkit's web
/// configuration in its reference implementation.
struct PrometheusServer {
    let process: ChildProcess
    let base: String

    static func start(
        configuration: String? = nil, webConfig: String? = nil, in directory: TemporaryDirectory
    ) async throws -> PrometheusServer {
        let port = try ExternalServer.freePort()
        let data = directory.path("prometheus-data-\(port)")
        var configurationPath = configuration
        if configurationPath == nil {
            configurationPath = directory.path("empty-prometheus.yml")
            try "global: {}\n".write(toFile: configurationPath!, atomically: true, encoding: .utf8)
        }
        var arguments = [
            "--config.file=\(configurationPath!)", "--storage.tsdb.path=\(data)",
            "--web.listen-address=127.0.0.1:\(port)",
        ]
        if let webConfig { arguments.append("--web.config.file=\(webConfig)") }
        let process = try ChildProcess(try ExternalServer.require("prometheus"), arguments)
        await LabPoll.until("Prometheus listens", timeout: .seconds(60)) {
            ExternalServer.canConnect(host: "127.0.0.1", port: port) || !process.isRunning
        }
        guard process.isRunning else {
            throw ExternalServerError.didNotStart("prometheus: \(process.standardError.suffix(2000))")
        }
        return PrometheusServer(process: process, base: "\(webConfig == nil ? "http" : "https")://127.0.0.1:\(port)")
    }

    var standardError: String { process.standardError }

    func stop() {
        process.kill()
    }

    /// Each scrape job's target: its health and last error (one target per job).
    func targets() async -> [String: (health: String, error: String)] {
        guard let answer = try? await ServeClient.get(base + "/api/v1/targets"),
            let object = try? JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any],
            let active = ((object["data"] as? [String: Any])?["activeTargets"]) as? [[String: Any]]
        else { return [:] }
        var result: [String: (health: String, error: String)] = [:]
        for target in active {
            guard let job = (target["labels"] as? [String: String])?["job"] else { continue }
            result[job] = (target["health"] as? String ?? "", target["lastError"] as? String ?? "")
        }
        return result
    }
}

/// `Deploy/netreach/web.yml` as an operator fills it in: beside `tls.crt` and `tls.key` (the test
/// CA's `server` certificate: localhost, 127.0.0.1, ::1), its user `prometheus` given `password`
/// (hashed by htpasswd -B). The sample's other lines are used as they are.
enum DeployWebConfig {
    static let user = "prometheus"

    /// Writes the three files into `directory` and returns web.yml's path.
    static func install(in directory: String, certificates: TestCertificates, password: String) async throws -> String {
        let manager = FileManager.default
        for (from, to) in [("server.pem", "tls.crt"), ("server.key", "tls.key")] {
            try? manager.removeItem(atPath: "\(directory)/\(to)")
            try manager.copyItem(atPath: certificates.path(from), toPath: "\(directory)/\(to)")
        }
        let made = try await ChildProcess.run(try ExternalServer.require("htpasswd"), ["-nbB", user, password])
        let line = String(decoding: made.output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        let hash = String(try #require(line.split(separator: ":", maxSplits: 1).last, "htpasswd: \(line)"))
        var text = try String(
            contentsOf: DeployTests.deploy.appendingPathComponent("netreach/web.yml"), encoding: .utf8)
        let sample = try #require(
            text.range(of: #"\n  prometheus: \$2y\$[^\n]+"#, options: .regularExpression),
            "Deploy/netreach/web.yml no longer has the user prometheus")
        text.replaceSubrange(sample, with: "\n  \(user): \(hash)")
        let path = "\(directory)/web.yml"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }
}
