import Dispatch
import InMemoryLogging
import Logging
import MetricsTestKit
import NetReachTesting
import Testing

@testable import NetReach

/// A monitor's metrics and debug records, from a factory and a logger of the test's own (the
/// global MetricsSystem and LoggingSystem are never bootstrapped in the test process).
@Suite("PathMonitor metrics and logging")
struct PathMonitorMetricsTests {
    static func updates(_ metrics: TestMetrics, _ status: PathStatus) throws -> Int64 {
        try metrics.expectCounter("netreach_path_updates_total", [("status", status.rawValue)]).totalValue
    }

    @Test func eachDeliveredPathIsCountedByItsStatusAndRepeatsAreNot() async throws {
        let metrics = TestMetrics()
        let network = SimulatedNetwork.connected()
        let monitor = PathMonitor(source: network, metricsFactory: metrics)
        defer { monitor.cancel() }
        let paths = monitor.paths
        monitor.start(queue: DispatchQueue(label: "metrics"))
        var iterator = paths.makeAsyncIterator()
        #expect(await iterator.next()?.status == .satisfied)
        #expect(try Self.updates(metrics, .satisfied) == 1)

        network.removeDefaultRoutes("eth0")
        #expect(await iterator.next()?.status == .unsatisfied)
        network.addDefaultRoute("eth0", gateway: IPAddress("192.0.2.1")!)
        #expect(await iterator.next()?.status == .satisfied)

        #expect(try Self.updates(metrics, .satisfied) == 2)
        #expect(try Self.updates(metrics, .unsatisfied) == 1)
        #expect(try Self.updates(metrics, .requiresConnection) == 0)
    }

    @Test func eachDeliveredPathIsLoggedAtDebugUnderNetreachPath() async throws {
        let records = InMemoryLogHandler()
        var logger = Logger(label: "netreach.path", factory: { _ in records })
        logger.logLevel = .debug
        let network = SimulatedNetwork.connected()
        let monitor = PathMonitor(source: network, logger: logger)
        defer { monitor.cancel() }
        let paths = monitor.paths
        monitor.start(queue: DispatchQueue(label: "logging"))
        var iterator = paths.makeAsyncIterator()
        _ = await iterator.next()
        network.removeDefaultRoutes("eth0")
        _ = await iterator.next()

        let changes = records.entries.filter { $0.message.description == "path changed" }
        #expect(changes.map(\.level) == [.debug, .debug])
        #expect(changes.map { $0.metadata["status"]?.description } == ["satisfied", "unsatisfied"])
        #expect(changes.last?.metadata["reason"]?.description == "\(UnsatisfiedReason.noDefaultRoute)")
    }
}
