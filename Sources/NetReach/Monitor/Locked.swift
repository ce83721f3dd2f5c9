import Foundation

/// A value guarded by a pthread mutex (`NSLock`).
///
/// Not `Synchronization.Mutex`: its futex is invisible to ThreadSanitizer, which then reports
/// races that are not there (Docs/DesignNotes.md), and the monitor's thread-safety tests
/// run under TSan in CI.
package final class Locked<Value>: @unchecked Sendable {
    // @unchecked: `value` is only touched inside `withLock`, which holds `lock`.
    private let lock = NSLock()
    private var value: Value

    package init(_ value: Value) { self.value = value }

    package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
