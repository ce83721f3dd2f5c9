import Dispatch
import Synchronization

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Ends a transfer that goes `stall` without a byte moving, or runs past `deadline`: one timer per
/// transfer, re-armed lazily, so marking activity costs one atomic store per chunk.
///
/// Activity is whatever the transport calls ``touch()`` for: a request chunk written, a response
/// chunk read or taken by the consumer. While a transport's producer is held because the consumer
/// is not reading (``hold(_:)``), the network is not to blame and the stall clock does not run.
package final class StallWatchdog: Sendable {
    private let origin = ContinuousClock.now
    /// Nanoseconds from `origin` to the last activity.
    private let lastActivity = Atomic<Int64>(0)
    private let holds = Atomic<Int>(0)
    private let stall: Duration
    private let deadline: ContinuousClock.Instant?
    /// A dispatch timer, not a sleeping task: on Linux a cancelled `Task.sleep` still wakes a
    /// thread at its deadline, so every finished transfer would cost a wake-up one stall timeout
    /// later (measured: about four context switches each). A cancelled dispatch source never fires.
    /// Dispatch sources are safe to use from any thread (cancel, schedule); the property is never reassigned.
    private nonisolated(unsafe) let timer: DispatchSourceTimer

    /// The queue every watchdog's timer runs on: its work is a few loads and a comparison.
    private static let queue = DispatchQueue(label: "NetReach.StallWatchdog")

    /// Starts the clock; `onExpire` is called at most once, with the reason, from the timer's queue.
    package init(
        stall: Duration, deadline: ContinuousClock.Instant?, onExpire: @escaping @Sendable (TransportError) -> Void
    ) {
        self.stall = stall
        self.deadline = deadline
        timer = DispatchSource.makeTimerSource(queue: Self.queue)
        timer.setEventHandler { [weak self] in
            guard let self else { return }
            guard let wake = self.expiry(onExpire) else { return self.stop() }
            self.timer.schedule(deadline: Self.dispatchTime(wake))
        }
        timer.schedule(deadline: Self.dispatchTime(deadline.map { min($0, origin + stall) } ?? origin + stall))
        timer.activate()
    }

    /// `instant` on Dispatch's clock (both count from boot on Linux, so only the distance matters).
    private static func dispatchTime(_ instant: ContinuousClock.Instant) -> DispatchTime {
        let (seconds, attoseconds) = (instant - .now).components
        // At most a century away: an absurd stall timeout must not overflow into a trap.
        let nanoseconds = max(0, min(seconds, 3_155_760_000) * 1_000_000_000 + attoseconds / 1_000_000_000)
        return .now() + .nanoseconds(Int(nanoseconds))
    }

    /// Marks activity now.
    package func touch() {
        let (seconds, attoseconds) = (ContinuousClock.now - origin).components
        lastActivity.store(seconds * 1_000_000_000 + attoseconds / 1_000_000_000, ordering: .relaxed)
    }

    /// While held (calls nest), the transfer is waiting for its consumer, not the network.
    package func hold(_ held: Bool) {
        holds.add(held ? 1 : -1, ordering: .relaxed)
        touch()
    }

    /// Stops the clock; `onExpire` will not be called after this returns (unless it is running).
    package func stop() {
        timer.cancel()
    }

    deinit { timer.cancel() }

    /// When to look again, or `nil` after calling `onExpire`.
    private func expiry(_ onExpire: @Sendable (TransportError) -> Void) -> ContinuousClock.Instant? {
        let now = ContinuousClock.now
        if let deadline, now >= deadline {
            onExpire(TransportError(.timedOut, "the transfer was not over by its deadline"))
            return nil
        }
        if holds.load(ordering: .relaxed) > 0 { touch() }
        let last = origin + .nanoseconds(lastActivity.load(ordering: .relaxed))
        if now - last >= stall {
            onExpire(TransportError(.timedOut, "no byte sent or received for \(stall)"))
            return nil
        }
        let wake = last + stall
        if let deadline, deadline < wake { return deadline }
        return wake
    }
}
