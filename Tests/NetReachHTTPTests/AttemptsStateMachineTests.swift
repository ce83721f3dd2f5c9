import Foundation
import HTTPTypes
import OpenAPIRuntime
import Testing

@testable import NetReachHTTP

/// A request's attempts as a value: the safety rule, the retry budget, the deadline and redirects,
/// without a transport or a clock.
@Suite("The attempts state machine")
struct AttemptsStateMachineTests {
    static let start = ContinuousClock.now
    static let url = URL(string: "https://api.test/transfers")!

    static func machine(
        _ method: HTTPRequest.Method = .get, body: ReplayTracker? = nil, idempotencyKey: Bool = false,
        resource: Duration = .seconds(60)
    ) -> AttemptsStateMachine {
        var retries = DefaultRetryPolicy()
        retries.jitter = .none
        var policy = RequestPolicy()
        policy.retryPolicy = retries
        policy.timeoutIntervalForResource = resource
        let head = HTTPRequest(method: method, scheme: "https", authority: "api.test", path: "/transfers")
        return AttemptsStateMachine(
            url: url, head: head, body: body, policy: policy, hasIdempotencyKey: idempotencyKey, start: start)
    }

    static let reset = RetryAttempt.Failure.transport(TransportError(.connectionLost, "connection reset by peer"))
    static let refused = RetryAttempt.Failure.transport(TransportError(.cannotConnect, "connection refused"))

    @Test func aGetIsRetriedWithinTheBudgetThenGivenUp() {
        var attempts = Self.machine()
        var decisions: [AttemptsStateMachine.Next] = []
        for _ in 0..<3 {
            _ = attempts.beginAttempt()
            attempts.didSend()
            decisions.append(attempts.next(after: Self.reset, now: Self.start))
        }
        #expect(decisions == [.retry(after: .milliseconds(500)), .retry(after: .seconds(1)), .giveUp])
        #expect(attempts.attempt == 3)
        #expect(attempts.sent == 3)
    }

    /// The bank transfer: a POST whose connection broke after it was written may have reached the
    /// server, so it never goes out twice, whatever the policy says; one that never connected, or
    /// that carries an Idempotency-Key, may.
    @Test func aPostThatMayHaveArrivedIsNeverRepeated() {
        var post = Self.machine(.post)
        _ = post.beginAttempt()
        post.didSend()
        #expect(post.next(after: Self.reset, now: Self.start) == .giveUp)
        #expect(post.next(after: .status(503, retryAfter: nil), now: Self.start) == .giveUp)
        #expect(post.next(after: Self.refused, now: Self.start) == .retry(after: .milliseconds(500)))
        var keyed = Self.machine(.post, idempotencyKey: true)
        _ = keyed.beginAttempt()
        #expect(keyed.next(after: Self.reset, now: Self.start) == .retry(after: .milliseconds(500)))
    }

    /// A single-pass body that was read cannot be sent again, whatever the method.
    @Test func aSinglePassBodyThatWasReadIsNotReplayed() async throws {
        let stream = AsyncStream<ArraySlice<UInt8>> { continuation in
            continuation.yield(ArraySlice("x".utf8))
            continuation.finish()
        }
        let body = ReplayTracker(HTTPBody(stream, length: .known(1), iterationBehavior: .single))
        var attempts = Self.machine(.put, body: body)
        _ = attempts.beginAttempt()
        #expect(attempts.next(after: Self.reset, now: Self.start) == .retry(after: .milliseconds(500)))
        for try await _ in body.body() {}
        #expect(attempts.next(after: Self.reset, now: Self.start) == .giveUp)
        #expect(!attempts.interceptorMayRetry(after: .status(401, retryAfter: nil), now: Self.start))
    }

    /// No retry is slept towards past the resource deadline.
    @Test func aRetryThatWouldEndPastTheDeadlineIsNotMade() {
        var attempts = Self.machine(resource: .seconds(2))
        _ = attempts.beginAttempt()
        #expect(
            attempts.next(after: Self.reset, now: Self.start + .milliseconds(1_400))
                == .retry(after: .milliseconds(500)))
        #expect(attempts.next(after: Self.reset, now: Self.start + .milliseconds(1_600)) == .giveUp)
        #expect(attempts.deadline == Self.start + .seconds(2))
    }

    /// A redirect's hop belongs to the attempt it redirected: neither an attempt nor a send; a 303
    /// turns a POST into a GET without its body, which makes it safe to repeat.
    @Test func aRedirectIsAHopNotAnAttempt() throws {
        let body = ReplayTracker(HTTPBody("amount=10"))
        var attempts = Self.machine(.post, body: body)
        #expect(attempts.beginAttempt() == 1)
        attempts.didSend()
        let hop = try #require(
            Redirect.hop(status: 303, location: "https://other.test/receipt", from: Self.url, head: attempts.head))
        let changedOrigin = attempts.follow(hop)
        #expect(changedOrigin)
        #expect(attempts.attempt == 0 && attempts.sent == 0 && attempts.redirects == 1)
        #expect(attempts.method == .get)
        #expect(attempts.body == nil)
        #expect(attempts.url == URL(string: "https://other.test/receipt"))
        #expect(attempts.beginAttempt() == 1)
        attempts.didSend()
        #expect(attempts.next(after: Self.reset, now: Self.start) == .retry(after: .milliseconds(500)))
    }

    /// The interceptor's extra attempt comes once, and only under the safety rule.
    @Test func theInterceptorRetriesOnceAndOnlyWhenSafe() {
        var attempts = Self.machine()
        _ = attempts.beginAttempt()
        let unauthorized = RetryAttempt.Failure.status(401, retryAfter: nil)
        #expect(attempts.interceptorMayRetry(after: unauthorized, now: Self.start))
        attempts.interceptorRetries()
        #expect(!attempts.interceptorMayRetry(after: unauthorized, now: Self.start))
        var post = Self.machine(.post)
        _ = post.beginAttempt()
        #expect(!post.interceptorMayRetry(after: unauthorized, now: Self.start))
    }
}
