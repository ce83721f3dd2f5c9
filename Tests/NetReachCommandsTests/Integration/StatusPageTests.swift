import Foundation
import NetReachTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `serve`'s status page in headless Chromium, as a person would watch it during an outage:
/// the page shows the path; a 0.5 s blip shows nothing; an outage shows the overlay after the
/// grace period and it leaves after recovery. Screenshots of each state are kept in
/// `.build/test-artifacts/status-page/`.
@Suite(
    "serve's status page in Chromium (integration)", .offPool, .needsNamespaceRoot,
    .enabled(if: ExternalServer.available("chromium")), .timeLimit(.minutes(3)))
struct StatusPageTests {
    private struct Logged: Decodable {
        var kind: String
        var at: Double
    }

    private struct Report: Decodable {
        var loaded: Bool
        var pathShown: String
        var blip: [Logged]
        var blipShowedOverlay: Bool
        var outageShown: Bool
        var overlayText: String
        var recoveryHidden: Bool
        var outage: [Logged]
        var grace: Double
        var minimum: Double
        var changes: Int
    }

    @Test func theOverlayFollowsTheOfflineIndicatorsRulesOverTheEventStream() async throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        let shots = root.appendingPathComponent(".build/test-artifacts/status-page")
        try FileManager.default.createDirectory(at: shots, withIntermediateDirectories: true)
        let driver = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Scripts/status_page_driver.py").path
        try await NetnsLab.withLab { lab in
            let serve = try NetreachProcess.start(["serve", "--listen", "127.0.0.1:0", "--namespace", lab.name])
            defer { serve.kill() }
            let base = try await ServeClient.baseURL(of: serve)
            let run = try await ChildProcess.run(
                "/usr/bin/python3", [driver, base + "/", lab.name, NetnsLab.ipv4Gateway, shots.path],
                timeout: .seconds(150))
            try #require(run.status == 0, "driver: \(run.standardError)")
            let report = try JSONDecoder().decode(Report.self, from: Data(run.standardOutput.utf8))

            #expect(report.loaded, "the page never showed a satisfied path")
            #expect(report.pathShown.contains("veth0 (wiredEthernet)"), "\(report.pathShown)")
            #expect(report.pathShown.contains(NetnsLab.ipv4Gateway))

            // The blip: if the page heard it end within the grace period (it always should), the
            // overlay never showed.
            let down = report.blip.first { $0.kind == "unsatisfied" }?.at
            let up = report.blip.first { $0.kind == "satisfied" }?.at
            if let down, let up, up - down < report.grace {
                #expect(!report.blipShowedOverlay, "a \(Int(up - down)) ms blip showed the overlay: \(report.blip)")
            } else {
                Issue.record("the page did not hear the blip end within the grace period: \(report.blip)")
            }

            // The outage: shown once the grace period has passed after the page heard of it,
            // within a second more; hidden after recovery, having stayed up the minimum time.
            #expect(report.outageShown)
            #expect(report.overlayText.contains("noDefaultRoute"), "\(report.overlayText)")
            #expect(report.recoveryHidden)
            let heard = try #require(report.outage.first { $0.kind == "unsatisfied" }?.at, "\(report.outage)")
            let shown = try #require(report.outage.first { $0.kind == "shown" }?.at, "\(report.outage)")
            let hidden = try #require(report.outage.last { $0.kind == "hidden" }?.at, "\(report.outage)")
            #expect(shown - heard >= report.grace - 50, "shown \(shown - heard) ms after the event")
            #expect(shown - heard <= report.grace + 1000, "shown \(shown - heard) ms after the event")
            #expect(hidden - shown >= report.minimum - 50, "shown for only \(hidden - shown) ms")
            #expect(report.changes >= 5, "recent changes: \(report.changes)")
            for name in ["1-satisfied.png", "2-offline.png", "3-recovered.png"] {
                #expect(FileManager.default.fileExists(atPath: shots.appendingPathComponent(name).path), "\(name)")
            }
            serve.signal(SIGTERM)
            #expect(await serve.exitStatus() == 0, "\(serve.standardError)")
        }
    }
}
