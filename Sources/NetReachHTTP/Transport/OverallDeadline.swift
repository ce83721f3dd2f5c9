import Foundation

/// Runs `operation` and returns its result, or throws ``TransportError/Kind/timedOut`` once
/// `timeout` has passed, or `CancellationError` as soon as the calling task is cancelled.
///
/// Both clients' own timeouts stop at the response head or reset on every byte; the transport
/// contract's timeout runs to the last byte, so it is enforced here. It returns *on time*: the
/// operation is cancelled but not waited for, because a client may take long to notice (URLSession
/// on Linux was measured taking 1.5 s to give up a request under load), and a caller's deadline
/// must not depend on that.
package func withOverallDeadline<T: Sendable>(
    _ timeout: Duration,
    _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    let outcome = FirstOutcome<T>()
    let work = Task {
        do { outcome.settle(.success(try await operation())) } catch { outcome.settle(.failure(error)) }
    }
    let timer = Task {
        guard (try? await Task.sleep(for: timeout)) != nil else { return }
        outcome.settle(.failure(TransportError(.timedOut, "no complete response within \(timeout)")))
    }
    defer {
        work.cancel()
        timer.cancel()
    }
    return try await withTaskCancellationHandler {
        try await outcome.value()
    } onCancel: {
        outcome.settle(.failure(CancellationError()))
    }
}

/// The first of several outcomes to arrive, handed to one waiter.
///
/// `@unchecked Sendable`: `result`, `isSettled` and `waiter` are only touched while `lock` (an
/// `NSLock`, which TSan understands) is held; the continuation is resumed outside it, once.
private final class FirstOutcome<T: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var isSettled = false
    private var result: Result<T, any Error>?
    private var waiter: CheckedContinuation<T, any Error>?

    /// Records `outcome` if it is the first; later ones are ignored.
    func settle(_ outcome: Result<T, any Error>) {
        let waiter: CheckedContinuation<T, any Error>? = lock.withLock {
            guard !isSettled else { return nil }
            isSettled = true
            result = outcome
            defer { self.waiter = nil }
            return self.waiter
        }
        waiter?.resume(with: outcome)
    }

    /// The first outcome, as soon as there is one.
    func value() async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let settled: Result<T, any Error>? = lock.withLock {
                if !isSettled { waiter = continuation }
                return result
            }
            if let settled { continuation.resume(with: settled) }
        }
    }
}
