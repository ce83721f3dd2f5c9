import Foundation

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
    /// Wait for a usable path before starting a request, instead of failing at once.
    public var waitsForConnectivity = false
    /// The longest a request may take in all: waiting, every attempt and back-off.
    public var timeoutIntervalForResource: Duration = .seconds(7 * 24 * 3600)
    /// The longest one attempt may take.
    public var timeoutIntervalForRequest: Duration = .seconds(60)
    /// Whether an expensive path (cellular, or marked expensive) may be used.
    public var allowsExpensiveNetworkAccess = true
    /// Whether a constrained path may be used.
    public var allowsConstrainedNetworkAccess = true
    /// Whether a path whose preferred interface is cellular may be used.
    public var allowsCellularAccess = true
    /// When to repeat a failed attempt (the service adds its own safety rule on top).
    public var retryPolicy: any RetryPolicy = DefaultRetryPolicy()
    /// The statuses that count as success; any other gives ``NetworkError/unsuccessfulStatus(_:body:)``.
    public var acceptableStatusCodes: Range<Int> = 200..<300

    /// The default policy.
    public init() {}

    /// Policy changes for one request; `nil` keeps the service's value.
    public struct Overrides: Sendable {
        public var waitsForConnectivity: Bool?
        public var timeoutIntervalForResource: Duration?
        public var timeoutIntervalForRequest: Duration?
        public var allowsExpensiveNetworkAccess: Bool?
        public var allowsConstrainedNetworkAccess: Bool?
        public var allowsCellularAccess: Bool?
        public var retryPolicy: (any RetryPolicy)?
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
        if let value = overrides.allowsExpensiveNetworkAccess { policy.allowsExpensiveNetworkAccess = value }
        if let value = overrides.allowsConstrainedNetworkAccess { policy.allowsConstrainedNetworkAccess = value }
        if let value = overrides.allowsCellularAccess { policy.allowsCellularAccess = value }
        if let value = overrides.retryPolicy { policy.retryPolicy = value }
        if let value = overrides.acceptableStatusCodes { policy.acceptableStatusCodes = value }
        return policy
    }
}
