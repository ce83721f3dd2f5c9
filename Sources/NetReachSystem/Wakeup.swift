#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Lets a thread sleep until another one says something changed: a pthread condition variable
/// and its mutex, what Foundation's `NSCondition` is. The state waited for lives elsewhere (a
/// ``Locked``); the waiter looks at it each time it wakes, and whoever changes it calls
/// ``broadcast()`` afterwards, so a change made just before the waiter sleeps is never missed.
///
/// ```swift
/// let ready = Locked(false)
/// let wakeup = Wakeup()
/// // the thread that makes it ready:
/// ready.withLock { $0 = true }
/// wakeup.broadcast()
/// // the thread that waits, at most 5 s:
/// let isReady = wakeup.wait(until: .now + .seconds(5)) { ready.withLock { $0 } }
/// ```
package final class Wakeup: @unchecked Sendable {
    // @unchecked: the mutex and condition are only used through the pthread calls, which are
    // thread-safe; both are allocated so they never move.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>

    package init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        condition = .allocate(capacity: 1)
        condition.initialize(to: pthread_cond_t())
        precondition(pthread_mutex_init(mutex, nil) == 0, "pthread_mutex_init failed")
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        #if os(Linux)
        // Deadlines are measured on the monotonic clock: a wall-clock step neither cuts a wait
        // short nor stretches it.
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        #endif
        precondition(pthread_cond_init(condition, &attributes) == 0, "pthread_cond_init failed")
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deinitialize(count: 1)
        mutex.deinitialize(count: 1)
        condition.deallocate()
        mutex.deallocate()
    }

    /// Wakes every thread waiting in ``wait(until:for:)``, to look again.
    package func broadcast() {
        pthread_mutex_lock(mutex)
        pthread_cond_broadcast(condition)
        pthread_mutex_unlock(mutex)
    }

    /// Sleeps until `isDone` returns `true` (looked at first, and after each ``broadcast()``) or
    /// `deadline` passes; `nil` waits as long as it takes. Returns `isDone`'s last answer.
    @discardableResult
    package func wait(until deadline: ContinuousClock.Instant? = nil, for isDone: () -> Bool) -> Bool {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while !isDone() {
            guard let deadline else {
                pthread_cond_wait(condition, mutex)
                continue
            }
            let left = ContinuousClock.now.duration(to: deadline)
            guard left > .zero else { return false }
            var wake = Self.monotonicNow()
            let (seconds, attoseconds) = min(left, .seconds(86_400)).components
            let nanoseconds = Int(wake.tv_nsec) + Int(attoseconds / 1_000_000_000)
            wake.tv_sec += Int(seconds) + nanoseconds / 1_000_000_000
            wake.tv_nsec = nanoseconds % 1_000_000_000
            pthread_cond_timedwait(condition, mutex, &wake)
        }
        return true
    }

    private static func monotonicNow() -> timespec {
        var now = timespec()
        #if os(Linux)
        clock_gettime(CLOCK_MONOTONIC, &now)
        #else
        clock_gettime(CLOCK_REALTIME, &now)
        #endif
        return now
    }
}
