import Foundation
import NetReachTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `netreach serve` run as operators run it, asked over HTTP by curl: its metrics, events and
/// health follow a lab namespace's routes; SIGTERM ends streams with `event: shutdown` and exits 0.
@Suite("netreach serve (integration)", .offPool, .needsNamespaceRoot)
struct ServeCommandTests {
    @Test func metricsEventsAndHealthFollowTheLabsDefaultRoute() async throws {
        try await NetnsLab.withLab { lab in
            let serve = try NetreachProcess.start([
                "serve", "--listen", "127.0.0.1:0", "--namespace", lab.name, "--to", "gw=\(NetnsLab.ipv4Gateway)",
            ])
            defer { serve.kill() }
            let base = try await ServeClient.baseURL(of: serve)
            let internet = #"{namespace="\#(lab.name)",destination=""}"#
            let gateway = #"{namespace="\#(lab.name)",destination="gw"}"#
            await ServeClient.until("ready", base, "/readyz") { $0.status == 200 }
            var metrics = try await ServeClient.get(base + "/metrics")
            #expect(metrics.body.contains("netreach_path_satisfied\(internet) 1.0"), "\(metrics.body)")
            #expect(metrics.body.contains("netreach_path_satisfied\(gateway) 1.0"))
            // The internet's series carry its route: its namespace's first snapshot is read after
            // the monitors' first paths, and the series wait for it.
            #expect(
                metrics.body.contains(
                    #"netreach_path_route_info{namespace="\#(lab.name)",destination="",family="ipv4",interface="veth0""#
                ))
            #expect(metrics.body.contains(#"netreach_namespace_available{namespace="\#(lab.name)"} 1.0"#))
            #expect(metrics.body.contains(#"interface="veth0",type="wiredEthernet"} 1.0"#))
            #expect(try await ServeClient.get(base + "/health").status == 200)

            let events = try ChildProcess(ServeClient.curl, ["-sSN", "--max-time", "120", base + "/api/v1/events"])
            defer { events.kill() }
            await LabPoll.until("the stream starts with both paths") {
                events.outputLines.filter { $0 == "event: path" }.count >= 2
            }

            try await lab.deleteDefaultRoute()
            await ServeClient.until("the internet path is 0", base, "/metrics") {
                $0.body.contains("netreach_path_satisfied\(internet) 0.0")
            }
            metrics = try await ServeClient.get(base + "/metrics")
            #expect(
                metrics.body.contains(
                    #"netreach_path_unsatisfied_reason{namespace="\#(lab.name)",destination="",reason="noDefaultRoute"} 1.0"#
                ))
            // The gateway is on-link: its path needs no default route.
            #expect(metrics.body.contains("netreach_path_satisfied\(gateway) 1.0"))
            #expect(!metrics.body.contains(#"route_info{namespace="\#(lab.name)",destination="",family="ipv4""#))
            // The library's own series, through swift-metrics, with serve's HELP: the engine read
            // the route's removal.
            let routeMessages = metrics.body.split(separator: "\n").first {
                $0.hasPrefix(#"netreach_netlink_messages_total{kind="route"} "#)
            }
            #expect(routeMessages.flatMap { Double($0.split(separator: " ")[1]) }.map { $0 >= 1 } == true)
            #expect(metrics.body.contains("# HELP netreach_netlink_messages_total "))
            #expect(metrics.body.contains(#"netreach_path_updates_total{status="unsatisfied"}"#))
            let health = try await ServeClient.get(base + "/health")
            #expect(health.status == 503)
            #expect(health.body.contains("no default route"))
            await LabPoll.until("the stream has the change") {
                events.outputLines.contains { $0.hasPrefix("data: ") && $0.contains("\"noDefaultRoute\"") }
            }

            try await lab.addDefaultRoute()
            await ServeClient.until("the internet path is 1 again", base, "/metrics") {
                $0.body.contains("netreach_path_satisfied\(internet) 1.0")
            }
            metrics = try await ServeClient.get(base + "/metrics")
            #expect(metrics.body.contains("netreach_path_changes_total\(internet) 2"))
            #expect(try await ServeClient.get(base + "/health").status == 200)

            serve.signal(SIGTERM)
            #expect(await serve.exitStatus() == 0, "standard error: \(serve.standardError)")
            #expect(await events.exitStatus() == 0)
            let lines = events.outputLines
            #expect(lines.contains("event: shutdown"), "\(lines)")
            // Ids only grow, so a client that reconnects with the last one resumes after it.
            let ids = lines.filter { $0.hasPrefix("id: ") }.compactMap { UInt64($0.dropFirst(4)) }
            #expect(ids == ids.sorted())
        }
    }

    /// blackbox_exporter's pattern: the path to any target, asked per scrape, in a watched namespace.
    @Test func probeAnswersTheKernelsPathToATargetAsMetrics() async throws {
        try await NetnsLab.withLab { lab in
            let serve = try NetreachProcess.start(["serve", "--listen", "127.0.0.1:0", "--namespace", lab.name])
            defer { serve.kill() }
            let base = try await ServeClient.baseURL(of: serve)
            let far = "198.51.100.7"
            var probe = try await ServeClient.get(
                base + "/probe?target=\(far)&namespace=\(lab.name)&module=path",
                extra: ["-H", "X-Prometheus-Scrape-Timeout-Seconds: 10"])
            #expect(probe.status == 200)
            #expect(probe.body.contains("\nprobe_success 1\n"), "\(probe.body)")
            #expect(probe.body.contains("probe_duration_seconds "))
            #expect(
                probe.body.contains(
                    #"netreach_path_route_info{namespace="\#(lab.name)",destination="\#(far)",family="ipv4",interface="veth0",interface_type="wiredEthernet",gateway="\#(NetnsLab.ipv4Gateway)"} 1.0"#
                ), "\(probe.body)")

            try await lab.deleteDefaultRoute()
            await ServeClient.until("the probe fails", base, "/probe?target=\(far)&namespace=\(lab.name)") {
                $0.body.contains("\nprobe_success 0\n")
            }
            probe = try await ServeClient.get(base + "/probe?target=\(far)&namespace=\(lab.name)")
            #expect(probe.body.contains(#"reason="noDefaultRoute"} 1.0"#), "\(probe.body)")
            // On-link needs no default route.
            probe = try await ServeClient.get(base + "/probe?target=\(NetnsLab.ipv4Gateway)&namespace=\(lab.name)")
            #expect(probe.body.contains("\nprobe_success 1\n"), "\(probe.body)")

            #expect(try await ServeClient.get(base + "/probe?target=\(far)&namespace=elsewhere").status == 404)
            #expect(try await ServeClient.get(base + "/probe?namespace=\(lab.name)").status == 400)
            #expect(try await ServeClient.get(base + "/probe?target=\(far)&module=icmp").status == 400)
            serve.signal(SIGTERM)
            #expect(await serve.exitStatus() == 0, "standard error: \(serve.standardError)")
        }
    }

    @Test func aNamespaceDeletedWhileScrapedIsUnavailableAndTheServerKeepsAnswering() async throws {
        try await NetnsLab.withLab { lab in
            let serve = try NetreachProcess.start(["serve", "--listen", "127.0.0.1:0", "--namespace", lab.name])
            defer { serve.kill() }
            let base = try await ServeClient.baseURL(of: serve)
            let available = #"netreach_namespace_available{namespace="\#(lab.name)"}"#
            await ServeClient.until("the namespace is available", base, "/metrics") {
                $0.body.contains(available + " 1.0")
            }
            try await LabCommand.ip(["netns", "del", lab.name])
            await ServeClient.until("the namespace is unavailable", base, "/metrics") {
                $0.body.contains(available + " 0.0")
            }
            let metrics = try await ServeClient.get(base + "/metrics")
            #expect(
                !metrics.body.contains(#"netreach_interface_up{namespace="\#(lab.name)""#), "stale interface series")
            #expect(try await ServeClient.get(base + "/livez").status == 200)
            #expect(try await ServeClient.get(base + "/health").status == 503)
            serve.signal(SIGTERM)
            #expect(await serve.exitStatus() == 0, "standard error: \(serve.standardError)")
        }
    }
}

/// `serve --internet`: the verdict of the probes as metrics, health and the connectivity endpoint,
/// with `serve` run inside the lab (probes leave from the server's own namespace).
@Suite("netreach serve --internet (integration)", .offPool, .needsNamespaceRoot, .timeLimit(.minutes(3)))
struct ServeConnectivityTests {
    @Test func aPortalIsAWarningUntilSignedInThenHealthAndReadinessPass() async throws {
        let script = ConnectivityWatchIntegrationTests.ProbeScript(.portal)
        try await ConnectivityWatchIntegrationTests.withProbeServer(script) { lab, probe in
            let serve = try NetreachProcess.start(
                [
                    "serve", "--listen", "127.0.0.1:0", "--internet", "--probe", probe, "--family", "4",
                    "--ready-when", "internet",
                ], inNamespace: lab.name)
            defer { serve.kill() }
            let base = try await ServeClient.baseURL(of: serve)
            let ask = { (path: String) in try await ServeClient.get(base + path, namespace: lab.name) }
            await ServeClient.until("health says portal", base, "/health", namespace: lab.name) {
                $0.status == 429 && $0.body.contains("captive portal")
            }
            #expect(try await ask("/readyz").status == 503)
            var metrics = try await ask("/metrics").body
            #expect(metrics.contains(#"netreach_connectivity_level{namespace="",family="ipv4",level="portal"} 1.0"#))
            #expect(metrics.contains(#"netreach_connectivity_level{namespace="",family="ipv4",level="full"} 0.0"#))
            #expect(metrics.contains(#"netreach_probe_results_total{verdict="portal"}"#), "\(metrics)")
            #expect(metrics.contains("netreach_probe_duration_seconds_count"))

            script.answer(.pass) // signed in
            await ServeClient.until("health passes", base, "/health", namespace: lab.name) { $0.status == 200 }
            #expect(try await ask("/readyz").status == 200)
            let verdict = try await ask("/api/v1/connectivity")
            #expect(verdict.status == 200)
            #expect(verdict.body.contains(#""level":"full""#), "\(verdict.body)")
            metrics = try await ask("/metrics").body
            #expect(metrics.contains(#"netreach_connectivity_level{namespace="",family="ipv4",level="full"} 1.0"#))
            #expect(metrics.contains(#"netreach_probe_results_total{verdict="passed"}"#))

            serve.signal(SIGTERM)
            #expect(await serve.exitStatus() == 0, "standard error: \(serve.standardError)")
        }
    }
}

/// What `serve` refuses, over HTTP and on its command line; in this process's own namespace,
/// which it only reads.
@Suite("netreach serve refuses bad input", .offPool)
struct ServeBadInputTests {
    @Test func unknownPathsWrongMethodsBadQueriesAndHugeHeadersGetTheirStatus() async throws {
        let serve = try NetreachProcess.start(["serve", "--listen", "127.0.0.1:0"])
        defer { serve.kill() }
        let base = try await ServeClient.baseURL(of: serve)
        #expect(try await ServeClient.get(base + "/nope").status == 404)
        let post = try await ServeClient.get(base + "/metrics", extra: ["-X", "POST", "-D", "-"])
        #expect(post.status == 405)
        #expect(post.body.lowercased().contains("allow: get, head"))
        let unknown = try await ServeClient.get(base + "/api/v1/path?too=db")
        #expect(unknown.status == 400)
        #expect(unknown.body.contains("unknown query parameter \"too\""))
        #expect(try await ServeClient.get(base + "/api/v1/path?to=%zz").status == 400)
        #expect(try await ServeClient.get(base + "/api/v1/path?to=nobody").status == 404)
        let huge = String(repeating: "a", count: 100_000)
        #expect(try await ServeClient.get(base + "/livez", extra: ["-H", "X-Huge: \(huge)"]).status == 431)
        // The server is unharmed.
        #expect(try await ServeClient.get(base + "/livez").status == 200)
        serve.signal(SIGTERM)
        #expect(await serve.exitStatus() == 0, "standard error: \(serve.standardError)")
    }

    @Test func aPortInUseExitsThreeAndSaysWhy() async throws {
        let first = try NetreachProcess.start(["serve", "--listen", "127.0.0.1:0"])
        defer { first.kill() }
        let base = try await ServeClient.baseURL(of: first)
        let port = try #require(base.split(separator: ":").last.map(String.init))
        let second = try NetreachProcess.start(["serve", "--listen", "127.0.0.1:\(port)"])
        defer { second.kill() }
        #expect(await second.exitStatus() == 3)
        #expect(second.standardError.contains("cannot listen on 127.0.0.1:\(port)"), "\(second.standardError)")
        first.signal(SIGTERM)
        #expect(await first.exitStatus() == 0)
    }

    @Test(arguments: [
        ["--listen", "nowhere"], ["--to", "db"], ["--to", "a b=10.0.0.1"],
        ["--to", "db=1.2.3.4", "--to", "db=5.6.7.8"],
        ["--ready-when", "sometimes"], ["--ready-when", "to=db"], ["--namespace", ""], ["--ready-when", "internet"],
        ["--internet", "--probe", "http://127.0.0.1:9/", "--namespace", "blue"], ["--internet"],
    ])
    func badFlagsAreUsageErrors(_ flags: [String]) async throws {
        let serve = try NetreachProcess.start(["serve"] + flags)
        defer { serve.kill() }
        #expect(await serve.exitStatus() == 64, "\(flags): \(serve.standardError)")
        #expect(serve.standardError.contains("Usage: netreach serve"), "\(serve.standardError)")
    }
}

/// curl against a `serve` on loopback.
enum ServeClient {
    static let curl = "/usr/bin/curl"

    /// `http://127.0.0.1:PORT`, once `serve` says it listens.
    static func baseURL(of serve: ChildProcess) async throws -> String {
        let marker = "listening on "
        await LabPoll.until("serve listens", timeout: .seconds(60)) {
            serve.standardError.contains(marker) || !serve.isRunning
        }
        let line = serve.standardError.split(separator: "\n").first { $0.contains(marker) }
        return try #require(line.map { String($0[$0.range(of: marker)!.upperBound...]) }, "\(serve.standardError)")
    }

    /// The status and body (with `-D -`, the headers first); with `namespace`, curl runs inside it.
    static func get(
        _ url: String, extra: [String] = [], namespace: String? = nil
    ) async throws -> (status: Int, body: String) {
        let arguments = ["-sS", "--max-time", "30", "-w", "\n%{http_code}"] + extra + [url]
        let finished = try await ChildProcess.run(
            namespace == nil ? curl : LabCommand.ipExecutable,
            namespace.map { ["netns", "exec", $0, curl] + arguments } ?? arguments, timeout: .seconds(60))
        var lines = finished.standardOutput.split(separator: "\n", omittingEmptySubsequences: false)
        let status = lines.popLast().flatMap { Int($0) } ?? -1
        return (status, lines.joined(separator: "\n"))
    }

    /// Asks `path` until `condition` holds (bounded; records an issue on timeout).
    static func until(
        _ what: String, _ base: String, _ path: String, namespace: String? = nil, timeout: Duration = .seconds(30),
        _ condition: @escaping ((status: Int, body: String)) -> Bool
    ) async {
        let deadline = ContinuousClock.now + timeout
        // Ends early when the test is cancelled (its time limit).
        while ContinuousClock.now < deadline, !Task.isCancelled {
            if let answer = try? await get(base + path, namespace: namespace), condition(answer) { return }
            try? await Task.sleep(for: .milliseconds(50))
        }
        Issue.record("timed out after \(timeout) waiting until \(what)")
    }
}
