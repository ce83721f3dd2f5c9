import Foundation
import HTTPTypes
import Testing

@testable import NetReachHTTP

/// The default retry policy as a table: attempt and failure in, decision out (no jitter).
@Suite("DefaultRetryPolicy decisions")
struct RetryDecisionTests {
    static var policy: DefaultRetryPolicy {
        var policy = DefaultRetryPolicy()
        policy.jitter = .none
        return policy
    }

    struct Row: Sendable, CustomStringConvertible {
        var method: HTTPRequest.Method
        var number: Int
        var failure: RetryAttempt.Failure
        var key = false
        var elapsed: Duration = .zero
        var expected: RetryDecision? // nil: any giveUp
        var description: String { "\(method) #\(number) \(failure) key=\(key)" }
    }

    static let rows: [Row] = [
        // Idempotent methods retry transient failures with growing back-off: 0.5 s, 1 s.
        Row(
            method: .get, number: 1, failure: .transport(.init(.connectionLost, "")),
            expected: .retry(after: .milliseconds(500))),
        Row(method: .get, number: 2, failure: .transport(.init(.timedOut, "")), expected: .retry(after: .seconds(1))),
        Row(method: .get, number: 3, failure: .transport(.init(.timedOut, "")), expected: nil), // limit 2
        Row(
            method: .put, number: 1, failure: .status(503, retryAfter: nil), expected: .retry(after: .milliseconds(500))
        ),
        Row(
            method: .delete, number: 1, failure: .status(429, retryAfter: .seconds(3)),
            expected: .retry(after: .seconds(3))),
        Row(
            method: .get, number: 1, failure: .status(408, retryAfter: nil), expected: .retry(after: .milliseconds(500))
        ),
        Row(
            method: .get, number: 1, failure: .status(504, retryAfter: nil), expected: .retry(after: .milliseconds(500))
        ),
        // Not retryable at all.
        Row(method: .get, number: 1, failure: .status(404, retryAfter: nil), expected: nil),
        Row(method: .get, number: 1, failure: .status(501, retryAfter: nil), expected: nil),
        Row(method: .get, number: 1, failure: .transport(.init(.invalidResponse, "")), expected: nil),
        Row(method: .get, number: 1, failure: .transport(.init(.cancelled, "")), expected: nil),
        // Failures that cannot pass: a name that does not exist, a proxy that refused, a refused
        // certificate, a body that does not decode.
        Row(method: .get, number: 1, failure: .transport(.init(.hostNotFound, "")), expected: nil),
        Row(method: .get, number: 1, failure: .transport(.init(.proxyFailure, "")), expected: nil),
        Row(
            method: .get, number: 1, failure: .transport(TransportError(tlsFailure: .expired, host: "h")), expected: nil
        ),
        Row(method: .get, number: 1, failure: .transport(.init(.badContentEncoding, "")), expected: nil),
        Row(method: .get, number: 1, failure: .status(407, retryAfter: nil), expected: nil),
        // Retry-After beyond the maximum delay: give up rather than wait that long.
        Row(method: .get, number: 1, failure: .status(503, retryAfter: .seconds(120)), expected: nil),
        // POST/PATCH: only when provably unsent, or with an Idempotency-Key.
        Row(method: .post, number: 1, failure: .transport(.init(.connectionLost, "")), expected: nil),
        Row(method: .post, number: 1, failure: .transport(.init(.timedOut, "")), expected: nil),
        Row(method: .post, number: 1, failure: .status(503, retryAfter: nil), expected: nil),
        Row(method: .patch, number: 1, failure: .status(500, retryAfter: nil), expected: nil),
        Row(
            method: .post, number: 1, failure: .transport(.init(.cannotConnect, "")),
            expected: .retry(after: .milliseconds(500))),
        Row(
            method: .post, number: 1, failure: .transport(.init(.dnsFailure, "")),
            expected: .retry(after: .milliseconds(500))),
        Row(
            method: .post, number: 1, failure: .transport(.init(.connectTimeout, "")),
            expected: .retry(after: .milliseconds(500))),
        Row(
            method: .post, number: 1, failure: .transport(.init(.connectionLost, "")), key: true,
            expected: .retry(after: .milliseconds(500))),
        Row(
            method: .patch, number: 1, failure: .status(503, retryAfter: .seconds(2)), key: true,
            expected: .retry(after: .seconds(2))),
        // The overall deadline.
        Row(
            method: .get, number: 1, failure: .transport(.init(.connectionLost, "")), elapsed: .seconds(10),
            expected: nil),
    ]

    @Test(arguments: rows)
    func decides(_ row: Row) {
        var policy = Self.policy
        policy.deadline = .seconds(10)
        let decision = policy.decision(
            for: RetryAttempt(
                method: row.method, number: row.number, failure: row.failure,
                elapsed: row.elapsed, hasIdempotencyKey: row.key))
        if let expected = row.expected {
            #expect(decision == expected)
        } else if case .retry = decision {
            Issue.record("expected to give up, got \(decision)")
        }
    }

    @Test func backOffIsCappedAtTheMaximumDelay() {
        var policy = Self.policy
        policy.retryLimit = 20
        policy.maximumDelay = .seconds(4)
        #expect(policy.backoff(beforeRetry: 10) == .seconds(4))
    }

    @Test func fullJitterStaysBetweenZeroAndTheBackOff() {
        var policy = DefaultRetryPolicy()
        policy.jitter = .full
        let delays = (0..<200).map { _ in policy.backoff(beforeRetry: 2) }
        #expect(delays.allSatisfy { $0 >= .zero && $0 <= .seconds(1) })
        #expect(Set(delays).count > 10, "jitter should spread the delays")
    }
}
