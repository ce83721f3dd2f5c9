import HTTPTypes

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Decides whether to repeat a failed attempt, and when: attempt and failure in, decision out.
///
/// Whatever a policy says, ``NetworkService`` never repeats a request that is not safe to repeat:
/// see ``RetryAttempt/isSafeToRepeat``. A bank transfer is not sent twice because a custom policy
/// was generous.
///
/// ```swift
/// struct RetryOnce: RetryPolicy {
///     func decision(for attempt: RetryAttempt) -> RetryDecision {
///         attempt.number == 1 ? .retry(after: .seconds(1)) : .giveUp("tried twice")
///     }
/// }
/// ```
public protocol RetryPolicy: Sendable {
    /// What to do after `attempt` failed.
    func decision(for attempt: RetryAttempt) -> RetryDecision
}

/// What to do after a failed attempt.
public enum RetryDecision: Sendable, Hashable {
    /// Try again after the delay.
    case retry(after: Duration)
    /// Stop, for the reason given (for logs).
    case giveUp(String)
}

/// A failed attempt, as a retry policy sees it.
public struct RetryAttempt: Sendable {
    /// How an attempt failed.
    public enum Failure: Sendable, Hashable {
        /// The server answered with a status the policy does not accept; `retryAfter` is its
        /// `Retry-After`, as a delay from when the response arrived.
        case status(Int, retryAfter: Duration?)
        /// No response.
        case transport(TransportError)
    }

    /// The request's method.
    public var method: HTTPRequest.Method
    /// How many attempts have been made, this one included (1 after the first).
    public var number: Int
    /// How this attempt failed.
    public var failure: Failure
    /// Time since the request started, waiting included.
    public var elapsed: Duration
    /// Whether the request carries an `Idempotency-Key`.
    public var hasIdempotencyKey: Bool

    /// Creates an attempt description (for tests of custom policies).
    public init(
        method: HTTPRequest.Method, number: Int, failure: Failure, elapsed: Duration = .zero,
        hasIdempotencyKey: Bool = false
    ) {
        self.method = method
        self.number = number
        self.failure = failure
        self.elapsed = elapsed
        self.hasIdempotencyKey = hasIdempotencyKey
    }

    /// The request cannot have reached the server: no connection was made.
    public var requestWasProvablyNotSent: Bool {
        if case .transport(let error) = failure { return error.requestWasProvablyNotSent }
        return false
    }

    /// Whether repeating cannot do harm: an idempotent method (GET, HEAD, OPTIONS, PUT, DELETE,
    /// TRACE), a request that provably never left, or one with an `Idempotency-Key`.
    /// A POST that got a 503 is *not* safe: the server received it.
    public var isSafeToRepeat: Bool {
        [HTTPRequest.Method.get, .head, .options, .put, .delete, .trace].contains(method)
            || requestWasProvablyNotSent || hasIdempotencyKey
    }
}

/// Capped exponential back-off with full jitter that honours `Retry-After`: Alamofire's defaults
/// (2 retries, base 2, scale 0.5 s) plus what its `RetryPolicy` lacks (429, jitter, Retry-After).
///
/// The delay before retry *n* (1-based) is `scale × base^(n−1)`, capped at ``maximumDelay``, then
/// with full jitter a random duration between zero and that. A `Retry-After` replaces it; one
/// longer than ``maximumDelay`` means giving up rather than waiting that long.
///
/// ```swift
/// var retries = DefaultRetryPolicy()
/// retries.retryLimit = 5
/// retries.deadline = .seconds(30)   // no retry that would end later than this
/// policy.retryPolicy = retries
/// ```
public struct DefaultRetryPolicy: RetryPolicy {
    /// How random jitter spreads the delays of many clients.
    public enum Jitter: Sendable {
        /// Exactly the computed delay (deterministic; for tests).
        case none
        /// A uniformly random delay between zero and the computed one ("full jitter").
        case full
    }

    /// Retries after the first attempt (so `2` means at most 3 attempts).
    public var retryLimit = 2
    /// Growth factor of the back-off.
    public var exponentialBase = 2.0
    /// Delay before the first retry, before jitter.
    public var exponentialScale: Duration = .milliseconds(500)
    /// Longest delay before any retry, `Retry-After` included.
    public var maximumDelay: Duration = .seconds(30)
    /// No retry is started that would begin later than this after the request started.
    public var deadline: Duration?
    /// Jitter applied to computed delays (not to `Retry-After`).
    public var jitter = Jitter.full
    /// Statuses worth another attempt.
    public var retryableStatusCodes: Set<Int> = [408, 429, 500, 502, 503, 504]
    /// Transport failures worth another attempt: those that can pass. Not a name that does not
    /// exist (``TransportError/Kind/hostNotFound``), a proxy that refused
    /// (``TransportError/Kind/proxyFailure``), a refused certificate or a malformed answer:
    /// repeating them only repeats the failure. curl's `--retry` leaves out refused connections
    /// too unless asked (`--retry-connrefused`); a library keeps them, since a server that is
    /// restarting refuses for a moment (`netreach get` follows curl).
    public var retryableTransportFailures: Set<TransportError.Kind> = [
        .connectionLost, .partialBody, .timedOut, .dnsFailure, .cannotConnect, .connectTimeout,
    ]

    /// The defaults above.
    public init() {}

    /// Retries a retryable status or transport failure that is safe to repeat, while the retry
    /// limit, the maximum delay and the deadline allow: after `Retry-After` when the server sent
    /// one, else after the jittered exponential back-off. Otherwise gives up, saying why.
    ///
    /// ```swift
    /// let attempt = RetryAttempt(method: .get, number: 1, failure: .status(503, retryAfter: .seconds(2)))
    /// DefaultRetryPolicy().decision(for: attempt)   // .retry(after: .seconds(2))
    /// ```
    public func decision(for attempt: RetryAttempt) -> RetryDecision {
        guard attempt.number <= retryLimit else { return .giveUp("retry limit of \(retryLimit) reached") }
        guard attempt.isSafeToRepeat else {
            return .giveUp("\(attempt.method) may have reached the server and has no Idempotency-Key")
        }
        let delay: Duration
        switch attempt.failure {
        case .status(let code, let retryAfter):
            guard retryableStatusCodes.contains(code) else { return .giveUp("status \(code) is not retryable") }
            if let retryAfter {
                guard retryAfter <= maximumDelay else {
                    return .giveUp("Retry-After \(retryAfter) exceeds \(maximumDelay)")
                }
                delay = retryAfter
            } else {
                delay = backoff(beforeRetry: attempt.number)
            }
        case .transport(let error):
            guard retryableTransportFailures.contains(error.kind) else {
                return .giveUp("\(error.kind) is not retryable")
            }
            delay = backoff(beforeRetry: attempt.number)
        }
        if let deadline, attempt.elapsed + delay > deadline {
            return .giveUp("the retry deadline of \(deadline) would pass")
        }
        return .retry(after: delay)
    }

    /// The jittered, capped delay before retry `number`.
    func backoff(beforeRetry number: Int) -> Duration {
        let seconds =
            Double(exponentialScale.components.seconds) + Double(exponentialScale.components.attoseconds) * 1e-18
        let raw = min(seconds * pow(exponentialBase, Double(number - 1)), Self.seconds(maximumDelay))
        let jittered = jitter == .full ? Double.random(in: 0...raw) : raw
        return .milliseconds(Int64((jittered * 1000).rounded()))
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) * 1e-18
    }
}

extension DefaultRetryPolicy.Jitter: Equatable {}
