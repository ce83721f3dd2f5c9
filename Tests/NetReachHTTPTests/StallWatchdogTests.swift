import Foundation
import NetReachSystem
import Testing

@testable import NetReach
@testable import NetReachHTTP

/// The transports' stall and deadline timer: it fires once, for the right reason, and a stopped
/// one never fires (nor wakes the process: it is a dispatch timer, cancelled for good).
@Suite("StallWatchdog")
struct StallWatchdogTests {
    final class Expiries: Sendable {
        private let reasons = Locked<[(detail: String, at: ContinuousClock.Instant)]>([])
        func record(_ error: TransportError) { reasons.withLock { $0.append((error.detail, .now)) } }
        var all: [String] { reasons.withLock { $0.map(\.detail) } }
        var times: [ContinuousClock.Instant] { reasons.withLock { $0.map(\.at) } }

        /// Waits (bounded, in real time) until `count` expiries came.
        func wait(for count: Int) async throws {
            for _ in 0..<400 where all.count < count { try await Task.sleep(for: .milliseconds(5)) }
        }
    }

    @Test("A stall fires once, saying so, and only after that long without activity")
    func stall() async throws {
        let expiries = Expiries()
        let touches = Locked<[ContinuousClock.Instant]>([.now])
        let watchdog = StallWatchdog(stall: .milliseconds(150), deadline: nil) { expiries.record($0) }
        for _ in 0..<4 { // activity every 100 ms (a loaded machine may sleep longer: then it may fire)
            try await Task.sleep(for: .milliseconds(100))
            watchdog.touch()
            touches.withLock { $0.append(.now) }
        }
        try await expiries.wait(for: 1)
        try await Task.sleep(for: .milliseconds(300))
        #expect(expiries.all.count == 1)
        #expect(expiries.all.first?.contains("no byte sent or received") == true, "\(expiries.all)")
        // Whenever it fired, 150 ms had passed since the activity before it (not timing luck:
        // the order of events decides).
        if let fired = expiries.times.first,
            let before = touches.withLock({ list in list.last(where: { $0 <= fired }) })
        {
            #expect(fired - before >= .milliseconds(145), "fired \(fired - before) after the last activity")
        }
        _ = watchdog
    }

    @Test("A deadline fires even while bytes flow")
    func deadline() async throws {
        let expiries = Expiries()
        let watchdog = StallWatchdog(stall: .seconds(60), deadline: .now + .milliseconds(100)) { expiries.record($0) }
        try await expiries.wait(for: 1)
        #expect(expiries.all == ["the transfer was not over by its deadline"])
        watchdog.stop()
    }

    @Test("Stopped, or released, it never fires")
    func stopped() async throws {
        let expiries = Expiries()
        let watchdog = StallWatchdog(stall: .milliseconds(50), deadline: .now + .milliseconds(80)) {
            expiries.record($0)
        }
        watchdog.stop()
        watchdog.stop() // idempotent
        do {
            _ = StallWatchdog(stall: .milliseconds(50), deadline: nil) { expiries.record($0) }
        }
        try await Task.sleep(for: .milliseconds(300))
        #expect(expiries.all.isEmpty)
    }

    @Test("An absurd stall timeout or a past deadline does not trap")
    func extremes() async throws {
        let expiries = Expiries()
        let forever = StallWatchdog(stall: .seconds(Int64.max / 2), deadline: nil) { expiries.record($0) }
        let past = StallWatchdog(stall: .seconds(1), deadline: .now - .seconds(5)) { expiries.record($0) }
        try await expiries.wait(for: 1)
        #expect(expiries.all == ["the transfer was not over by its deadline"])
        forever.stop()
        past.stop()
    }
}
