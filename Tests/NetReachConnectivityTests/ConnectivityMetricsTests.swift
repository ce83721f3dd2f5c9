import Clocks
import Dispatch
import Foundation
import MetricsTestKit
import NetReachConnectivity
import NetReachTesting
import Testing

@testable import NetReach

/// The monitor's metrics, read from a factory of the test's own: rounds, each probe's duration
/// with its family and verdict, and level changes by the level reached.
@Suite("ConnectivityMonitor metrics")
struct ConnectivityMetricsTests {
    static func monitor(
        _ network: SimulatedNetwork, prober: ScriptedProber, clock: TestClock<Duration>, metrics: TestMetrics
    ) -> (ConnectivityMonitor, PathMonitor) {
        let paths = PathMonitor(source: network)
        paths.start(queue: DispatchQueue(label: "paths"))
        let monitor = ConnectivityMonitor(
            configuration: .init(probes: [ConnectivityMonitorTests.probe]), pathMonitor: paths, prober: prober,
            clock: clock, metricsFactory: metrics)
        monitor.start(queue: DispatchQueue(label: "connectivity"))
        return (monitor, paths)
    }

    static let duration = "netreach_connectivity_probe_duration_seconds"
    static let changes = "netreach_connectivity_level_changes_total"

    @Test func aPassingRoundRecordsItsProbeAsPassedOverIPv4AndOneChangeToFull() async throws {
        let metrics = TestMetrics()
        let clock = TestClock()
        let (monitor, paths) = Self.monitor(.connected(), prober: ScriptedProber(), clock: clock, metrics: metrics)
        defer {
            monitor.cancel()
            paths.cancel()
        }
        _ = try await ConnectivityMonitorTests.settle(monitor, clock: clock) { $0.level == .full }

        #expect(try metrics.expectCounter("netreach_connectivity_probe_rounds_total").totalValue == 1)
        // ScriptedProber answers in 1 ms.
        let passed = try metrics.expectTimer(Self.duration, [("family", "ipv4"), ("verdict", "passed")])
        #expect(passed.values == [1_000_000])
        #expect(metrics.timers(label: Self.duration).filter { !$0.values.isEmpty }.count == 1)
        #expect(try metrics.expectCounter(Self.changes, [("family", "ipv4"), ("level", "full")]).totalValue == 1)
        #expect(try metrics.expectCounter(Self.changes, [("family", "overall"), ("level", "full")]).totalValue == 1)
    }

    @Test func aFailingRoundRecordsItsProbeAsFailedAndTheChangeToLimited() async throws {
        let metrics = TestMetrics()
        let clock = TestClock()
        let prober = ScriptedProber(ipv4: .failed("connection refused"))
        let (monitor, paths) = Self.monitor(.connected(), prober: prober, clock: clock, metrics: metrics)
        defer {
            monitor.cancel()
            paths.cancel()
        }
        _ = try await ConnectivityMonitorTests.settle(monitor, clock: clock) { $0.ipv4.level == .limited }

        // No clock time passed: the back-off's next round has not come.
        #expect(try metrics.expectCounter("netreach_connectivity_probe_rounds_total").totalValue == 1)
        let failed = try metrics.expectTimer(Self.duration, [("family", "ipv4"), ("verdict", "failed")])
        #expect(failed.values == [1_000_000])
        #expect(try metrics.expectTimer(Self.duration, [("family", "ipv4"), ("verdict", "passed")]).values.isEmpty)
        #expect(try metrics.expectCounter(Self.changes, [("family", "ipv4"), ("level", "limited")]).totalValue == 1)
        #expect(try metrics.expectCounter(Self.changes, [("family", "ipv4"), ("level", "full")]).totalValue == 0)
    }
}
