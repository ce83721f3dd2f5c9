import Foundation
import HTTPTypes
import OpenAPIRuntime

/// What a transport's `send` waits for: the response head with its body, or the first failure.
/// Whichever comes first is kept; the waiter is resumed once, whether it came before or after.
///
/// `@unchecked Sendable`: `result` and `waiter` are only touched while `lock` (an `NSLock`, which
/// TSan understands) is held; the continuation is resumed outside it.
package final class ResponseHeadPromise: @unchecked Sendable {
    private let lock = NSLock()
    private var result: Result<(HTTPResponse, HTTPBody), TransportError>?
    private var waiter: CheckedContinuation<(HTTPResponse, HTTPBody), any Error>?

    package init() {}

    /// Whether a head (rather than a failure) was kept.
    package var deliveredHead: Bool { lock.withLock { (try? result?.get()) != nil } }

    /// Keeps `outcome` if nothing was kept yet, and hands it to the waiter if there is one.
    package func settle(_ outcome: Result<(HTTPResponse, HTTPBody), TransportError>) {
        let waiter: CheckedContinuation<(HTTPResponse, HTTPBody), any Error>? = lock.withLock {
            guard result == nil else { return nil }
            result = outcome
            defer { self.waiter = nil }
            return self.waiter
        }
        waiter?.resume(with: outcome.mapError { $0 as any Error })
    }

    /// The kept outcome, as soon as there is one (throws the `TransportError`).
    package func value() async throws -> (HTTPResponse, HTTPBody) {
        try await withCheckedThrowingContinuation { continuation in
            let settled: Result<(HTTPResponse, HTTPBody), TransportError>? = lock.withLock {
                if result == nil { waiter = continuation }
                return result
            }
            if let settled { continuation.resume(with: settled.mapError { $0 as any Error }) }
        }
    }
}
