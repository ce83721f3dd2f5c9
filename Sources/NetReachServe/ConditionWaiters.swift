import NetReachSystem

/// Tasks waiting for a condition on state kept in a `Locked`: whoever changes the state takes the
/// waiters (``takeAll()``) when the condition holds, and resumes them after the lock is released.
package struct ConditionWaiters: Sendable {
    private var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
    private var nextID: UInt64 = 0

    package init() {}

    /// Every waiter, removed.
    package mutating func takeAll() -> [CheckedContinuation<Void, Never>] {
        defer { waiters = [:] }
        return Array(waiters.values)
    }

    /// Returns once `condition` holds for `locked`'s value, or when the task is cancelled.
    package static func wait<Value>(
        in locked: Locked<Value>, _ waiters: WritableKeyPath<Value, ConditionWaiters> & Sendable,
        until condition: @escaping @Sendable (Value) -> Bool
    ) async {
        let id = locked.withLock { value in
            value[keyPath: waiters].nextID &+= 1
            return value[keyPath: waiters].nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                // Checked and registered under the lock: a change or a cancellation after this
                // finds the waiter; one before it is seen here.
                let now = locked.withLock { value -> Bool in
                    if condition(value) || Task.isCancelled { return true }
                    value[keyPath: waiters].waiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            locked.withLock { $0[keyPath: waiters].waiters.removeValue(forKey: id) }?.resume()
        }
    }
}
