import Foundation

/// A value guarded by a lock: the package's one lock type.
///
/// A pthread mutex (`NSLock`), not `Synchronization.Mutex` or NIO's lock boxes: Mutex's futex is
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
    // @unchecked: `value` is only touched inside `withLock`, which holds `lock`.
    private let lock = NSLock()
    private var value: Value

    package init(_ value: Value) { self.value = value }

    /// Runs `body` on the value while holding the lock; what `body` throws is thrown as it is.
    package func withLock<Result, Failure: Error>(
        _ body: (inout Value) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
