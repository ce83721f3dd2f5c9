import Testing

@testable import NetReachConnectivity

/// The indicator's decisions as a table: blips and outages in, show/hide (with their times) out.
@Suite("OfflineIndicator: show and hide decisions")
struct OfflineIndicatorMachineTests {
    /// Grace 2 s, minimum display 1 s.
    static let policy = OfflineIndicatorPolicy(gracePeriod: .seconds(2), minimumDisplayTime: .seconds(1))

    /// Plays `events` (time in ms, offline?) and lets time run to `until` ms; returns each decision
    /// with the time it was made.
    static func play(_ events: [(Int, Bool)], until: Int, policy: OfflineIndicatorPolicy = policy) -> [String] {
        var machine = OfflineIndicatorMachine(policy: policy)
        var decisions: [String] = []
        func record(_ decision: OfflineIndicatorMachine.Decision?, _ at: Duration) {
            guard let decision else { return }
            decisions.append(
                "\(decision == .show ? "show" : "hide")@\(at.components.seconds * 1000 + at.components.attoseconds / 1_000_000_000_000_000)"
            )
        }
        func runTimers(to time: Duration) {
            while let deadline = machine.deadline, deadline <= time {
                record(machine.advance(to: deadline), deadline)
            }
        }
        for (ms, offline) in events {
            let time = Duration.milliseconds(ms)
            runTimers(to: time)
            record(machine.observe(offline: offline, at: time), time)
        }
        runTimers(to: .milliseconds(until))
        return decisions
    }

    @Test(
        "Blips and outages",
        arguments: [
            // A blip shorter than the grace period never shows.
            ([(0, true), (500, false)], 10_000, [String]()),
            ([(0, true), (1_999, false)], 10_000, []),
            // An outage shows after the grace period and hides when the network is back.
            ([(0, true), (5_000, false)], 10_000, ["show@2000", "hide@5000"]),
            // An outage exactly as long as the grace period shows.
            ([(0, true), (2_000, false)], 10_000, ["show@2000", "hide@3000"]),
            // Back just after showing: stays up for the minimum display time.
            ([(0, true), (2_300, false)], 10_000, ["show@2000", "hide@3000"]),
            // Flapping faster than the grace period: each drop starts the grace period again.
            ([(0, true), (1_000, false), (1_500, true), (2_500, false), (3_000, true)], 10_000, ["show@5000"]),
            // Gone again while held up for the minimum time: no hide in between.
            ([(0, true), (2_200, false), (2_500, true), (10_000, false)], 20_000, ["show@2000", "hide@10000"]),
            // Repeated "offline" observations do not restart the grace period.
            ([(0, true), (1_000, true), (1_900, true)], 10_000, ["show@2000"]),
            // Online all along: nothing.
            ([(0, false), (1_000, false)], 10_000, []),
            // Two outages: two shows, two hides.
            (
                [(0, true), (3_000, false), (6_000, true), (9_000, false)], 20_000,
                ["show@2000", "hide@3000", "show@8000", "hide@9000"]
            ),
        ] as [([(Int, Bool)], Int, [String])])
    func table(events: [(Int, Bool)], until: Int, expected: [String]) {
        #expect(Self.play(events, until: until) == expected)
    }

    @Test("A zero grace period shows at once; a zero minimum hides at once")
    func zeroDurations() {
        let immediate = OfflineIndicatorPolicy(gracePeriod: .zero, minimumDisplayTime: .zero)
        #expect(Self.play([(0, true), (100, false)], until: 1_000, policy: immediate) == ["show@0", "hide@100"])
    }

    @Test("Limited and portal count as offline only when asked; unknown decides nothing")
    func levels() {
        let lenient = OfflineIndicatorPolicy()
        let strict = OfflineIndicatorPolicy(countsLimitedAsOffline: true)
        #expect(lenient.isOffline(ConnectivityLevel.limited) == false)
        #expect(lenient.isOffline(ConnectivityLevel.portal(loginURL: nil)) == false)
        #expect(strict.isOffline(ConnectivityLevel.limited) == true)
        #expect(strict.isOffline(ConnectivityLevel.portal(loginURL: nil)) == true)
        for policy in [lenient, strict] {
            #expect(policy.isOffline(ConnectivityLevel.none) == true)
            #expect(policy.isOffline(ConnectivityLevel.local) == true)
            #expect(policy.isOffline(ConnectivityLevel.full) == false)
            #expect(policy.isOffline(ConnectivityLevel.unknown) == nil)
        }
    }
}
