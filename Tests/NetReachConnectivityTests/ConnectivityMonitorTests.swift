import Clocks
import Dispatch
import Foundation
import NetReachSystem
import NetReachTesting
import Testing

@testable import NetReach
@testable import NetReachConnectivity

/// A prober that answers from a script per family and counts what it was asked.
final class ScriptedProber: ConnectivityProber {
    // Not Synchronization.Mutex: ThreadSanitizer, which runs these tests in CI, cannot see a futex.
    private let state = Locked<(verdicts: [IPAddress.Family: ProbeVerdict], sent: [IPAddress.Family: Int])>(([:], [:]))
    /// What the captive-portal API says, and how often it was asked.
    private let api = Locked<(answer: CaptivePortalAnswer, asked: [URL])>((.failed("no API in the script"), []))

    func answerAPI(_ answer: CaptivePortalAnswer) { api.withLock { $0.answer = answer } }
    var apiAsked: [URL] { api.withLock { $0.asked } }

    func captivePortalStatus(at url: URL, timeout: Duration) async -> CaptivePortalAnswer {
        api.withLock { state in
            state.asked.append(url)
            return state.answer
        }
    }

    init(ipv4: ProbeVerdict = .passed, ipv6: ProbeVerdict = .passed) {
        state.withLock { $0.verdicts = [.ipv4: ipv4, .ipv6: ipv6] }
    }

    func answer(_ family: IPAddress.Family, _ verdict: ProbeVerdict) {
        state.withLock { $0.verdicts[family] = verdict }
    }
    func sent(_ family: IPAddress.Family) -> Int { state.withLock { $0.sent[family, default: 0] } }
    var total: Int { state.withLock { $0.sent.values.reduce(0, +) } }

    func probe(_ probe: ConnectivityProbe, over family: IPAddress.Family, timeout: Duration) async -> ProbeResult {
        let verdict = state.withLock { state -> ProbeVerdict in
            state.sent[family, default: 0] += 1
            return state.verdicts[family] ?? .failed("no script")
        }
        let status: Int? =
            switch verdict {
            case .passed: 204
            case .portal: 302
            default: nil
            }
        return ProbeResult(probe: probe, family: family, status: status, latency: .milliseconds(1), verdict: verdict)
    }
}

@Suite("ConnectivityMonitor: levels, hysteresis and when it probes")
struct ConnectivityMonitorTests {
    static let probe = ConnectivityProbe(URL(string: "http://probe.test/generate_204")!)

    /// A started monitor over `network`, on a test clock.
    static func monitor(
        _ network: SimulatedNetwork, prober: ScriptedProber, clock: TestClock<Duration>,
        _ change: (inout ConnectivityMonitor.Configuration) -> Void = { _ in }
    )
        -> (ConnectivityMonitor, PathMonitor)
    {
        let paths = PathMonitor(source: network)
        paths.start(queue: DispatchQueue(label: "paths"))
        var configuration = ConnectivityMonitor.Configuration(probes: [probe])
        change(&configuration)
        let monitor = ConnectivityMonitor(
            configuration: configuration, pathMonitor: paths, prober: prober, clock: clock)
        monitor.start(queue: DispatchQueue(label: "connectivity"))
        return (monitor, paths)
    }

    /// Waits (bounded, in real time) until `predicate` holds for what the monitor shows.
    ///
    /// `TestClock` suspends a sleeper whose deadline is exactly its `now` until the next advance:
    /// a timer the engine arms just after the test advanced onto its deadline would wait forever.
    /// Advancing by zero while waiting wakes it without moving time.
    static func settle(
        _ monitor: ConnectivityMonitor, clock: TestClock<Duration>,
        _ predicate: (Connectivity) -> Bool
    ) async throws -> Connectivity {
        for _ in 0..<500 where !predicate(monitor.current) {
            await clock.advance(by: .zero)
            try await Task.sleep(for: .milliseconds(5))
        }
        return monitor.current
    }

    /// Waits (bounded, in real time) until the monitor has done everything the clock's present
    /// allows: no round in flight, every timer armed for later (``ConnectivityMonitor/isQuiet()``).
    /// What has not happened then cannot happen before the next path change or advance, so a test
    /// checks for an absence after this, never after a sleep. Advancing by zero wakes a timer armed
    /// for exactly the present (see ``settle(_:clock:_:)``).
    static func quiet(_ monitor: ConnectivityMonitor, clock: TestClock<Duration>) async throws {
        for _ in 0..<2_000 {
            await clock.advance(by: .zero)
            if await monitor.isQuiet() { return }
            try await Task.sleep(for: .milliseconds(5))
        }
        Issue.record("the monitor still had work to do after 10 s")
    }

    @Test("One round at start; none while full and idle, however long")
    func fullAndQuiet() async throws {
        let network = SimulatedNetwork.connected()
        let prober = ScriptedProber()
        let clock = TestClock()
        let (monitor, paths) = Self.monitor(network, prober: prober, clock: clock)
        defer {
            monitor.cancel()
            paths.cancel()
        }
        let now = try await Self.settle(monitor, clock: clock) { $0.level == .full }
        #expect(now.level == .full)
        #expect(now.ipv4.level == .full)
        #expect(now.ipv4.evidence.count == 1)
        #expect(now.ipv6.level == .none, "the simulated network has no IPv6 address at all: not even a local network")
        #expect(prober.sent(.ipv4) == 1)
        #expect(prober.sent(.ipv6) == 0)
        await clock.advance(by: .seconds(3_600))
        try await Self.quiet(monitor, clock: clock)
        #expect(prober.total == 1, "no traffic while full")
    }

    @Test("Leaving full takes two failed rounds and the dwell; one passing round returns")
    func hysteresis() async throws {
        let network = SimulatedNetwork.connected()
        let prober = ScriptedProber()
        let clock = TestClock()
        let (monitor, paths) = Self.monitor(network, prober: prober, clock: clock) {
            $0.probesWhileFull = true
            $0.probeInterval = .seconds(60)
        }
        defer {
            monitor.cancel()
            paths.cancel()
        }
        _ = try await Self.settle(monitor, clock: clock) { $0.level == .full }
        prober.answer(.ipv4, .failed("connection refused"))
        await clock.advance(by: .seconds(60)) // periodic round: fails, doubt only
        let doubting = try await Self.settle(monitor, clock: clock) { $0.ipv4.evidence.first?.verdict != .passed }
        #expect(prober.sent(.ipv4) == 2)
        #expect(doubting.level == .full)
        #expect(doubting.ipv4.evidence.first?.verdict == .failed("connection refused"))
        await clock.advance(by: .seconds(1)) // checked again soon: still within the dwell
        _ = try await Self.settle(monitor, clock: clock) { _ in prober.sent(.ipv4) == 3 }
        try await Self.quiet(monitor, clock: clock)
        #expect(monitor.current.level == .full)
        // Rounds back off 2, 4, 8 s…; the dwell (10 s from the first failure) ends before the fifth.
        await clock.advance(by: .seconds(2))
        await clock.advance(by: .seconds(4))
        await clock.advance(by: .seconds(8))
        let limited = try await Self.settle(monitor, clock: clock) { $0.level == .limited }
        #expect(limited.level == .limited)
        #expect(prober.sent(.ipv4) >= 4)
        prober.answer(.ipv4, .passed)
        await clock.advance(by: .seconds(16))
        let back = try await Self.settle(monitor, clock: clock) { $0.level == .full }
        #expect(back.level == .full)
    }

    @Test("A portal's login URL is the level's; a new network starts from unknown")
    func portal() async throws {
        let network = SimulatedNetwork.connected(.wifi, name: "wlan0")
        let login = URL(string: "http://login.hotel.test/")!
        let prober = ScriptedProber(ipv4: .portal(loginURL: login, evidence: "HTTP 302 redirect"))
        let clock = TestClock()
        let (monitor, paths) = Self.monitor(network, prober: prober, clock: clock)
        defer {
            monitor.cancel()
            paths.cancel()
        }
        let now = try await Self.settle(monitor, clock: clock) { $0.level != .unknown && $0.level != .local }
        #expect(now.level == .portal(loginURL: login))
        // Signed in: the next round (1 s later) passes.
        prober.answer(.ipv4, .passed)
        await clock.advance(by: .seconds(1))
        #expect(try await Self.settle(monitor, clock: clock) { $0.level == .full }.level == .full)
    }

    @Test("Path facts need no probe: no path is none, no default route is local")
    func pathFacts() async throws {
        let network = SimulatedNetwork.connected(.wiredEthernet, name: "eth0")
        let prober = ScriptedProber()
        let clock = TestClock()
        let (monitor, paths) = Self.monitor(network, prober: prober, clock: clock)
        defer {
            monitor.cancel()
            paths.cancel()
        }
        _ = try await Self.settle(monitor, clock: clock) { $0.level == .full }
        network.removeDefaultRoutes("eth0")
        #expect(try await Self.settle(monitor, clock: clock) { $0.level == .local }.level == .local)
        network.setCarrier("eth0", false)
        // A lost carrier counts once it has lasted the delay (NetworkManager's carrier wait).
        _ = try await Self.settle(monitor, clock: clock) { $0.path.unsatisfiedReason == .linkDown }
        await clock.advance(by: .seconds(6))
        #expect(try await Self.settle(monitor, clock: clock) { $0.level == .none }.level == .none)
        try await Self.quiet(monitor, clock: clock)
        #expect(prober.total == 1, "no probe without a path")
    }

    @Test(
        "A link flapping ten times a second for five seconds: the path follows every flap, the levels do not change"
    )
    func carrierStormChangesNothing() async throws {
        let network = SimulatedNetwork.connected(.wiredEthernet, name: "eth0")
        let prober = ScriptedProber()
        let clock = TestClock()
        let (monitor, paths) = Self.monitor(network, prober: prober, clock: clock)
        defer {
            monitor.cancel()
            paths.cancel()
        }
        _ = try await Self.settle(monitor, clock: clock) { $0.level == .full }
        let levels = Locked<[ConnectivityLevel]>([])
        let pathsSeen = Locked(0)
        let every = monitor.verdicts
        let reader = Task {
            var last: NetworkPath?
            for await verdict in every {
                if verdict.path != last { pathsSeen.withLock { $0 += 1 } }
                last = verdict.path
                levels.withLock { if $0.last != verdict.level { $0.append(verdict.level) } }
            }
        }
        for _ in 0..<50 {
            network.setCarrier("eth0", false)
            _ = try await Self.settle(monitor, clock: clock) { $0.path.unsatisfiedReason == .linkDown }
            await clock.advance(by: .milliseconds(50))
            network.setCarrier("eth0", true)
            _ = try await Self.settle(monitor, clock: clock) { $0.path.status == .satisfied }
            await clock.advance(by: .milliseconds(50))
        }
        _ = try await Self.settle(monitor, clock: clock) { $0.level == .full && $0.path.status == .satisfied }
        await clock.advance(by: .seconds(30)) // no loss was left pending
        try await Self.quiet(monitor, clock: clock)
        #expect(monitor.current.level == .full)
        monitor.cancel()
        await reader.value
        #expect(levels.withLock { $0 } == [.full], "no level changed during the storm")
        #expect(pathsSeen.withLock { $0 } >= 100, "the path changed at once, every time")
    }

    @Test("A storm that ends with the carrier gone changes the levels once, the delay after the last loss began")
    func carrierStormEndingDownChangesOnce() async throws {
        let network = SimulatedNetwork.connected(.wiredEthernet, name: "eth0")
        let prober = ScriptedProber()
        let clock = TestClock()
        let (monitor, paths) = Self.monitor(network, prober: prober, clock: clock)
        defer { paths.cancel() }
        _ = try await Self.settle(monitor, clock: clock) { $0.level == .full }
        let levels = Locked<[ConnectivityLevel]>([])
        let updates = monitor.updates
        let reader = Task { for await verdict in updates { levels.withLock { $0.append(verdict.level) } } }
        for _ in 0..<10 {
            network.setCarrier("eth0", false)
            _ = try await Self.settle(monitor, clock: clock) { $0.path.unsatisfiedReason == .linkDown }
            await clock.advance(by: .milliseconds(50))
            network.setCarrier("eth0", true)
            _ = try await Self.settle(monitor, clock: clock) { $0.path.status == .satisfied }
            await clock.advance(by: .milliseconds(50))
        }
        network.setCarrier("eth0", false)
        _ = try await Self.settle(monitor, clock: clock) { $0.path.unsatisfiedReason == .linkDown }
        await clock.advance(by: .milliseconds(5_900))
        try await Self.quiet(monitor, clock: clock)
        #expect(monitor.current.level == .full, "6 s have not passed since the carrier went")
        await clock.advance(by: .milliseconds(100))
        #expect(try await Self.settle(monitor, clock: clock) { $0.level == .none }.level == .none)
        // It comes back: one round, full again.
        network.setCarrier("eth0", true)
        _ = try await Self.settle(monitor, clock: clock) { $0.level == .full }
        try await Self.quiet(monitor, clock: clock)
        monitor.cancel()
        await reader.value
        #expect(levels.withLock { $0 } == [.full, .none, .unknown, .full])
    }

    @Test("While not full, the back-off stops at its cap: a recovery after a long outage is seen within it")
    func recoveryIsSeenWithinTheCap() async throws {
        for cap in [Duration.seconds(1), .seconds(30)] {
            let network = SimulatedNetwork.connected()
            let prober = ScriptedProber(ipv4: .failed("connection refused"))
            let clock = TestClock()
            let (monitor, paths) = Self.monitor(network, prober: prober, clock: clock) { $0.maximumBackOff = cap }
            defer {
                monitor.cancel()
                paths.cancel()
            }
            _ = try await Self.settle(monitor, clock: clock) { $0.level == .limited }
            // Ten minutes of outage, a second at a time.
            for _ in 0..<600 {
                await clock.advance(by: .seconds(1))
                try await Self.quiet(monitor, clock: clock)
            }
            prober.answer(.ipv4, .passed)
            // Recovery: the next round is at most `cap` away (a few seconds of slack: the clock
            // moves on while a busy machine runs the round).
            var waited = Duration.zero
            while waited < cap * 2 + .seconds(5), monitor.current.level != .full {
                await clock.advance(by: .seconds(1))
                waited += .seconds(1)
                try await Self.quiet(monitor, clock: clock)
            }
            let now = try await Self.settle(monitor, clock: clock) { $0.level == .full }
            #expect(now.level == .full, "seen within \(cap) of the recovery")
            #expect(waited <= cap + .seconds(3), "not after a back-off grown to minutes")
            #expect(prober.sent(.ipv4) > 10, "it kept probing while not full")
        }
    }

    @Test("One round per path change, and none over an expensive path unless allowed")
    func roundsPerPathChangeAndExpensive() async throws {
        let network = SimulatedNetwork.connected(.wiredEthernet, name: "eth0")
        let prober = ScriptedProber()
        let clock = TestClock()
        let (monitor, paths) = Self.monitor(network, prober: prober, clock: clock)
        defer {
            monitor.cancel()
            paths.cancel()
        }
        _ = try await Self.settle(monitor, clock: clock) { $0.level == .full }
        network.addInterface("wwan0", type: .cellular, metric: 50) // preferred now, and expensive
        let suspended = try await Self.settle(monitor, clock: clock) { $0.probesSuspended != nil }
        #expect(suspended.probesSuspended == "the path is expensive")
        #expect(suspended.level == .unknown, "another network, not judged")
        network.removeInterface("wwan0")
        _ = try await Self.settle(monitor, clock: clock) { $0.level == .full }
        try await Self.quiet(monitor, clock: clock)
        #expect(prober.total == 2, "one round at start, one after returning to eth0, none over wwan0")
    }

    @Test("IPv4 full while IPv6 is limited: judged apart, the best one overall")
    func perFamily() async throws {
        let network = SimulatedNetwork()
        network.addLoopback()
        network.addInterface("eth0", ipv4: true, ipv6: true)
        let prober = ScriptedProber(ipv4: .passed, ipv6: .failed("network unreachable"))
        let clock = TestClock()
        let (monitor, paths) = Self.monitor(network, prober: prober, clock: clock)
        defer {
            monitor.cancel()
            paths.cancel()
        }
        let now = try await Self.settle(monitor, clock: clock) { $0.ipv6.level == .limited }
        #expect(now.ipv4.level == .full)
        #expect(now.ipv6.level == .limited)
        #expect(now.level == .full)
        #expect(now.ipv6.evidence.first?.family == .ipv6)
    }

    @Test("Deliveries only on a level change; every sequence starts with the current verdict")
    func delivery() async throws {
        let network = SimulatedNetwork.connected()
        let prober = ScriptedProber()
        let clock = TestClock()
        let (monitor, paths) = Self.monitor(network, prober: prober, clock: clock) {
            $0.probesWhileFull = true
            $0.probeInterval = .seconds(60)
        }
        defer { paths.cancel() }
        _ = try await Self.settle(monitor, clock: clock) { $0.level == .full }
        let seen = Locked<[ConnectivityLevel]>([])
        // Subscribed here, before the clock moves: the sequence starts with the current verdict.
        let updates = monitor.updates
        let reader = Task {
            for await connectivity in updates { seen.withLock { $0.append(connectivity.level) } }
        }
        for _ in 0..<2_000 where seen.withLock({ $0.isEmpty }) { try await Task.sleep(for: .milliseconds(5)) }
        #expect(seen.withLock { $0 } == [.full])
        await clock.advance(by: .seconds(60)) // another passing round: evidence, no change
        _ = try await Self.settle(monitor, clock: clock) { _ in prober.sent(.ipv4) == 2 }
        try await Self.quiet(monitor, clock: clock)
        monitor.cancel()
        await reader.value // the sequence ends with the monitor
        #expect(seen.withLock { $0 } == [.full])
    }
}
