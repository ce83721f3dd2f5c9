import HTTPTypes

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The bookkeeping of one request's attempts: where the next one goes and what it sends (the
/// URL, head, method and body a redirect may have changed), how many attempts were begun and
/// sent, and what a failure leads to under the service's safety rule: another attempt after a
/// delay, or the end.
///
/// A value with no I/O, in the manner of async-http-client's `StateMachine` types:
/// `NetworkService` does what it says (send, follow, sleep, give up) and tests drive it with plain
/// values.
///
/// ```swift
/// var attempts = AttemptsStateMachine(url: url, head: head, body: nil, policy: policy,
///                                     hasIdempotencyKey: false, start: .now)
/// let number = attempts.beginAttempt()   // 1
/// attempts.didSend()
/// switch attempts.next(after: .transport(error), now: .now) {
/// case .retry(let delay): try await Task.sleep(for: delay)
/// case .giveUp: throw explained
/// }
/// ```
struct AttemptsStateMachine {
    /// Where the next attempt (or hop) goes.
    private(set) var url: URL
    /// The head it sends, before the attempt's own changes (a range, the interceptor's).
    private(set) var head: HTTPRequest
    /// Its body; `nil` once a redirect dropped it.
    private(set) var body: ReplayTracker?
    /// Attempts begun; a redirect's hop belongs to the attempt that was redirected.
    private(set) var attempt = 0
    /// Times the request was handed to the transport: what a failure reports as its attempts.
    private(set) var sent = 0
    /// Redirects followed so far (the policy's limit counts these).
    private(set) var redirects = 0
    private var interceptorRetried = false
    private let policy: RequestPolicy
    private let hasIdempotencyKey: Bool
    private let start: ContinuousClock.Instant
    /// The resource deadline: no attempt starts, and no retry is slept towards, past it.
    let deadline: ContinuousClock.Instant

    init(
        url: URL, head: HTTPRequest, body: ReplayTracker?, policy: RequestPolicy, hasIdempotencyKey: Bool,
        start: ContinuousClock.Instant
    ) {
        self.url = url
        self.head = head
        self.body = body
        self.policy = policy
        self.hasIdempotencyKey = hasIdempotencyKey
        self.start = start
        deadline = start + policy.timeoutIntervalForResource
    }

    /// The method the next attempt sends (a 303 turns it into GET).
    var method: HTTPRequest.Method { head.method }

    /// Begins an attempt; returns its number (1 for the first).
    mutating func beginAttempt() -> Int {
        attempt += 1
        return attempt
    }

    /// The attempt's head was handed to the transport.
    mutating func didSend() { sent += 1 }

    /// The response redirected to `hop`: the next hop goes there as part of the same attempt (the
    /// retry budget and the deadline carry over). Returns whether it changed origin.
    mutating func follow(_ hop: Redirect.Hop) -> Bool {
        redirects += 1
        url = hop.url
        head = hop.head
        if !hop.keepsBody { body = nil }
        attempt -= 1
        sent -= 1
        return hop.changesOrigin
    }

    /// What a failed attempt leads to.
    enum Next: Equatable {
        /// Another attempt after this long.
        case retry(after: Duration)
        /// None: the failure is the request's.
        case giveUp
    }

    /// Whether the interceptor may be asked for its one extra attempt after `failure` (a status
    /// it may mend, such as an expired token): never twice, and only under the safety rule.
    func interceptorMayRetry(after failure: RetryAttempt.Failure, now: ContinuousClock.Instant) -> Bool {
        !interceptorRetried && isSafeToRepeat(after: failure, now: now)
    }

    /// The interceptor took its extra attempt.
    mutating func interceptorRetries() { interceptorRetried = true }

    /// After the attempt failed with `failure`, at `now`: another attempt when the safety rule
    /// allows it (the service's, not the policy's: no custom policy can make a POST that may have
    /// reached the server go out twice, and a single-pass body that was read cannot be sent
    /// again), the policy asks for one, and it can start before the deadline; else the end.
    func next(after failure: RetryAttempt.Failure, now: ContinuousClock.Instant) -> Next {
        guard isSafeToRepeat(after: failure, now: now),
            case .retry(let delay) = policy.retryPolicy.decision(for: context(of: failure, now: now)),
            now + delay < deadline
        else { return .giveUp }
        return .retry(after: delay)
    }

    private func isSafeToRepeat(after failure: RetryAttempt.Failure, now: ContinuousClock.Instant) -> Bool {
        context(of: failure, now: now).isSafeToRepeat && body?.canReplay ?? true
    }

    private func context(of failure: RetryAttempt.Failure, now: ContinuousClock.Instant) -> RetryAttempt {
        RetryAttempt(
            method: method, number: attempt, failure: failure, elapsed: now - start,
            hasIdempotencyKey: hasIdempotencyKey)
    }
}
