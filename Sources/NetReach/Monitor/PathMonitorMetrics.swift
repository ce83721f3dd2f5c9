import CoreMetrics

/// What a ``PathMonitor`` counts: `netreach_path_updates_total{status}`, one per path delivered.
/// The counters are made once, with the monitor, so a delivery costs one increment.
struct PathMonitorMetrics: Sendable {
    static let updatesLabel = "netreach_path_updates_total"

    private let satisfied: Counter
    private let unsatisfied: Counter
    private let requiresConnection: Counter

    init(factory: any MetricsFactory) {
        func updates(_ status: PathStatus) -> Counter {
            Counter(label: Self.updatesLabel, dimensions: [("status", status.rawValue)], factory: factory)
        }
        satisfied = updates(.satisfied)
        unsatisfied = updates(.unsatisfied)
        requiresConnection = updates(.requiresConnection)
    }

    /// A path left the monitor for its handler and streams.
    func delivered(_ status: PathStatus) {
        switch status {
        case .satisfied: satisfied.increment()
        case .unsatisfied: unsatisfied.increment()
        case .requiresConnection: requiresConnection.increment()
        }
    }
}
