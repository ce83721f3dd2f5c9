import Dispatch
import Foundation
import MetricsTestKit
import NetReach
import NetReachTesting
import Testing

@testable import NetReachHTTP

/// The service's metrics, read from a factory of the test's own (the global MetricsSystem is
/// never bootstrapped in the test process).
@Suite("NetworkService metrics")
struct NetworkServiceMetricsTests {
    static func service(
        _ transport: ScriptedTransport, network: SimulatedNetwork = .connected(), metrics: TestMetrics,
        policy: RequestPolicy = NetworkServiceTests.policy()
    ) -> (NetworkService, PathMonitor) {
        let monitor = PathMonitor(source: network, metricsFactory: metrics)
        monitor.start(queue: DispatchQueue(label: "monitor"))
        let service = NetworkService(
            baseURL: NetworkServiceTests.base, policy: policy, transport: transport, monitor: monitor,
            metricsFactory: metrics)
        return (service, monitor)
    }

    static func count(_ metrics: TestMetrics, _ label: String, _ dimensions: [(String, String)] = []) throws -> Int64 {
        try metrics.expectCounter(label, dimensions).totalValue
    }

    @Test func aRetriedRequestCountsEachRetryWithItsReasonAndOneSuccess() async throws {
        let metrics = TestMetrics()
        let transport = ScriptedTransport([.failure(.connectionLost), .status(503), .status(200, body: "ok")])
        let (service, monitor) = Self.service(transport, metrics: metrics)
        defer { monitor.cancel() }
        _ = try await service.send(.get("/items"))

        #expect(try Self.count(metrics, "netreach_http_attempts_total") == 3)
        #expect(try Self.count(metrics, "netreach_http_retries_total", [("reason", "connectionLost")]) == 1)
        #expect(try Self.count(metrics, "netreach_http_retries_total", [("reason", "status")]) == 1)
        #expect(metrics.counterTotal(label: "netreach_http_retries_total") == 2)
        #expect(try Self.count(metrics, "netreach_http_requests_total", [("outcome", "success")]) == 1)
        #expect(metrics.counterTotal(label: "netreach_http_requests_total") == 1)
    }

    @Test func aRequestThatGivesUpCountsItsFailureByReason() async throws {
        let metrics = TestMetrics()
        var retries = DefaultRetryPolicy()
        retries.retryLimit = 0
        let transport = ScriptedTransport([.failure(.timedOut)])
        let (service, monitor) = Self.service(
            transport, metrics: metrics, policy: NetworkServiceTests.policy { $0.retryPolicy = retries })
        defer { monitor.cancel() }
        await #expect(throws: NetworkError.self) { try await service.send(.get("/slow")) }

        #expect(try Self.count(metrics, "netreach_http_requests_total", [("outcome", "timedOut")]) == 1)
        #expect(try Self.count(metrics, "netreach_http_requests_total", [("outcome", "success")]) == 0)
        #expect(try Self.count(metrics, "netreach_http_attempts_total") == 1)
        #expect(metrics.counterTotal(label: "netreach_http_retries_total") == 0)
    }

    @Test func aWaitForConnectivityIsCountedAndTimedAsConnected() async throws {
        let metrics = TestMetrics()
        let network = SimulatedNetwork.connected()
        network.removeDefaultRoutes("eth0")
        let transport = ScriptedTransport([.status(200)])
        let (service, monitor) = Self.service(
            transport, network: network, metrics: metrics,
            policy: NetworkServiceTests.policy { $0.waitsForConnectivity = true })
        defer { monitor.cancel() }
        let request = Task { try await service.send(.get("/feed")) }
        // The wait has begun once it is counted; then the route ends it.
        while try Self.count(metrics, "netreach_http_connectivity_waits_total") == 0 {
            try await Task.sleep(for: .milliseconds(5))
        }
        network.addDefaultRoute("eth0", gateway: IPAddress("192.0.2.1")!)
        let response = try await request.value

        let timer = try metrics.expectTimer(
            "netreach_http_connectivity_wait_duration_seconds", [("outcome", "connected")])
        #expect(timer.values.count == 1)
        let waited = response.waitedForConnectivity
        #expect(
            timer.values.first
                == waited.components.seconds * 1_000_000_000 + waited.components.attoseconds / 1_000_000_000)
        #expect(try Self.count(metrics, "netreach_http_connectivity_waits_total") == 1)
        for outcome in ["timedOut", "cancelled"] {
            let other = try metrics.expectTimer(
                "netreach_http_connectivity_wait_duration_seconds", [("outcome", outcome)])
            #expect(other.values.isEmpty, "\(outcome)")
        }
    }
}
