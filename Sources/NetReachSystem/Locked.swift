#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A value guarded by a lock: the package's one lock type.
///
/// A pthread mutex (what `NSLock` is, without Foundation), not `Synchronization.Mutex` or NIO's lock boxes: Mutex's futex is
/// invisible to ThreadSanitizer, which then reports races that are not there (Docs/DesignNotes.md),
/// and the thread-safety tests run under TSan in CI. A lock that guards a stretch of code rather
/// than a value is a `Locked(())`.
///
/// ```swift
/// let counts = Locked([String: Int]())
/// counts.withLock { $0["eth0", default: 0] += 1 }
/// let ordered = Locked(())
/// ordered.withLock { _ in deliverInOrder() }
/// ```
package final class Locked<Value>: @unchecked Sendable {
    // @unchecked: `value` is only touched inside `withLock`, which holds `mutex`.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    package init(_ value: Value) {
        self.value = value
        // Allocated, not stored inline: a pthread mutex must not move, and a class's stored
        // properties are not guaranteed a stable address.
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        let status = pthread_mutex_init(mutex, nil)
        precondition(status == 0, "pthread_mutex_init failed: \(status)")
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Runs `body` on the value while holding the lock; what `body` throws is thrown as it is.
    package func withLock<Result, Failure: Error>(
        _ body: (inout Value) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
