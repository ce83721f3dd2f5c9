import Clocks
import Dispatch
import NetReach
import NetReachConnectivity
import NetReachTesting
import Testing

/// The indicator on the main actor, driven by a test clock: decisions come on the main actor, at
/// the clock's times, and only on a change.
@Suite("OfflineIndicator on a clock")
@MainActor
struct OfflineIndicatorTests {
    /// On the main actor, where the indicator decides: `wait`, nonisolated, ran on the pool and
    /// read `values` while a decision appended to it (ThreadSanitizer saw it once in CI).
    @MainActor
    final class Decisions {
        var values: [Bool] = []

        /// Waits (bounded, in real time) until `count` decisions have come: the indicator's timer
        /// runs as a task of its own, which a loaded machine may start late. `TestClock` holds a
        /// sleeper whose deadline is exactly its present until the next advance, so a timer that
        /// starts sleeping after the test advanced onto its deadline is woken by advancing zero.
        func wait(for count: Int, on clock: TestClock<Duration>) async throws {
            for _ in 0..<400 where values.count < count {
                await clock.advance(by: .zero)
                try await Task.sleep(for: .milliseconds(5))
            }
        }
    }

    @Test("Shows after the grace period on the clock, hides after the minimum display time")
    func followsTheClock() async throws {
        let clock = TestClock()
        let decisions = Decisions()
        let indicator = OfflineIndicator(
            policy: OfflineIndicatorPolicy(gracePeriod: .seconds(2), minimumDisplayTime: .seconds(1)),
            clock: clock
        ) { decisions.values.append($0) }
        indicator.update(ConnectivityLevel.none)
        await clock.advance(by: .milliseconds(1_999))
        #expect(decisions.values.isEmpty)
        #expect(!indicator.isShowing)
        await clock.advance(by: .milliseconds(1))
        try await decisions.wait(for: 1, on: clock)
        #expect(decisions.values == [true])
        #expect(indicator.isShowing)

        indicator.update(ConnectivityLevel.full)
        #expect(decisions.values == [true], "held up for the minimum display time")
        await clock.advance(by: .milliseconds(999))
        #expect(decisions.values == [true])
        await clock.advance(by: .milliseconds(1))
        try await decisions.wait(for: 2, on: clock)
        #expect(decisions.values == [true, false])
        #expect(!indicator.isShowing)
    }

    @Test("A blip on the clock never shows; unknown changes nothing")
    func blip() async {
        let clock = TestClock()
        let decisions = Decisions()
        let indicator = OfflineIndicator(clock: clock) { decisions.values.append($0) }
        indicator.update(ConnectivityLevel.limited) // not offline by default
        indicator.update(ConnectivityLevel.local)
        await clock.advance(by: .seconds(1))
        indicator.update(ConnectivityLevel.unknown)
        indicator.update(ConnectivityLevel.full)
        await clock.advance(by: .seconds(60))
        #expect(decisions.values.isEmpty)
    }

    @Test("Follows a monitor: a link that goes down shows it after the grace period")
    func followsAMonitor() async throws {
        let network = SimulatedNetwork.connected(.wifi, name: "wlan0")
        let monitor = PathMonitor(source: network)
        monitor.start(queue: DispatchQueue(label: "offline-indicator-test"))
        defer { monitor.cancel() }
        let clock = TestClock()
        let decisions = Decisions()
        let indicator = OfflineIndicator(policy: OfflineIndicatorPolicy(gracePeriod: .seconds(2)), clock: clock) {
            decisions.values.append($0)
        }
        indicator.follow(monitor)
        network.setCarrier("wlan0", false)
        // The path reaches the indicator through the monitor's sequence, on its own time: move the
        // clock past the grace period until the decision comes (bounded; the exact timing is the
        // other tests' business).
        for _ in 0..<500 where decisions.values.isEmpty {
            await clock.advance(by: .seconds(2))
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(decisions.values == [true])
        #expect(monitor.currentPath.status != .satisfied)
        indicator.stop()
    }
}
