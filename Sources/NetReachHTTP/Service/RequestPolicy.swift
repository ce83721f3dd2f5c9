#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// How a ``NetworkService`` treats requests: waiting, network access, timeouts, retries and which
/// statuses count as success. Set per service; override per request with
/// ``Request/with(_:)``.
///
/// The defaults are URLSession's: no waiting, a 60 s request timeout, a 7-day resource timeout,
/// every kind of network allowed.
///
/// ```swift
/// var policy = RequestPolicy()
/// policy.waitsForConnectivity = true
/// policy.timeoutIntervalForResource = .seconds(300)
/// policy.allowsExpensiveNetworkAccess = false   // wait for, or fail without, a cheap network
/// ```
public struct RequestPolicy: Sendable {
    /// Wait for a usable path before each attempt (URLSession's `waitsForConnectivity`). Off, a request
    /// on an unsatisfied path is attempted anyway and its failure explained with the path, and one
    /// whose path the policy denies (expensive, constrained, cellular) fails with
    /// ``NetworkError/notConnected(_:path:)`` without being sent.
    public var waitsForConnectivity = false
    /// The longest a request may take in all: waiting, every attempt and back-off.
    public var timeoutIntervalForResource: Duration = .seconds(7 * 24 * 3600)
    /// The longest an attempt may go without a byte sent or received, as URLSession's timeout of
    /// the same name: waiting for the response counts, a download that keeps flowing is never cut.
    /// The resource timeout bounds the whole.
    public var timeoutIntervalForRequest: Duration = .seconds(60)
    /// The largest body ``NetworkService/send(_:progress:)`` holds in memory; a longer one fails
    /// with ``NetworkError/bodyTooLarge(limit:)`` (stream it with ``NetworkService/bytes(_:)`` or
    /// ``NetworkService/download(_:to:resume:progress:)`` instead). 64 MiB by default.
    public var maximumBufferedBodySize = 64 << 20
    /// Whether an expensive path (cellular, or marked expensive) may be used.
    public var allowsExpensiveNetworkAccess = true
    /// Whether a constrained path may be used.
    public var allowsConstrainedNetworkAccess = true
    /// Whether a path whose preferred interface is cellular may be used.
    public var allowsCellularAccess = true
    /// When to repeat a failed attempt (the service adds its own safety rule on top).
    public var retryPolicy: any RetryPolicy = DefaultRetryPolicy()
    /// Whether redirects are followed, and how far: by default up to 10 hops, never from https
    /// to http (see ``RedirectPolicy``).
    public var redirects: RedirectPolicy = .follow()
    /// The statuses that count as success; any other gives ``NetworkError/unsuccessfulStatus(_:body:)``.
    public var acceptableStatusCodes: Range<Int> = 200..<300

    /// The default policy.
    public init() {}

    /// Policy changes for one request; `nil` keeps the service's value.
    public struct Overrides: Sendable {
        /// Replaces ``RequestPolicy/waitsForConnectivity``.
        public var waitsForConnectivity: Bool?
        /// Replaces ``RequestPolicy/timeoutIntervalForResource``.
        public var timeoutIntervalForResource: Duration?
        /// Replaces ``RequestPolicy/timeoutIntervalForRequest``.
        public var timeoutIntervalForRequest: Duration?
        /// Replaces ``RequestPolicy/maximumBufferedBodySize``.
        public var maximumBufferedBodySize: Int?
        /// Replaces ``RequestPolicy/allowsExpensiveNetworkAccess``.
        public var allowsExpensiveNetworkAccess: Bool?
        /// Replaces ``RequestPolicy/allowsConstrainedNetworkAccess``.
        public var allowsConstrainedNetworkAccess: Bool?
        /// Replaces ``RequestPolicy/allowsCellularAccess``.
        public var allowsCellularAccess: Bool?
        /// Replaces ``RequestPolicy/retryPolicy``.
        public var retryPolicy: (any RetryPolicy)?
        /// Replaces ``RequestPolicy/redirects``.
        public var redirects: RedirectPolicy?
        /// Replaces ``RequestPolicy/acceptableStatusCodes``.
        public var acceptableStatusCodes: Range<Int>?

        /// No changes.
        public init() {}
    }

    /// This policy with `overrides` applied.
    public func applying(_ overrides: Overrides) -> RequestPolicy {
        var policy = self
        if let value = overrides.waitsForConnectivity { policy.waitsForConnectivity = value }
        if let value = overrides.timeoutIntervalForResource { policy.timeoutIntervalForResource = value }
        if let value = overrides.timeoutIntervalForRequest { policy.timeoutIntervalForRequest = value }
        if let value = overrides.maximumBufferedBodySize { policy.maximumBufferedBodySize = value }
        if let value = overrides.allowsExpensiveNetworkAccess { policy.allowsExpensiveNetworkAccess = value }
        if let value = overrides.allowsConstrainedNetworkAccess { policy.allowsConstrainedNetworkAccess = value }
        if let value = overrides.allowsCellularAccess { policy.allowsCellularAccess = value }
        if let value = overrides.retryPolicy { policy.retryPolicy = value }
        if let value = overrides.redirects { policy.redirects = value }
        if let value = overrides.acceptableStatusCodes { policy.acceptableStatusCodes = value }
        return policy
    }
}
