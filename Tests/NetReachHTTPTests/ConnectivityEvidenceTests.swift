import Clocks
import Dispatch
import Foundation
import NetReachConnectivity
import NetReachSystem
import NetReachTesting
import Testing

@testable import NetReach
@testable import NetReachHTTP

/// Requests that succeed through NetworkService count as evidence for a ConnectivityMonitor of the
/// same path monitor: they postpone its next probe round; a request to a local address does not.
@Suite("NetworkService's answers as connectivity evidence")
struct ConnectivityEvidenceTests {
    /// A prober that always passes and counts.
    final class CountingProber: ConnectivityProber {
        private let sent = Locked(0)
        var count: Int { sent.withLock { $0 } }
        func probe(_ probe: ConnectivityProbe, over family: IPAddress.Family, timeout: Duration) async -> ProbeResult {
            sent.withLock { $0 += 1 }
            return ProbeResult(probe: probe, family: family, status: 204, latency: .milliseconds(1), verdict: .passed)
        }
    }

    /// Waits (bounded, in real time) until `condition` holds.
    static func eventually(_ condition: () -> Bool) async throws {
        for _ in 0..<400 where !condition() { try await Task.sleep(for: .milliseconds(5)) }
    }

    @Test func aSuccessfulRequestPostponesTheNextRound() async throws {
        let network = SimulatedNetwork.connected()
        let paths = PathMonitor(source: network)
        paths.start(queue: DispatchQueue(label: "paths"))
        defer { paths.cancel() }
        let prober = CountingProber()
        let clock = TestClock()
        var configuration = ConnectivityMonitor.Configuration(probes: [
            ConnectivityProbe(URL(string: "http://probe.test/generate_204")!)
        ])
        configuration.probesWhileFull = true
        configuration.probeInterval = .seconds(60)
        configuration.families = [.ipv4]
        let connectivity = ConnectivityMonitor(
            configuration: configuration, pathMonitor: paths, prober: prober, clock: clock)
        connectivity.start(queue: DispatchQueue(label: "connectivity"))
        defer { connectivity.cancel() }
        try await Self.eventually { connectivity.current.level == .full }
        #expect(prober.count == 1)

        let transport = ScriptedTransport(Array(repeating: .status(200), count: 4))
        let service = NetworkService(baseURL: URL(string: "http://api.test")!, transport: transport, monitor: paths)
        await clock.advance(by: .seconds(30))
        _ = try await service.send(.get("/feed")) // at 30 s: the next round moves from 60 s to 90 s
        try await Task.sleep(for: .milliseconds(50))
        await clock.advance(by: .seconds(40)) // 70 s
        try await Task.sleep(for: .milliseconds(50))
        #expect(prober.count == 1, "postponed by the request")
        await clock.advance(by: .seconds(21)) // 91 s
        try await Self.eventually { prober.count == 2 }
        #expect(prober.count == 2)

        // Next round due at 151 s. A request to a local address says nothing about the internet.
        await clock.advance(by: .seconds(9)) // 100 s
        _ = try await service.send(.get("http://127.0.0.1/health"))
        try await Task.sleep(for: .milliseconds(50))
        await clock.advance(by: .seconds(52)) // 152 s
        try await Self.eventually { prober.count == 3 }
        #expect(prober.count == 3, "not postponed by a request to 127.0.0.1")
    }
}
