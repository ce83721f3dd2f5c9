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

    private struct IsolatedReport: Decodable {
        var loaded: Bool
        var firstHeard: String?
        var isolatedRow: String?
        var indicatorState: String
        var hiddenAfterGrace: Bool
        var outageShown: Bool
        var overlayText: String
        var recoveryHidden: Bool
    }

    private static let shots: URL = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent(".build/test-artifacts/status-page")
    private static let driver = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Scripts/status_page_driver.py").path

    @Test func theOverlayFollowsTheOfflineIndicatorsRulesOverTheEventStream() async throws {
        let shots = Self.shots
        try FileManager.default.createDirectory(at: shots, withIntermediateDirectories: true)
        let driver = Self.driver
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
            // The grace period is timed from the page's own handler ("pending"): the probe's second
            // reader may hear the event tens of milliseconds before or after it on a busy machine.
            let heard = try #require(report.outage.first { $0.kind == "unsatisfied" }?.at, "\(report.outage)")
            let pending = try #require(report.outage.first { $0.kind == "pending" }?.at, "\(report.outage)")
            let shown = try #require(report.outage.first { $0.kind == "shown" }?.at, "\(report.outage)")
            let hidden = try #require(report.outage.last { $0.kind == "hidden" }?.at, "\(report.outage)")
            #expect(shown - pending >= report.grace - 5, "shown \(shown - pending) ms after the page took the event")
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

    /// A host whose other namespace is isolated by design (no route, for good) is not offline:
    /// serve runs inside a lab (its own path: satisfied) and also watches a second lab with no
    /// route. The isolated namespace is made the first path the page hears of (serve starts
    /// watching it alone, then a reload adds its own namespace), as the old overlay, which followed
    /// the first path heard, would then have read "Offline" for good. The page, and Chromium, run
    /// inside the lab, where serve's 127.0.0.1 is.
    @Test func theOverlayFollowsTheHostsOwnPathNotAnIsolatedNamespace() async throws {
        try FileManager.default.createDirectory(at: Self.shots, withIntermediateDirectories: true)
        try await NetnsLab.withLab { host in
            try await NetnsLab.withLab(.init(ipv4: false, defaultRoutes: false)) { isolated in
                let config = host.directory + "/serve.yaml"
                try "namespaces: [\(isolated.name)]\n".write(toFile: config, atomically: true, encoding: .utf8)
                let serve = try NetreachProcess.start(
                    ["serve", "--listen", "127.0.0.1:0", "--config", config], inNamespace: host.name)
                defer { serve.kill() }
                let base = try await ServeClient.baseURL(of: serve)
                await ServeClient.until("the isolated namespace is read", base, "/readyz", namespace: host.name) {
                    $0.status == 200
                }
                try "all_namespaces: true\n".write(toFile: config, atomically: true, encoding: .utf8)
                serve.signal(SIGHUP)
                await LabPoll.until("serve reloads", timeout: .seconds(30)) {
                    serve.standardError.contains("serve: reloaded") || !serve.isRunning
                }
                await ServeClient.until("its own namespace is read", base, "/api/v1/path", namespace: host.name) {
                    $0.status == 200 && $0.body.contains("\"satisfied\"")
                }

                let run = try await ChildProcess.run(
                    LabCommand.ipExecutable,
                    [
                        "netns", "exec", host.name, "/usr/bin/python3", Self.driver, base + "/", host.name,
                        NetnsLab.ipv4Gateway, Self.shots.path, isolated.name,
                    ],
                    timeout: .seconds(150))
                try #require(run.status == 0, "driver: \(run.standardError)")
                let report = try JSONDecoder().decode(IsolatedReport.self, from: Data(run.standardOutput.utf8))

                #expect(report.loaded, "the page never showed its own path satisfied and the isolated one not")
                #expect(report.firstHeard == isolated.name, "heard first: \(report.firstHeard ?? "nothing")")
                #expect(report.isolatedRow?.contains("unsatisfied") == true, "\(report.isolatedRow ?? "no row")")
                #expect(report.indicatorState == "hidden", "the overlay follows the isolated namespace")
                #expect(report.hiddenAfterGrace, "the overlay showed for the isolated namespace")
                #expect(report.outageShown, "the host's own path went and the overlay did not show")
                #expect(report.overlayText.contains("noDefaultRoute"), "\(report.overlayText)")
                #expect(report.recoveryHidden)
                for name in ["4-isolated-namespace.png", "5-host-offline.png"] {
                    #expect(FileManager.default.fileExists(atPath: Self.shots.appendingPathComponent(name).path))
                }
                serve.signal(SIGTERM)
                #expect(await serve.exitStatus() == 0, "\(serve.standardError)")
            }
        }
    }
}
