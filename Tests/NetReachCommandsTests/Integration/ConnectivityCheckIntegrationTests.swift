import Foundation
import NetReachTestSupport
import Testing

@testable import NetReach

#if canImport(Glibc)
import Glibc
#endif

/// `netreach check` run inside a lab namespace (`ip netns exec`) whose default route leads to a
/// gateway namespace; the probe server listens there on 10.123.1.1, beyond the local network, and
/// switches answers by path. Every verdict is checked from both ends: the exit status and output,
/// and the requests the server saw. Nothing leaves the two namespaces.
@Suite(
    "netreach check in network namespaces (integration)", .needsNamespaceRoot, .offPool, .serialized,
    .timeLimit(.minutes(3)))
struct ConnectivityCheckIntegrationTests {
    static let probeAddress = "10.123.1.1"

    /// A lab whose gateway namespace answers on 10.123.0.1 (the default route) and holds the
    /// probe server's address.
    static func withGateway(_ body: (NetnsLab) async throws -> Void) async throws {
        try await NetnsLab.withLab { lab in
            try await lab.peerIP("link", "set", "lo", "up")
            try await lab.peerIP("addr", "add", "\(NetnsLab.ipv4Gateway)/24", "dev", NetnsLab.peerInterface)
            try await lab.peerIP("addr", "add", "\(probeAddress)/32", "dev", "lo")
            try await lab.waitForCarrier()
            try await body(lab)
        }
    }

    /// The server's answers: `/204` passes; `/portal` redirects to a login page; `/html` is a
    /// hotel's page; `/big` is 200 KiB; `/online` is NetworkManager's text; `/reset` closes.
    static func answers(_ line: String) -> NamespaceHTTPServer.Reply {
        let path = line.split(separator: " ").dropFirst().first.map(String.init) ?? "/"
        switch path {
        case "/204": return .response("204 No Content")
        case "/portal":
            return .response("302 Found", headers: ["Location: http://\(probeAddress)/login"], body: "moved")
        case "/html": return .response("200 OK", body: "<html><body>Welcome to Hotel Wi-Fi. Sign in.</body></html>")
        case "/big": return .response("200 OK", body: String(repeating: "x", count: 200 * 1024))
        case "/online": return .response("200 OK", body: "NetworkManager is online\n")
        case "/reset": return .close
        default: return .response("404 Not Found")
        }
    }

    /// Runs `netreach check ARGUMENTS...` inside the lab.
    static func check(_ lab: NetnsLab, _ arguments: String...) throws -> RunResult {
        try run(
            LabCommand.ipExecutable,
            ["netns", "exec", lab.name, try NetreachProcess.executable().path, "check"] + arguments)
    }

    @Test("204 is full; NetworkManager's text is full; the server saw one probe each")
    func full() async throws {
        try await Self.withGateway { lab in
            let server = try NamespaceHTTPServer(
                namespace: lab.peerName, address: Self.probeAddress, reply: Self.answers)
            defer { server.stop() }
            let base = "http://\(Self.probeAddress):\(server.port)"
            let plain = try Self.check(lab, "--probe", "\(base)/204")
            #expect(plain.status == 0, "\(plain.output)\(plain.error)")
            #expect(plain.output.hasPrefix("full (ipv4 full, ipv6 "), "\(plain.output)")
            #expect(plain.output.contains("HTTP 204"), "\(plain.output)")
            let text = try Self.check(lab, "--probe", "\(base)/online=NetworkManager is online", "--family", "4")
            #expect(text.status == 0, "\(text.output)\(text.error)")
            #expect(server.received.map(\.requestLine) == ["GET /204 HTTP/1.1", "GET /online HTTP/1.1"])
        }
    }

    @Test("A redirect is a portal with its login URL; another page or 200 KiB is a portal too")
    func portals() async throws {
        try await Self.withGateway { lab in
            let server = try NamespaceHTTPServer(
                namespace: lab.peerName, address: Self.probeAddress, reply: Self.answers)
            defer { server.stop() }
            let base = "http://\(Self.probeAddress):\(server.port)"
            let redirect = try Self.check(lab, "--probe", "\(base)/portal")
            #expect(redirect.status == 80, "\(redirect.output)\(redirect.error)")
            #expect(
                redirect.output.hasPrefix("portal: sign in at http://\(Self.probeAddress)/login"), "\(redirect.output)")
            let page = try Self.check(lab, "--probe", "\(base)/html", "--json")
            #expect(page.status == 80)
            try CLIJSONSchemaTests.expectConforms(page.output.trimmingCharacters(in: .newlines))
            let object = try #require(try JSONSerialization.jsonObject(with: page.outputData) as? [String: Any])
            #expect(object["status"] as? String == "satisfied", "the path, as status --json prints it")
            let json = try #require(object["connectivity"] as? [String: Any])
            #expect(json["level"] as? String == "portal")
            let ipv4 = try #require(json["ipv4"] as? [String: Any])
            let probes = try #require(ipv4["probes"] as? [[String: Any]])
            #expect(probes.first?["status"] as? Int == 200)
            #expect(probes.first?["verdict"] as? String == "portal")
            let wrongBody = try Self.check(lab, "--probe", "\(base)/online=Some other service is online")
            #expect(wrongBody.status == 80, "\(wrongBody.output)")
            #expect(wrongBody.output.contains("HTTP 200 with another body"), "\(wrongBody.output)")
            let big = try Self.check(lab, "--probe", "\(base)/big=200")
            #expect(big.status == 80, "\(big.output)")
            #expect(big.output.contains("over 102400 bytes"), "\(big.output)")
            // Never followed: nobody asked for /login.
            #expect(!server.received.contains { $0.requestLine.contains("/login") })
        }
    }

    @Test("No answer is limited: closed, refused, held open past the probe timeout")
    func limited() async throws {
        try await Self.withGateway { lab in
            let server = try NamespaceHTTPServer(namespace: lab.peerName, address: Self.probeAddress) { line in
                line.contains("/hang") ? .hang : Self.answers(line)
            }
            defer { server.stop() }
            let base = "http://\(Self.probeAddress):\(server.port)"
            let closed = try Self.check(lab, "--probe", "\(base)/reset")
            #expect(closed.status == 81, "\(closed.output)\(closed.error)")
            #expect(closed.output.hasPrefix("limited"), "\(closed.output)")
            let refused = try Self.check(lab, "--probe", "http://\(Self.probeAddress):9/204")
            #expect(refused.status == 81, "\(refused.output)")
            #expect(refused.output.contains("Connection refused"), "\(refused.output)")
            let started = ContinuousClock.now
            let held = try Self.check(lab, "--probe", "\(base)/hang", "--probe-timeout", "700ms")
            #expect(held.status == 81, "\(held.output)")
            // The server holds the connection for ever: only the 700 ms probe timeout ends it.
            #expect(ContinuousClock.now - started < .seconds(30))
        }
    }

    @Test(
        "An https probe whose certificate is not trusted was intercepted: a portal, not offline, and no request got through; trusting the certificate makes the same server full"
    )
    func untrustedCertificate() async throws {
        try await Self.withGateway { lab in
            let nginx = try GatewayTLSServer.start(namespace: lab.peerName, address: Self.probeAddress)
            defer { nginx.stop() }
            let url = "https://\(Self.probeAddress)/generate_204"
            let untrusted = try Self.check(lab, "--probe", url, "--family", "4")
            #expect(untrusted.status == 80, "\(untrusted.output)\(untrusted.error)")
            #expect(untrusted.output.hasPrefix("portal (ipv4 portal"), "\(untrusted.output)")
            #expect(untrusted.output.contains("intercepted"), "\(untrusted.output)")
            #expect(nginx.requests().isEmpty, "the handshake failed: no request reached the server")

            let trusted = try run(
                LabCommand.ipExecutable,
                [
                    "netns", "exec", lab.name, "/usr/bin/env", "SSL_CERT_FILE=\(nginx.certificate)",
                    try NetreachProcess.executable().path, "check", "--probe", url, "--family", "4",
                ])
            #expect(trusted.status == 0, "\(trusted.output)\(trusted.error)")
            #expect(trusted.output.hasPrefix("full (ipv4 full"), "\(trusted.output)")
            #expect(nginx.requests() == ["GET /generate_204 HTTP/1.1 204"])
        }
    }

    @Test("IPv4 full while IPv6 is limited: each family judged by its own probe, overall full, both in the evidence")
    func familiesApart() async throws {
        try await NetnsLab.withLab(NetnsLab.Setup(ipv4: true, ipv6: true)) { lab in
            let probeAddress6 = "2001:db8:124::1"
            try await lab.peerIP("link", "set", "lo", "up")
            try await lab.peerIP("addr", "add", "\(NetnsLab.ipv4Gateway)/24", "dev", NetnsLab.peerInterface)
            try await lab.peerIP("addr", "add", "\(NetnsLab.ipv6Gateway)/64", "dev", NetnsLab.peerInterface, "nodad")
            try await lab.peerIP("addr", "add", "\(Self.probeAddress)/32", "dev", "lo")
            try await lab.peerIP("addr", "add", "\(probeAddress6)/128", "dev", "lo", "nodad")
            try await lab.waitForCarrier()
            // The probe server answers over IPv4 only: the IPv6 probe reaches the gateway and is refused.
            let server = try NamespaceHTTPServer(
                namespace: lab.peerName, address: Self.probeAddress, reply: Self.answers)
            defer { server.stop() }
            let result = try Self.check(
                lab, "--probe", "http://\(Self.probeAddress):\(server.port)/204",
                "--probe", "http://[\(probeAddress6)]:\(server.port)/204", "--json")
            #expect(result.status == 0, "\(result.output)\(result.error)")
            let object = try #require(
                try JSONSerialization.jsonObject(with: result.outputData) as? [String: Any], "\(result.output)")
            let json = try #require(object["connectivity"] as? [String: Any])
            #expect(json["level"] as? String == "full")
            let ipv4 = try #require(json["ipv4"] as? [String: Any])
            let ipv6 = try #require(json["ipv6"] as? [String: Any])
            #expect(ipv4["level"] as? String == "full")
            #expect(ipv6["level"] as? String == "limited")
            let probes4 = try #require(ipv4["probes"] as? [[String: Any]])
            let probes6 = try #require(ipv6["probes"] as? [[String: Any]])
            // Each probe went over its own family only.
            #expect(probes4.map { $0["url"] as? String } == ["http://\(Self.probeAddress):\(server.port)/204"])
            #expect(probes6.map { $0["url"] as? String } == ["http://[\(probeAddress6)]:\(server.port)/204"])
            #expect(probes6.first?["verdict"] as? String == "failed", "\(probes6)")
            #expect(server.received.map(\.requestLine) == ["GET /204 HTTP/1.1"])

            let text = try Self.check(
                lab, "--probe", "http://\(Self.probeAddress):\(server.port)/204",
                "--probe", "http://[\(probeAddress6)]:\(server.port)/204")
            #expect(text.output.hasPrefix("full (ipv4 full, ipv6 limited)"), "\(text.output)")
        }
    }

    @Test("An IPv6-only namespace: IPv4 is none (no address at all), not local; IPv6 is judged by its probe")
    func ipv6Only() async throws {
        try await NetnsLab.withLab(NetnsLab.Setup(ipv4: false, ipv6: true)) { lab in
            let probeAddress6 = "2001:db8:124::1"
            try await lab.peerIP("link", "set", "lo", "up")
            try await lab.peerIP("addr", "add", "\(NetnsLab.ipv6Gateway)/64", "dev", NetnsLab.peerInterface, "nodad")
            try await lab.peerIP("addr", "add", "\(probeAddress6)/128", "dev", "lo", "nodad")
            try await lab.waitForCarrier()
            // Nothing listens behind the probe: refused, so IPv6 is limited and decides the verdict.
            let result = try Self.check(lab, "--probe", "http://[\(probeAddress6)]:9/204", "--json")
            let object = try #require(
                try JSONSerialization.jsonObject(with: result.outputData) as? [String: Any], "\(result.output)")
            let json = try #require(object["connectivity"] as? [String: Any])
            #expect((json["ipv4"] as? [String: Any])?["level"] as? String == "none", "\(json)")
            #expect((json["ipv6"] as? [String: Any])?["level"] as? String == "limited", "\(json)")
            #expect(json["level"] as? String == "limited", "\(json)")
            let text = try Self.check(lab, "--probe", "http://[\(probeAddress6)]:9/204")
            #expect(text.output.hasPrefix("limited (ipv4 none, ipv6 limited)"), "\(text.output)")
        }
    }

    @Test("The path decides without a probe: no default route is local, no link is none")
    func pathFacts() async throws {
        try await Self.withGateway { lab in
            let server = try NamespaceHTTPServer(
                namespace: lab.peerName, address: Self.probeAddress, reply: Self.answers)
            defer { server.stop() }
            let base = "http://\(Self.probeAddress):\(server.port)"
            try await lab.deleteDefaultRoute()
            let local = try Self.check(lab, "--probe", "\(base)/204")
            #expect(local.status == 82, "\(local.output)")
            #expect(local.output.hasPrefix("local"), "\(local.output)")
            try await lab.setLink(up: false)
            let none = try Self.check(lab, "--probe", "\(base)/204")
            #expect(none.status == 4, "\(none.output)")
            #expect(none.output.hasPrefix("none"), "\(none.output)")
            #expect(server.received.isEmpty, "no probe without a route")
        }
    }

    @Test(
        "--namespace: a probe by name, resolved by dnsmasq in the gateway through /etc/netns/NAME/resolv.conf; resolver down is limited, with the DNS reason"
    )
    func namespaceAndNames() async throws {
        try await Self.withGateway { lab in
            let server = try NamespaceHTTPServer(
                namespace: lab.peerName, address: Self.probeAddress, reply: Self.answers)
            defer { server.stop() }
            let etc = "/etc/netns/\(lab.name)"
            try FileManager.default.createDirectory(atPath: etc, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: etc) }
            try "nameserver \(NetnsLab.ipv4Gateway)\noptions timeout:1 attempts:1\n".write(
                toFile: etc + "/resolv.conf", atomically: true, encoding: .utf8)
            // dnsmasq as a daemon (its pid in a file): a child process left running would keep
            // the output pipes of the commands run after it open.
            let pidFile = "\(lab.directory)/dnsmasq.pid"
            let started = try run(
                LabCommand.ipExecutable,
                [
                    "netns", "exec", lab.peerName, "dnsmasq", "--no-resolv", "--no-hosts", "--bind-interfaces",
                    "--listen-address=\(NetnsLab.ipv4Gateway)", "--except-interface=lo",
                    "--address=/probe.lab/\(Self.probeAddress)", "--local=/lab/", "--pid-file=\(pidFile)",
                    "--log-facility=\(lab.directory)/dnsmasq.log",
                ])
            #expect(started.status == 0, "dnsmasq: \(started.error)")
            func stopDnsmasq() {
                guard let text = try? String(contentsOfFile: pidFile, encoding: .utf8),
                    let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines))
                else { return }
                // SIGKILL: dnsmasq keeps the signal mask it inherits, and the test runner blocks SIGTERM.
                kill(pid, SIGKILL)
                for _ in 0..<100 where kill(pid, 0) == 0 { usleep(20_000) }
            }
            defer { stopDnsmasq() }
            // Ready when it answers (bounded).
            let url = "http://probe.lab:\(server.port)/204"
            var named = try run(
                try NetreachProcess.executable().path,
                ["check", "--namespace", lab.name, "--family", "4", "--probe", url])
            for _ in 0..<20 where named.status != 0 {
                try await Task.sleep(for: .milliseconds(100))
                named = try run(
                    try NetreachProcess.executable().path,
                    ["check", "--namespace", lab.name, "--family", "4", "--probe", url])
            }
            #expect(named.status == 0, "\(named.output)\(named.error)")
            #expect(named.output.hasPrefix("full"), "\(named.output)")
            #expect(server.received.last?.requestLine == "GET /204 HTTP/1.1")

            // get: a name that does not exist (NXDOMAIN from dnsmasq) is exit 6 at once, not
            // retried; curl, in the same namespace, says 6 too.
            let netreach = try NetreachProcess.executable().path
            let missing = try run(
                LabCommand.ipExecutable,
                [
                    "netns", "exec", lab.name, netreach, "get", "--json", "--retries", "2",
                    "http://missing.lab:\(server.port)/",
                ])
            #expect(missing.status == 6, "\(missing.output)\(missing.error)")
            #expect(
                missing.output.contains("\"transportKind\":\"hostNotFound\"")
                    && missing.output.contains("\"attempts\":1"), "\(missing.output)")
            #expect(missing.output.contains("cannot resolve missing.lab"), "\(missing.output)")
            let curlMissing = try run(
                LabCommand.ipExecutable,
                ["netns", "exec", lab.name, "curl", "-sS", "http://missing.lab:\(server.port)/"])
            #expect(curlMissing.status == 6, "curl: \(curlMissing.error)")

            stopDnsmasq()
            // The resolver gone: the lookup could not be answered now (EAI_AGAIN), which can pass:
            // retried, then exit 6.
            let noResolver = try run(
                LabCommand.ipExecutable,
                [
                    "netns", "exec", lab.name, netreach, "get", "--json", "--retries", "1",
                    "http://probe.lab:\(server.port)/",
                ])
            #expect(noResolver.status == 6, "\(noResolver.output)\(noResolver.error)")
            #expect(
                noResolver.output.contains("\"transportKind\":\"dnsFailure\"")
                    && noResolver.output.contains("\"attempts\":2"), "\(noResolver.output)")
            let unresolved = try run(
                try NetreachProcess.executable().path,
                ["check", "--namespace", lab.name, "--family", "4", "--probe-timeout", "3s", "--probe", url])
            #expect(unresolved.status == 81, "\(unresolved.output)\(unresolved.error)")
            #expect(unresolved.output.hasPrefix("limited"), "\(unresolved.output)")
            #expect(unresolved.output.contains("DNS"), "\(unresolved.output)")

            // A namespace file instead of a name: no /etc/netns files, same verdict by address.
            let byPath = try run(
                try NetreachProcess.executable().path,
                [
                    "check", "--namespace", "/var/run/netns/\(lab.name)", "--probe",
                    "http://\(Self.probeAddress):\(server.port)/204",
                ])
            #expect(byPath.status == 0, "\(byPath.output)\(byPath.error)")
        }
    }

    @Test("A namespace that does not exist: status 2 and why")
    func missingNamespace() async throws {
        let result = try run(
            try NetreachProcess.executable().path,
            ["check", "--namespace", "nr-no-such-namespace", "--probe", "http://10.123.1.1/204"])
        #expect(result.status == 2)
        #expect(result.error.contains("nr-no-such-namespace"), "\(result.error)")
    }

    @Test("No probe configured is a usage error that says how to configure one")
    func noProbe() async throws {
        let result = try run(try NetreachProcess.executable().path, ["check"])
        #expect(result.status == 64)
        #expect(result.error.contains("--probe") && result.error.contains("NETREACH_PROBE_URLS"), "\(result.error)")
    }
}

/// nginx serving https on port 443 inside the gateway namespace, with a self-signed certificate
/// for its address that the client does not trust unless told to (`certificate`). Run in the
/// foreground under `ip netns exec` with no pipe of ours open in it, so nothing waits on it; its
/// access log records each request line and status.
struct GatewayTLSServer {
    let scratch: String
    let process: ChildProcess
    var certificate: String { scratch + "/server.pem" }

    static func start(namespace: String, address: String) throws -> GatewayTLSServer {
        let scratch = NSTemporaryDirectory() + "netreach-gateway-tls-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: scratch + "/tmp", withIntermediateDirectories: true)
        let made = try run(
            "/usr/bin/openssl",
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", scratch + "/server.key", "-out", scratch + "/server.pem", "-days", "1",
                "-subj", "/CN=\(address)", "-addext", "subjectAltName=IP:\(address)",
            ])
        guard made.status == 0 else { throw LabError.systemCall("openssl req", made.error) }
        let config = """
            daemon off;
            worker_processes 1;
            pid \(scratch)/nginx.pid;
            error_log \(scratch)/error.log;
            events { worker_connections 16; }
            http {
                log_format probe '$request $status';
                access_log \(scratch)/access.log probe;
                client_body_temp_path \(scratch)/tmp;
                proxy_temp_path \(scratch)/tmp;
                fastcgi_temp_path \(scratch)/tmp;
                uwsgi_temp_path \(scratch)/tmp;
                scgi_temp_path \(scratch)/tmp;
                server {
                    listen \(address):443 ssl;
                    ssl_certificate \(scratch)/server.pem;
                    ssl_certificate_key \(scratch)/server.key;
                    location = /generate_204 { return 204; }
                }
            }
            """
        try config.write(toFile: scratch + "/nginx.conf", atomically: true, encoding: .utf8)
        let process = try ChildProcess(
            LabCommand.ipExecutable,
            ["netns", "exec", namespace, "/usr/sbin/nginx", "-c", scratch + "/nginx.conf", "-p", scratch],
            output: .null, error: .null)
        let server = GatewayTLSServer(scratch: scratch, process: process)
        // nginx writes its pid file once its sockets listen (bounded: 10 s).
        for _ in 0..<500 where process.isRunning {
            if FileManager.default.fileExists(atPath: scratch + "/nginx.pid") { return server }
            usleep(20_000)
        }
        let log = (try? String(contentsOfFile: scratch + "/error.log", encoding: .utf8)) ?? ""
        server.stop()
        throw LabError.systemCall("nginx in \(namespace)", "did not start: \(log)")
    }

    /// Every request that reached it: `GET /generate_204 HTTP/1.1 204`.
    func requests() -> [String] {
        let log = (try? String(contentsOfFile: scratch + "/access.log", encoding: .utf8)) ?? ""
        return log.split(separator: "\n").map(String.init)
    }

    func stop() {
        process.terminate()
        if process.waitBlocking(timeout: .seconds(5)) == nil { process.kill() }
        _ = process.waitBlocking(timeout: .seconds(10))
        try? FileManager.default.removeItem(atPath: scratch)
    }
}
