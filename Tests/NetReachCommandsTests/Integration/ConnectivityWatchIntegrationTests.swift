import Foundation
import NetReachSystem
import NetReachTestSupport
import Testing

@testable import NetReach

#if canImport(Glibc)
import Glibc
#endif

/// `netreach watch --internet` and `wait --internet` over time, in a lab namespace whose probe
/// server (in the gateway namespace, beyond the local network) changes its answer while they run.
/// The server counts the probes each answer got, so the rules are checked from its end: how
/// many probes a transition took, and that none came while all was well.
@Suite(
    "watch and wait --internet in network namespaces (integration)", .needsNamespaceRoot, .serialized,
    .timeLimit(.minutes(3)))
struct ConnectivityWatchIntegrationTests {
    /// What the probe server answers now, and how many probes it answered so since the answer
    /// was last changed (counted under the same lock as the change: exact, whatever the timing).
    final class ProbeScript: Sendable {
        enum Answer: Sendable { case pass, portal, reset }
        private let state: Locked<(answer: Answer, since: Int)>

        init(_ answer: Answer) { state = Locked((answer, 0)) }

        /// Changes the answer and starts counting again.
        func answer(_ answer: Answer) { state.withLock { $0 = (answer, 0) } }

        /// Probes answered since the last change.
        var since: Int { state.withLock { $0.since } }

        func reply(_ line: String) -> NamespaceHTTPServer.Reply {
            guard line.contains("/probe") else { return .response("404 Not Found") }
            let answer = state.withLock { state -> Answer in
                state.since += 1
                return state.answer
            }
            switch answer {
            case .pass: return .response("204 No Content")
            case .portal:
                return .response(
                    "302 Found", headers: ["Location: http://\(ConnectivityCheckIntegrationTests.probeAddress)/login"])
            case .reset: return .close
            }
        }
    }

    /// A lab with its gateway, and a probe server answering as `script` says.
    static func withProbeServer(
        _ script: ProbeScript,
        _ body: (NetnsLab, String) async throws -> Void
    ) async throws {
        try await ConnectivityCheckIntegrationTests.withGateway { lab in
            let server = try NamespaceHTTPServer(
                namespace: lab.peerName, address: ConnectivityCheckIntegrationTests.probeAddress
            ) {
                script.reply($0)
            }
            defer { server.stop() }
            try await body(lab, "http://\(ConnectivityCheckIntegrationTests.probeAddress):\(server.port)/probe")
        }
    }

    /// Lines of `watch` that say `internet LEVEL`.
    static func lines(_ watch: ChildProcess, saying level: String) -> [String] {
        watch.outputLines.filter { $0.contains("; internet \(level)") }
    }

    @Test(
        "watch --internet: portal, then full one probe after signing in; none while full and idle over 10 s; one round after a path change"
    )
    func portalToFullThenQuiet() async throws {
        let script = ProbeScript(.portal)
        try await Self.withProbeServer(script) { lab, probe in
            // `netreach` enters the namespace (it runs again inside it) before probing.
            let watch = try NetreachProcess.start([
                "watch", "--internet", "--probe", probe, "--family", "4", "--namespace", lab.name,
            ])
            defer { watch.kill() }
            await LabPoll.until("watch shows the portal") { !Self.lines(watch, saying: "portal").isEmpty }
            #expect(
                Self.lines(watch, saying: "portal").first?.contains(
                    "sign in at http://\(ConnectivityCheckIntegrationTests.probeAddress)/login") == true,
                "\(watch.outputLines)")

            script.answer(.pass) // signed in
            await LabPoll.until("watch shows full") { !Self.lines(watch, saying: "full").isEmpty }
            #expect(script.since == 1, "one probe after signing in (back-off 1 s), then full")

            let printed = watch.outputLines.count
            try await Task.sleep(for: .seconds(11))
            #expect(script.since == 1, "no probe while full and idle for 11 s")
            #expect(watch.outputLines.count == printed, "no line either: \(watch.outputLines)")

            // A path change: no default route is local at once (no probe); the route back is one round.
            try await lab.deleteDefaultRoute()
            await LabPoll.until("watch shows local") { !Self.lines(watch, saying: "local").isEmpty }
            #expect(script.since == 1, "local is the path's fact, not a probe's")
            let beforeRoute = watch.outputLines.count
            try await lab.addDefaultRoute()
            await LabPoll.until("watch shows full again") { Self.lines(watch, saying: "full").count >= 2 }
            await LabPoll.settle()
            let satisfiedPaths = Set(
                watch.outputLines.dropFirst(beforeRoute).filter { $0.contains(" satisfied ") }
                    .map {
                        $0.split(separator: " ", maxSplits: 1).last.map {
                            $0.components(separatedBy: "; internet").first!
                        } ?? ""
                    })
            #expect(script.since == 1 + satisfiedPaths.count, "one round per path change: \(watch.outputLines)")
            #expect(satisfiedPaths.count == 1, "\(watch.outputLines)")

            watch.signal(SIGTERM)
            #expect(await watch.exitStatus() == 0, "\(watch.standardError)")
        }
    }

    @Test(
        "watch --internet --probe-interval 3s: full survives failed rounds until two have failed over 10 s (the sixth failed probe), then limited; one passing round returns"
    )
    func hysteresis() async throws {
        let script = ProbeScript(.pass)
        try await Self.withProbeServer(script) { lab, probe in
            let watch = try NetreachProcess.start([
                "watch", "--internet", "--probe", probe, "--family", "4",
                "--probe-interval", "3s", "--namespace", lab.name,
            ])
            defer { watch.kill() }
            await LabPoll.until("watch shows full") { !Self.lines(watch, saying: "full").isEmpty }
            let printed = watch.outputLines.count
            script.answer(.reset)
            // Periodic round 3 s after full fails (t = 0), then checked after 1, 2, 3 and 3 s:
            // failures at 0, 1, 3, 6, 9 s stay full (under 10 s); the one at 12 s is limited.
            await LabPoll.until("watch shows limited", timeout: .seconds(30)) {
                !Self.lines(watch, saying: "limited").isEmpty
            }
            #expect(script.since == 6, "limited on the sixth failed probe, not before")
            #expect(watch.outputLines.count == printed + 1, "no line between full and limited: \(watch.outputLines)")

            script.answer(.pass)
            await LabPoll.until("watch shows full again", timeout: .seconds(10)) {
                Self.lines(watch, saying: "full").count >= 2
            }
            #expect(script.since == 1, "one passing round returns to full")
            watch.signal(SIGTERM)
            #expect(await watch.exitStatus() == 0, "\(watch.standardError)")
        }
    }

    @Test("watch --internet --json: every line is the path with its verdict, as the schema says")
    func watchJSON() async throws {
        let script = ProbeScript(.portal)
        try await Self.withProbeServer(script) { lab, probe in
            let watch = try NetreachProcess.start([
                "watch", "--internet", "--json", "--probe", probe, "--namespace", lab.name,
            ])
            defer { watch.kill() }
            await LabPoll.until("watch shows the portal") {
                watch.outputLines.contains { $0.contains(#""level":"portal""#) }
            }
            script.answer(.pass)
            await LabPoll.until("watch shows full") { watch.outputLines.contains { $0.contains(#""level":"full""#) } }
            watch.signal(SIGTERM)
            #expect(await watch.exitStatus() == 0, "\(watch.standardError)")
            for line in watch.outputLines { try CLIJSONSchemaTests.expectConforms(line) }
            let last = try #require(
                watch.outputLines.last.flatMap {
                    try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
                })
            let connectivity = try #require(last["connectivity"] as? [String: Any])
            let ipv4 = try #require(connectivity["ipv4"] as? [String: Any])
            let probes = try #require(ipv4["probes"] as? [[String: Any]])
            #expect(probes.first?["status"] as? Int == 204)
            #expect(probes.first?["verdict"] as? String == "passed")
        }
    }

    @Test(
        "wait --internet: waits through a portal and exits 0 once signed in; times out with status 1 and the verdict while limited"
    )
    func waitForInternet() async throws {
        let script = ProbeScript(.portal)
        try await Self.withProbeServer(script) { lab, probe in
            let wait = try NetreachProcess.start([
                "wait", "--internet", "--probe", probe, "--family", "4", "--timeout", "30s", "--namespace", lab.name,
            ])
            defer { wait.kill() }
            await LabPoll.until("wait has been answered a portal") { script.since >= 1 }
            try await Task.sleep(for: .milliseconds(200))
            #expect(wait.isRunning, "a portal is not the internet")
            script.answer(.pass)
            #expect(await wait.exitStatus(timeout: .seconds(10)) == 0, "\(wait.standardError)")
            #expect(
                wait.outputLines.first?.hasSuffix("; internet full (ipv4 full, ipv6 unknown)") == true,
                "\(wait.outputLines)")

            script.answer(.reset)
            let limited = try NetreachProcess.start([
                "wait", "--internet", "--probe", probe, "--family", "4", "--timeout", "2s", "--namespace", lab.name,
            ])
            defer { limited.kill() }
            #expect(await limited.exitStatus(timeout: .seconds(10)) == 1)
            #expect(limited.standardError.contains("timed out after 2s: satisfied "), "\(limited.standardError)")
            #expect(limited.standardError.contains("; internet limited (ipv4 limited"), "\(limited.standardError)")
            #expect(limited.outputLines.isEmpty)

            // --timeout 0: the first verdict decides.
            script.answer(.pass)
            let once = try NetreachProcess.start([
                "wait", "--internet", "--probe", probe, "--timeout", "0", "--quiet", "--namespace", lab.name,
            ])
            defer { once.kill() }
            #expect(await once.exitStatus(timeout: .seconds(10)) == 0, "\(once.standardError)")
            #expect(once.outputLines.isEmpty, "--quiet")
            #expect(script.since == 1)
        }
    }
}
