import Metrics

/// What a ``NetworkService`` counts and times:
/// - `netreach_http_requests_total{outcome}`: finished requests, `success` or the
///   ``NetworkError/Reason`` case they failed with (`timedOut`, `unsuccessfulStatus`, …);
/// - `netreach_http_attempts_total`: attempts handed to the transport (redirect hops not counted);
/// - `netreach_http_retries_total{reason}`: attempts repeated, by what failed (`status`, a
///   ``TransportError/Kind`` such as `connectionLost`, or `interceptor` for its extra attempt);
/// - `netreach_http_connectivity_waits_total`: waits for connectivity begun;
/// - `netreach_http_connectivity_wait_duration_seconds{outcome}`: each wait's length, by how it
///   ended (`connected`, `timedOut`, `cancelled`).
///
/// Every metric is made once, with the service; labels come from closed enums only.
struct NetworkServiceMetrics: Sendable {
    static let requestsLabel = "netreach_http_requests_total"
    static let attemptsLabel = "netreach_http_attempts_total"
    static let retriesLabel = "netreach_http_retries_total"
    static let waitsLabel = "netreach_http_connectivity_waits_total"
    static let waitDurationLabel = "netreach_http_connectivity_wait_duration_seconds"

    /// How a wait for connectivity ended.
    enum WaitOutcome: String, CaseIterable, Sendable {
        case connected, timedOut, cancelled
    }

    /// Every `outcome` but `success`, one per ``NetworkError/Reason`` case.
    static let failureOutcomes = [
        "invalidURL", "unsuccessfulStatus", "invalidResponse", "notConnected", "connectionLost", "timedOut",
        "waitingForConnectivityTimedOut", "bodyTooLarge", "cannotWrite", "cannotRead", "redirectRefused",
        "cancelled", "transport",
    ]

    let attempts: Counter
    let waits: Counter
    private let requests: [String: Counter]
    private let retries: [String: Counter]
    private let waitDurations: [WaitOutcome: CoreMetrics.Timer]

    init(factory: any MetricsFactory) {
        attempts = Counter(label: Self.attemptsLabel, factory: factory)
        waits = Counter(label: Self.waitsLabel, factory: factory)
        var requests: [String: Counter] = [:]
        for outcome in ["success"] + Self.failureOutcomes {
            requests[outcome] = Counter(label: Self.requestsLabel, dimensions: [("outcome", outcome)], factory: factory)
        }
        self.requests = requests
        var retries: [String: Counter] = [:]
        for reason in ["status", "interceptor"] + TransportError.Kind.allCases.map(\.rawValue) {
            retries[reason] = Counter(label: Self.retriesLabel, dimensions: [("reason", reason)], factory: factory)
        }
        self.retries = retries
        var waitDurations: [WaitOutcome: CoreMetrics.Timer] = [:]
        for outcome in WaitOutcome.allCases {
            waitDurations[outcome] = CoreMetrics.Timer(
                label: Self.waitDurationLabel, dimensions: [("outcome", outcome.rawValue)], factory: factory)
        }
        self.waitDurations = waitDurations
    }

    func succeeded() { requests["success"]?.increment() }

    func failed(_ error: NetworkError) { requests[error.reason.metricName]?.increment() }

    /// An attempt is repeated after `failure`.
    func retrying(after failure: RetryAttempt.Failure) {
        switch failure {
        case .status: retries["status"]?.increment()
        case .transport(let error): retries[error.kind.rawValue]?.increment()
        }
    }

    /// The interceptor asked for one more attempt.
    func retryingForInterceptor() { retries["interceptor"]?.increment() }

    func waited(_ duration: Duration, _ outcome: WaitOutcome) {
        waitDurations[outcome]?.record(duration: duration)
    }
}

extension NetworkError.Reason {
    /// The case's name, without its associated values: a metric's label value.
    var metricName: String {
        switch self {
        case .invalidURL: "invalidURL"
        case .unsuccessfulStatus: "unsuccessfulStatus"
        case .invalidResponse: "invalidResponse"
        case .notConnected: "notConnected"
        case .connectionLost: "connectionLost"
        case .timedOut: "timedOut"
        case .waitingForConnectivityTimedOut: "waitingForConnectivityTimedOut"
        case .bodyTooLarge: "bodyTooLarge"
        case .cannotWrite: "cannotWrite"
        case .cannotRead: "cannotRead"
        case .redirectRefused: "redirectRefused"
        case .cancelled: "cancelled"
        case .transport: "transport"
        }
    }
}
