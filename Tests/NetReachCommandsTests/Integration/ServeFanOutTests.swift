import Foundation
import NetReachTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `serve`'s event stream under load: 200 clients on loopback while a lab's default route flaps
/// 1,000 times (each change once every reader has the one before, so every change is an event and
/// the flaps keep the slowest reader's pace), and one client that never reads. Every reader gets every event the server sent, in
/// order; the stalled one is dropped (its connection closed) and the server's memory stays
/// bounded.
@Suite("serve's event stream with 200 clients (integration)", .offPool, .needsNamespaceRoot, .timeLimit(.minutes(10)))
struct ServeFanOutTests {
    private struct Report: Decodable {
        var ids: [[UInt64]]
        var stalledClosed: Bool
    }

    @Test func everyReaderGetsEveryChangeInOrderAndAStalledOneIsDropped() async throws {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Scripts/sse_clients.py").path
        try await NetnsLab.withLab { lab in
            let serve = try NetreachProcess.start(["serve", "--listen", "127.0.0.1:0", "--namespace", lab.name])
            defer { serve.kill() }
            let base = try await ServeClient.baseURL(of: serve)
            let port = try #require(base.split(separator: ":").last.map(String.init))
            let residentBefore = Self.residentKilobytes(of: serve.pid)
            let clients = try ChildProcess(
                "/usr/bin/python3", [script, "127.0.0.1", port, "200", lab.name, NetnsLab.ipv4Gateway, "1000"])
            defer { clients.kill() }
            await LabPoll.until("200 clients have the current state", timeout: .seconds(60)) {
                clients.outputLines.first == "ready" || !clients.isRunning
            }
            try #require(clients.outputLines.first == "ready", "\(clients.standardError)")

            // The clients bound each change themselves (30 s for every reader to have it): this
            // wait only backstops them. Alone the run takes about a minute; beside the whole suite
            // on two busy cores it has taken over four.
            let status = await clients.exitStatus(timeout: .seconds(480))
            #expect(status == 0, "\(clients.standardError)")
            let report = try JSONDecoder().decode(
                Report.self, from: Data((clients.outputLines.last ?? "").utf8))

            // What the server sent, as /metrics counts it: the first path, then every change.
            let metrics = try await ServeClient.get(base + "/metrics").body
            let changes = metrics.split(separator: "\n").first {
                $0.hasPrefix(#"netreach_path_changes_total{namespace="\#(lab.name)",destination=""}"#)
            }.flatMap { Int($0.split(separator: " ").last ?? "") }
            let sent = try #require(changes, "\(metrics)")
            #expect(sent == 2_000, "1,000 flaps made \(sent) changes")
            #expect(report.ids.count == 200)
            let first = try #require(report.ids.first)
            #expect(report.ids.allSatisfy { $0 == first }, "a reader's events differ from the first reader's")
            // The current state, then each change: ids consecutive after the first event.
            #expect(first.count == sent + 1, "\(first.count) events for \(sent) changes")
            #expect(zip(first.dropFirst(), first.dropFirst(2)).allSatisfy { $0 + 1 == $1 })
            #expect(report.stalledClosed, "the stalled client was not dropped")
            #expect(metrics.contains("netreach_event_clients_dropped_total 1"), "\(metrics)")

            let residentAfter = Self.residentKilobytes(of: serve.pid)
            if let residentBefore, let residentAfter {
                // 200 clients' buffers hold at most 256 events each; anything near 200 MB would
                // be a leak or an unbounded buffer.
                #expect(residentAfter - residentBefore < 200_000, "\(residentBefore) kB → \(residentAfter) kB")
            }
            serve.signal(SIGTERM)
            #expect(await serve.exitStatus() == 0, "\(serve.standardError)")
        }
    }

    /// VmRSS of `pid`, in kB.
    static func residentKilobytes(of pid: pid_t) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        return status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }
            .flatMap { Int($0.split(separator: " ").dropFirst().first ?? "") }
    }
}
