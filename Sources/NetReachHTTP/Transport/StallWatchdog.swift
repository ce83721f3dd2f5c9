import Foundation
import Synchronization

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
    private let timer = Mutex<Task<Void, Never>?>(nil)

    /// Starts the clock; `onExpire` is called at most once, with the reason, from the timer's task.
    package init(stall: Duration, deadline: ContinuousClock.Instant?, onExpire: @escaping @Sendable (TransportError) -> Void) {
        self.stall = stall
        self.deadline = deadline
        let task = Task { [weak self] in
            while true {
                guard let wake = self?.expiry(onExpire) else { return }
                do { try await Task.sleep(until: wake, clock: .continuous) } catch { return }
            }
        }
        timer.withLock { $0 = task }
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
        timer.withLock { task in
            task?.cancel()
            task = nil
        }
    }

    deinit { timer.withLock { $0?.cancel() } }

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
