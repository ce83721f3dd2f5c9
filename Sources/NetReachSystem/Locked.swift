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
    /// The value in memory of its own: through a pointer, `withLock`'s `inout` needs no dynamic
    /// exclusivity check, which a class's stored `var` gets on every access (the lock already
    /// makes each access exclusive; ~70 instructions each, six times per path change).
    private let value: UnsafeMutablePointer<Value>

    package init(_ value: Value) {
        self.value = .allocate(capacity: 1)
        self.value.initialize(to: value)
    }

    deinit {
        value.deinitialize(count: 1)
        value.deallocate()
    }

    /// Runs `body` on the value while holding the lock; what `body` throws is thrown as it is.
    package func withLock<Result, Failure: Error>(
        _ body: (inout Value) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value.pointee)
    }
}
