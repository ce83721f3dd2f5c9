import HTTPTypes
import NetReachSystem
import OpenAPIRuntime

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What a transport's `send` waits for: the response head with its body, or the first failure.
/// Whichever comes first is kept; the waiter is resumed once, whether it came before or after,
/// and always outside the lock.
package final class ResponseHeadPromise: Sendable {
    private struct State {
        var result: Result<(HTTPResponse, HTTPBody), TransportError>?
        var waiter: CheckedContinuation<(HTTPResponse, HTTPBody), any Error>?
    }

    private let state = Locked(State())

    package init() {}

    /// Whether a head (rather than a failure) was kept.
    package var deliveredHead: Bool { state.withLock { (try? $0.result?.get()) != nil } }

    /// Keeps `outcome` if nothing was kept yet, and hands it to the waiter if there is one.
    package func settle(_ outcome: Result<(HTTPResponse, HTTPBody), TransportError>) {
        let waiter = state.withLock { state -> CheckedContinuation<(HTTPResponse, HTTPBody), any Error>? in
            guard state.result == nil else { return nil }
            state.result = outcome
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(with: outcome.mapError { $0 as any Error })
    }

    /// The kept outcome, as soon as there is one (throws the `TransportError`).
    package func value() async throws -> (HTTPResponse, HTTPBody) {
        try await withCheckedThrowingContinuation { continuation in
            let settled = state.withLock { state -> Result<(HTTPResponse, HTTPBody), TransportError>? in
                if state.result == nil { state.waiter = continuation }
                return state.result
            }
            if let settled { continuation.resume(with: settled.mapError { $0 as any Error }) }
        }
    }

    /// What a transport's `send` returns: the kept outcome, as ``value()``, where cancelling the
    /// waiting task calls `fail` with a `.cancelled` error (the transport stops its transfer and
    /// settles this promise), and whatever else is thrown arrives as a `TransportError`.
    ///
    /// ```swift
    /// return try await promise.response(failingWith: { exchange.fail($0) })
    /// ```
    package func response(
        failingWith fail: @escaping @Sendable (TransportError) -> Void
    ) async throws(TransportError) -> (HTTPResponse, HTTPBody) {
        do {
            return try await withTaskCancellationHandler {
                try await value()
            } onCancel: {
                fail(TransportError(.cancelled, "the task was cancelled"))
            }
        } catch {
            throw error as? TransportError ?? TransportError(.other, String(describing: error))
        }
    }
}
