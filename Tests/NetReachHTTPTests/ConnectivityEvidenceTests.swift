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

    /// A test clock that records every deadline slept until, as an offset from its start: a test
    /// waits until the monitor has armed its next round before it moves time past it, never for
    /// wall-clock time.
    final class RecordingClock: Clock, Sendable {
        typealias Instant = TestClock<Duration>.Instant
        private let base = TestClock()
        private let armed = Locked([Duration]())

        var now: Instant { base.now }
        var minimumResolution: Duration { base.minimumResolution }

        func sleep(until deadline: Instant, tolerance: Duration?) async throws {
            armed.withLock { $0.append(Instant().duration(to: deadline)) }
            try await base.sleep(until: deadline, tolerance: tolerance)
        }

        func advance(by duration: Duration) async { await base.advance(by: duration) }

        /// Whether something has slept until `offset` from the start.
        func hasArmed(_ offset: Duration) -> Bool { armed.withLock { $0.contains(offset) } }

    }

    /// Waits (bounded, in real time) until `condition` holds.
    static func eventually(_ condition: () -> Bool) async throws {
        for _ in 0..<2_000 where !condition() { try await Task.sleep(for: .milliseconds(5)) }
    }

    @Test func aSuccessfulRequestPostponesTheNextRound() async throws {
        let network = SimulatedNetwork.connected()
        let paths = PathMonitor(source: network)
        paths.start(queue: DispatchQueue(label: "paths"))
        defer { paths.cancel() }
        let prober = CountingProber()
        let clock = RecordingClock()
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
        try await Self.eventually { connectivity.current.level == .full && clock.hasArmed(.seconds(60)) }
        #expect(prober.count == 1)

        let transport = ScriptedTransport(Array(repeating: .status(200), count: 4))
        let service = NetworkService(baseURL: URL(string: "http://api.test")!, transport: transport, monitor: paths)
        await clock.advance(by: .seconds(30))
        // At 30 s: the evidence is taken as the request returns; the next round moves from 60 s to 90 s.
        _ = try await service.send(.get("/feed"))
        await clock.advance(by: .seconds(40)) // 70 s: the timer at 60 s finds the evidence
        try await Self.eventually { clock.hasArmed(.seconds(90)) }
        #expect(prober.count == 1, "postponed by the request")
        await clock.advance(by: .seconds(21)) // 91 s: the round due at 90 s
        try await Self.eventually { prober.count == 2 && clock.hasArmed(.seconds(150)) }
        #expect(prober.count == 2)

        // The next round is due an interval after the last one was: at 150 s. A request to a
        // local address says nothing about the internet.
        await clock.advance(by: .seconds(9)) // 100 s
        _ = try await service.send(.get("http://127.0.0.1/health"))
        await clock.advance(by: .seconds(52)) // 152 s: the round due at 150 s
        try await Self.eventually { prober.count == 3 }
        #expect(prober.count == 3, "not postponed by a request to 127.0.0.1")
    }
}
