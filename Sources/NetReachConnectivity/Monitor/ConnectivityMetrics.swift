import Metrics
import NetReach

/// What a ``ConnectivityMonitor`` counts and times:
/// - `netreach_connectivity_probe_rounds_total`: rounds of probes whose results were judged;
/// - `netreach_connectivity_probe_duration_seconds{family,verdict}`: each probe of those rounds;
/// - `netreach_connectivity_level_changes_total{family,level}`: each change of a level, by the
///   level reached (`family` is `ipv4`, `ipv6`, or `overall` for the verdict's own level).
///
/// Every metric is made once, with the monitor; labels come from closed enums only.
struct ConnectivityMetrics: Sendable {
    static let roundsLabel = "netreach_connectivity_probe_rounds_total"
    static let durationLabel = "netreach_connectivity_probe_duration_seconds"
    static let levelChangesLabel = "netreach_connectivity_level_changes_total"

    /// Which level a change counts under.
    enum Scope: String, CaseIterable, Sendable {
        case overall, ipv4, ipv6
    }

    let rounds: Counter
    /// Per family, per verdict name.
    private let durations: [IPAddress.Family: [String: CoreMetrics.Timer]]
    /// Per scope, per level name.
    private let levelChanges: [Scope: [String: Counter]]

    init(factory: any MetricsFactory) {
        rounds = Counter(label: Self.roundsLabel, factory: factory)
        var durations: [IPAddress.Family: [String: CoreMetrics.Timer]] = [:]
        for family in IPAddress.Family.allCases {
            for verdict in ProbeVerdict.metricNames {
                durations[family, default: [:]][verdict] = CoreMetrics.Timer(
                    label: Self.durationLabel, dimensions: [("family", "\(family)"), ("verdict", verdict)],
                    factory: factory)
            }
        }
        self.durations = durations
        var levelChanges: [Scope: [String: Counter]] = [:]
        for scope in Scope.allCases {
            for level in ConnectivityLevel.metricNames {
                levelChanges[scope, default: [:]][level] = Counter(
                    label: Self.levelChangesLabel, dimensions: [("family", scope.rawValue), ("level", level)],
                    factory: factory)
            }
        }
        self.levelChanges = levelChanges
    }

    /// Records how long each probe of a judged round took.
    func record(_ results: [ProbeResult]) {
        for result in results {
            durations[result.family]?[result.verdict.metricName]?.record(duration: result.latency)
        }
    }

    /// Counts every level that differs between two verdicts (a new login URL is the same level).
    func countChanges(from old: Connectivity, to new: Connectivity) {
        let pairs: [(Scope, ConnectivityLevel, ConnectivityLevel)] = [
            (.overall, old.level, new.level), (.ipv4, old.ipv4.level, new.ipv4.level),
            (.ipv6, old.ipv6.level, new.ipv6.level),
        ]
        for (scope, before, after) in pairs where before.metricName != after.metricName {
            levelChanges[scope]?[after.metricName]?.increment()
        }
    }
}

extension ProbeVerdict {
    /// Every value of ``metricName``.
    static let metricNames = ["passed", "portal", "intercepted", "failed"]

    /// The verdict without its evidence: a metric's label value.
    var metricName: String {
        switch self {
        case .passed: "passed"
        case .portal: "portal"
        case .intercepted: "intercepted"
        case .failed: "failed"
        }
    }
}

extension ConnectivityLevel {
    /// Every value of ``metricName``.
    static let metricNames = ["unknown", "none", "local", "limited", "portal", "full"]

    /// The level without a portal's login URL: a metric's label value.
    var metricName: String {
        switch self {
        case .unknown: "unknown"
        case .none: "none"
        case .local: "local"
        case .limited: "limited"
        case .portal: "portal"
        case .full: "full"
        }
    }
}
