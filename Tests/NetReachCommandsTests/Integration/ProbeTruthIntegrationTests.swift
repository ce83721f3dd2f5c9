import Foundation
import NetReachTestSupport
import Testing

@testable import NetReach

#if canImport(Glibc)
import Glibc

/// The probes against their references in network namespaces: through an HTTP proxy as curl goes
/// through it (the probe server reachable only through tinyproxy), a body dribbling past the
/// probe timeout as curl receives it, a tun device whose carrier flaps ten times a second, and a
/// probe server that is down for ten seconds while `wait --internet` waits. Nothing leaves the
/// namespaces.
@Suite(
    "Probe truth: proxies, slow bodies, flapping carriers, recoveries (integration)", .needsNamespaceRoot, .offPool,
    .serialized, .timeLimit(.minutes(4)))
struct ProbeTruthIntegrationTests {
    static let probeAddress = ConnectivityCheckIntegrationTests.probeAddress

    /// A port for a server of a test's own in the gateway namespace, where nothing else listens.
    static func port() -> Int { Int.random(in: 20_000...40_000) }

    /// Runs `body` inside the lab namespace with `environment` (as `env` sets it).
    static func inLab(_ lab: NetnsLab, environment: [String] = [], _ command: [String]) throws -> RunResult {
        try run(LabCommand.ipExecutable, ["netns", "exec", lab.name, "/usr/bin/env"] + environment + command)
    }

    /// Waits until something listens on `port` in the gateway namespace.
    static func waitForListener(_ lab: NetnsLab, port: Int) async throws {
        let listening = await LabPoll.until("something listens on \(port) in \(lab.peerName)", timeout: .seconds(20)) {
            let sockets = (try? run(LabCommand.ipExecutable, ["netns", "exec", lab.peerName, "ss", "-Hltn"]))?.output
            return sockets?.contains(":\(port) ") == true
        }
        try #require(listening)
    }

    /// tinyproxy in the gateway namespace, on the gateway's address, where the lab reaches it.
    final class GatewayProxy: Sendable {
        let port: Int
        let directory: String
        let process: ChildProcess

        init(_ lab: NetnsLab, basicAuth: Bool = false) async throws {
            port = ProbeTruthIntegrationTests.port()
            directory = NSTemporaryDirectory() + "netreach-proxy-\(UUID().uuidString.prefix(8))"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let configuration = """
                Port \(port)
                Listen \(NetnsLab.ipv4Gateway)
                Timeout 30
                LogFile "\(directory)/tinyproxy.log"
                LogLevel Connect
                MaxClients 32
                Allow 10.123.0.0/24
                DisableViaHeader Yes
                \(basicAuth ? "BasicAuth probe secret" : "")
                """
            try configuration.write(toFile: directory + "/tinyproxy.conf", atomically: true, encoding: .utf8)
            process = try ChildProcess(
                LabCommand.ipExecutable,
                ["netns", "exec", lab.peerName, "tinyproxy", "-d", "-c", directory + "/tinyproxy.conf"])
            try await ProbeTruthIntegrationTests.waitForListener(lab, port: port)
        }

        var url: String { "http://\(NetnsLab.ipv4Gateway):\(port)" }

        /// The request lines tinyproxy logged.
        func requests() -> [String] {
            let log = (try? String(contentsOfFile: directory + "/tinyproxy.log", encoding: .utf8)) ?? ""
            return log.split(separator: "\n").compactMap { line in
                guard line.contains("Request (file descriptor"), let range = line.range(of: "): ") else { return nil }
                return String(line[range.upperBound...])
            }
        }

        func stop() {
            process.kill()
            _ = process.waitBlocking(timeout: .seconds(10))
            try? FileManager.default.removeItem(atPath: directory)
        }
    }

    @Test(
        "Where only a proxy reaches the probe server, check goes through it as curl does: full, naming the proxy; a refusing, 407 or 5xx proxy is limited and says so"
    )
    func throughTheProxy() async throws {
        try await ConnectivityCheckIntegrationTests.withGateway { lab in
            let server = try NamespaceHTTPServer(
                namespace: lab.peerName, address: Self.probeAddress, reply: ConnectivityCheckIntegrationTests.answers)
            defer { server.stop() }
            // The lab's own route to the probe server refuses traffic: only the proxy, in the
            // gateway namespace, reaches it.
            try await lab.ip("route", "add", "prohibit", "\(Self.probeAddress)/32")
            let proxy = try await GatewayProxy(lab)
            defer { proxy.stop() }
            let probe = "http://\(Self.probeAddress):\(server.port)/204"
            let environment = ["http_proxy=\(proxy.url)"]

            // The reference: curl, same namespace, same environment.
            let direct = try Self.inLab(lab, ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", probe])
            #expect(direct.status != 0, "no direct way to the probe server: \(direct.output) \(direct.error)")
            let curl = try Self.inLab(
                lab, environment: environment, ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", probe])
            #expect(curl.status == 0 && curl.output == "204", "curl through the proxy: \(curl.output) \(curl.error)")

            let without = try ConnectivityCheckIntegrationTests.check(lab, "--probe", probe, "--family", "4")
            #expect(without.status == 81, "directly, limited: \(without.output)")
            let through = try Self.inLab(
                lab, environment: environment,
                [try NetreachProcess.executable().path, "check", "--probe", probe, "--family", "4", "--json"])
            #expect(through.status == 0, "through the proxy, full: \(through.output) \(through.error)")
            try CLIJSONSchemaTests.expectConforms(through.output.trimmingCharacters(in: .newlines))
            let object = try #require(
                try JSONSerialization.jsonObject(with: through.outputData) as? [String: Any], "\(through.output)")
            let json = try #require(object["connectivity"] as? [String: Any])
            let probes = try #require((json["ipv4"] as? [String: Any])?["probes"] as? [[String: Any]])
            #expect(probes.first?["proxy"] as? String == proxy.url, "\(probes)")
            #expect(
                proxy.requests().filter { $0.contains("\(Self.probeAddress):\(server.port)/204") }.count == 2,
                "curl's request and the probe went through tinyproxy: \(proxy.requests())")
            // --proxy says the same without the environment; --noproxy (or '') sends directly.
            let option = try ConnectivityCheckIntegrationTests.check(
                lab, "--probe", probe, "--family", "4", "--proxy", proxy.url)
            #expect(option.status == 0, "\(option.output)")
            #expect(option.output.contains("through proxy \(proxy.url)"), "\(option.output)")
            let bypassed = try Self.inLab(
                lab, environment: environment + ["no_proxy=10.123.1.0/24"],
                [try NetreachProcess.executable().path, "check", "--probe", probe, "--family", "4"])
            let curlBypassed = try Self.inLab(
                lab, environment: environment + ["no_proxy=10.123.1.0/24"], ["curl", "-sS", "-o", "/dev/null", probe])
            #expect(bypassed.status == 81 && curlBypassed.status != 0, "no_proxy's CIDR sends both directly")

            // https through a CONNECT tunnel, with HTTPS_PROXY in upper case (curl reads both).
            let nginx = try GatewayTLSServer.start(namespace: lab.peerName, address: Self.probeAddress)
            defer { nginx.stop() }
            let secure = "https://\(Self.probeAddress)/generate_204"
            let tunnel = ["HTTPS_PROXY=\(proxy.url)", "SSL_CERT_FILE=\(nginx.certificate)"]
            let curlTLS = try Self.inLab(
                lab, environment: tunnel,
                ["curl", "-sS", "--cacert", nginx.certificate, "-o", "/dev/null", "-w", "%{http_code}", secure])
            #expect(curlTLS.output == "204", "curl through the tunnel: \(curlTLS.output) \(curlTLS.error)")
            let checkTLS = try Self.inLab(
                lab, environment: tunnel,
                [try NetreachProcess.executable().path, "check", "--probe", secure, "--family", "4"])
            #expect(checkTLS.status == 0, "\(checkTLS.output) \(checkTLS.error)")
            #expect(checkTLS.output.contains("through proxy \(proxy.url)"), "\(checkTLS.output)")
            #expect(
                proxy.requests().filter { $0.hasPrefix("CONNECT \(Self.probeAddress):443") }.count == 2,
                "both went through a tunnel: \(proxy.requests())")

            // A proxy that refuses the connection.
            let refused = try ConnectivityCheckIntegrationTests.check(
                lab, "--probe", probe, "--family", "4", "--proxy", "http://\(NetnsLab.ipv4Gateway):9")
            #expect(refused.status == 81, "\(refused.output)")
            #expect(refused.output.contains("proxy"), "\(refused.output)")
            // A proxy that wants credentials: 407.
            let guarded = try await GatewayProxy(lab, basicAuth: true)
            defer { guarded.stop() }
            let curl407 = try Self.inLab(
                lab, environment: ["http_proxy=\(guarded.url)"],
                ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", probe])
            #expect(curl407.output == "407", "\(curl407.output)")
            let unauthorized = try ConnectivityCheckIntegrationTests.check(
                lab, "--probe", probe, "--family", "4", "--proxy", guarded.url)
            #expect(unauthorized.status == 81, "\(unauthorized.output)")
            #expect(unauthorized.output.contains("answered HTTP 407"), "\(unauthorized.output)")
            let authorized = try ConnectivityCheckIntegrationTests.check(
                lab, "--probe", probe, "--family", "4", "--proxy",
                "http://probe:secret@\(NetnsLab.ipv4Gateway):\(guarded.port)")
            #expect(authorized.status == 0, "\(authorized.output)")
            #expect(!authorized.output.contains("secret"), "the evidence shows no password: \(authorized.output)")
            // A proxy that cannot reach the host answers for itself (tinyproxy: 500).
            let unreachable = "http://\(Self.probeAddress):9/204"
            let curlUnreachable = try Self.inLab(
                lab, environment: environment, ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", unreachable])
            let failed = try Self.inLab(
                lab, environment: environment,
                [try NetreachProcess.executable().path, "check", "--probe", unreachable, "--family", "4"])
            #expect(curlUnreachable.output.hasPrefix("5"), "\(curlUnreachable.output)")
            #expect(failed.status == 81, "limited, not a portal: \(failed.output)")
            #expect(
                failed.output.contains("the proxy \(proxy.url) answered HTTP \(curlUnreachable.output)"),
                "\(failed.output)")
        }
    }

    /// A server in the gateway namespace that answers `/slow` with NetworkManager's text one byte
    /// each 150 ms and `/short` with its first 14 bytes only; it prints `ready` once listening.
    static func startDribbler(_ lab: NetnsLab, port: Int) async throws -> ChildProcess {
        let script = """
            import socket, sys, threading, time
            text = b"NetworkManager is online"
            def serve(connection):
                request = b""
                while b"\\r\\n\\r\\n" not in request:
                    chunk = connection.recv(4096)
                    if not chunk: return
                    request += chunk
                try:
                    if b"/short" in request.split(b"\\r\\n")[0]:
                        connection.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: 14\\r\\nConnection: close\\r\\n\\r\\n" + text[:14])
                    else:
                        connection.sendall(b"HTTP/1.1 200 OK\\r\\nContent-Length: %d\\r\\nConnection: close\\r\\n\\r\\n" % len(text))
                        for byte in text:
                            time.sleep(0.15)
                            connection.sendall(bytes([byte]))
                except OSError:
                    pass
                connection.close()
            listener = socket.socket()
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((sys.argv[1], int(sys.argv[2])))
            listener.listen(16)
            print("ready", flush=True)
            while True:
                connection, _ = listener.accept()
                threading.Thread(target=serve, args=(connection,), daemon=True).start()
            """
        let server = try ChildProcess(
            LabCommand.ipExecutable,
            ["netns", "exec", lab.peerName, "python3", "-c", script, Self.probeAddress, "\(port)"])
        let line = await server.nextLine(timeout: .seconds(30))
        guard line == "ready" else {
            server.kill()
            throw LabError.systemCall(
                "start the dribbling server", "it said \(line ?? "nothing"): \(server.standardError)")
        }
        return server
    }

    @Test(
        "A text body dribbling past --probe-timeout is limited, whatever part of the text came (curl got a prefix too); in time it is full; a body ending short is a portal"
    )
    func slowBody() async throws {
        try await ConnectivityCheckIntegrationTests.withGateway { lab in
            let port = Self.port()
            let server = try await Self.startDribbler(lab, port: port)
            defer {
                server.kill()
                _ = server.waitBlocking(timeout: .seconds(10))
            }
            let url = "http://\(Self.probeAddress):\(port)/slow"
            let curl = try Self.inLab(lab, ["curl", "-sS", "--max-time", "1", url])
            #expect(curl.status == 28, "curl timed out: \(curl.error)")
            #expect(
                !curl.output.isEmpty && "NetworkManager is online".hasPrefix(curl.output)
                    && curl.output != "NetworkManager is online",
                "curl got a prefix of the text: \(curl.output)")

            let cut = try ConnectivityCheckIntegrationTests.check(
                lab, "--probe", "\(url)=NetworkManager is online", "--family", "4", "--probe-timeout", "1s")
            #expect(cut.status == 81, "limited, not a portal: \(cut.output)")
            #expect(cut.output.contains("the body stopped after"), "\(cut.output)")
            #expect(cut.output.contains("of the 24 bytes of the expected text"), "\(cut.output)")

            let inTime = try ConnectivityCheckIntegrationTests.check(
                lab, "--probe", "\(url)=NetworkManager is online", "--family", "4", "--probe-timeout", "20s")
            #expect(inTime.status == 0, "\(inTime.output)")
            // The text decides as soon as it has arrived: a longer body is not waited for.
            let early = try ConnectivityCheckIntegrationTests.check(
                lab, "--probe", "\(url)=Network", "--family", "4", "--probe-timeout", "20s")
            #expect(early.status == 0, "\(early.output)")

            let short = try ConnectivityCheckIntegrationTests.check(
                lab, "--probe", "http://\(Self.probeAddress):\(port)/short=NetworkManager is online", "--family", "4")
            #expect(short.status == 80, "\(short.output)")
            #expect(short.output.contains("ends after 14 bytes"), "\(short.output)")
        }
    }

    @Test(
        "A tun device's carrier flapping ten times a second, with two 2 s losses: watch --internet --json prints the path's changes, and its verdict changes at most once"
    )
    func flappingCarrier() async throws {
        try await ConnectivityCheckIntegrationTests.withGateway { lab in
            let server = try NamespaceHTTPServer(
                namespace: lab.peerName, address: Self.probeAddress, reply: ConnectivityCheckIntegrationTests.answers)
            defer { server.stop() }
            // The default route goes through tun0; the probe server is reached over the veth.
            let go = NSTemporaryDirectory() + "netreach-flap-\(UUID().uuidString.prefix(8))"
            let script = """
                import fcntl, os, struct, sys, time
                fd = os.open("/dev/net/tun", os.O_RDWR)
                fcntl.ioctl(fd, 0x400454ca, struct.pack("16sH", b"tun0", 0x0001 | 0x1000))
                print("ready", flush=True)
                while not os.path.exists(sys.argv[1]): time.sleep(0.05)
                TUNSETCARRIER = 0x400454e2
                def carrier(on, seconds):
                    fcntl.ioctl(fd, TUNSETCARRIER, struct.pack("i", on)); time.sleep(seconds)
                def flaps(count):
                    for _ in range(count): carrier(0, 0.05); carrier(1, 0.05)
                # Ten flaps a second, with two 2 s losses inside the storm: the kernel's linkwatch
                # reports a carrier change at most about once a second, and what it reports is the
                # state when it looks, so flaps alone may show as any number of losses, none
                # included. A loss that lasts 2 s is reported for certain, still well inside the
                # 6 s a loss must last before the verdict acts on it.
                flaps(20); carrier(0, 2); carrier(1, 2); flaps(20); carrier(0, 2); carrier(1, 2); flaps(10)
                print("done", flush=True)
                while True: time.sleep(3600)
                """
            let tun = try ChildProcess(
                LabCommand.ipExecutable, ["netns", "exec", lab.name, "python3", "-c", script, go])
            defer {
                tun.kill()
                _ = tun.waitBlocking(timeout: .seconds(10))
                try? FileManager.default.removeItem(atPath: go)
            }
            #expect(await tun.nextLine(timeout: .seconds(30)) == "ready")
            try await lab.ip("link", "set", "tun0", "up")
            try await lab.ip("addr", "add", "10.200.0.2/24", "dev", "tun0")
            try await lab.ip("route", "add", "\(Self.probeAddress)/32", "via", NetnsLab.ipv4Gateway)
            try await lab.deleteDefaultRoute()
            try await lab.ip("route", "add", "default", "dev", "tun0")

            let watch = try NetreachProcess.start(
                [
                    "watch", "--internet", "--json", "--probe", "http://\(Self.probeAddress):\(server.port)/204",
                    "--family", "4",
                ], inNamespace: lab.name)
            defer { watch.kill() }
            func levels() -> [String] {
                watch.outputLines.compactMap { line in
                    let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
                    return (object?["connectivity"] as? [String: Any])?["level"] as? String
                }
            }
            await LabPoll.until("watch shows full") { levels().last == "full" }
            let before = watch.outputLines.count
            // The reference: the carrier changes the kernel reports, as `ip monitor link` sees them.
            let kernel = try ChildProcess(LabCommand.ipExecutable, ["-n", lab.name, "monitor", "link", "dev", "tun0"])
            defer { kernel.kill() }
            // The monitor listens once it reports a change: the MTU is changed until it does (one
            // made before it subscribed is never reported).
            var listening = false
            for attempt in 0..<120 where !listening {
                try await lab.ip("link", "set", "tun0", "mtu", "\(1400 - attempt)")
                try await Task.sleep(for: .milliseconds(250))
                listening = kernel.outputLines.contains { $0.contains(" mtu ") }
            }
            #expect(listening, "ip monitor reported no change of tun0 within 30 s")
            _ = FileManager.default.createFile(atPath: go, contents: Data())
            #expect(await tun.nextLine(timeout: .seconds(30)) == "done")
            try await Task.sleep(for: .seconds(8)) // past the carrier delay after the last flap
            let losses = kernel.outputLines.filter { $0.contains("NO-CARRIER") }.count
            let storm = Array(levels().dropFirst(before))
            var changes = 0
            var last = "full"
            for level in storm where level != last {
                changes += 1
                last = level
            }
            let held = watch.outputLines.dropFirst(before).filter {
                $0.contains("\"unsatisfiedReason\":\"linkDown\"") && $0.contains("\"level\":\"full\"")
            }
            print(
                "flapping carrier: the kernel reported \(losses) carrier losses; watch printed \(watch.outputLines.count - before) lines, \(held.count) of them a lost link with the verdict held at full; \(changes) verdict changes: \(storm)"
            )
            // The two long losses at least; each reported loss flipped the verdict before.
            #expect(losses >= 2, "the kernel reported the storm: \(kernel.outputLines.prefix(5))")
            #expect(!held.isEmpty, "the path changed at once, the verdict held: \(watch.outputLines)")
            #expect(changes <= 1, "the verdict changed at most once: \(storm)")
            #expect(levels().last == "full", "\(watch.outputLines)")
            watch.signal(SIGTERM)
            #expect(await watch.exitStatus() == 0, "\(watch.standardError)")
        }
    }

    @Test("After a 10 s outage of the probe server, wait --internet returns within a few seconds of its return")
    func recoveryIsNoticedSoon() async throws {
        try await ConnectivityCheckIntegrationTests.withGateway { lab in
            let port = Self.port()
            let wait = try NetreachProcess.start(
                [
                    "wait", "--internet", "--probe", "http://\(Self.probeAddress):\(port)/204", "--family", "4",
                    "--timeout", "60s",
                ], inNamespace: lab.name)
            defer { wait.kill() }
            try await Task.sleep(for: .seconds(10)) // refused all along
            #expect(wait.isRunning, "\(wait.outputLines) \(wait.standardError)")
            let script = """
                import socket, sys
                listener = socket.socket()
                listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                listener.bind((sys.argv[1], int(sys.argv[2])))
                listener.listen(16)
                print("ready", flush=True)
                while True:
                    connection, _ = listener.accept()
                    connection.recv(4096)
                    connection.sendall(b"HTTP/1.1 204 No Content\\r\\nConnection: close\\r\\n\\r\\n")
                    connection.close()
                """
            let up = try ChildProcess(
                LabCommand.ipExecutable,
                ["netns", "exec", lab.peerName, "python3", "-c", script, Self.probeAddress, "\(port)"])
            defer {
                up.kill()
                _ = up.waitBlocking(timeout: .seconds(10))
            }
            #expect(await up.nextLine(timeout: .seconds(30)) == "ready")
            let back = ContinuousClock.now
            let status = await wait.exitStatus(timeout: .seconds(60))
            let late = ContinuousClock.now - back
            print("wait --internet returned \(late) after the probe server came back")
            #expect(status == 0, "\(wait.outputLines) \(wait.standardError)")
            #expect(late < .seconds(4), "probing each second while it waits, not after a grown back-off")
        }
    }
}
#endif
