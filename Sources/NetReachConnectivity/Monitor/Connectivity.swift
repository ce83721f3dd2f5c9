import NetReach

/// What a ``ConnectivityMonitor`` concluded: the level overall and per family, each with its
/// evidence, and the path it was judged on.
///
/// ```swift
/// let now = monitor.current
/// print(now.level)                                   // full
/// print(now.ipv6.level, now.ipv6.evidence.first!)    // limited, ipv6 http://… : no answer …
/// ```
public struct Connectivity: Sendable, Hashable, CustomStringConvertible {
    /// One family's level and the probe results it rests on (empty when the path decided alone).
    public struct Family: Sendable, Hashable, CustomStringConvertible {
        /// The level shown for this family (after hysteresis).
        public var level: ConnectivityLevel
        /// The last round's results for this family.
        public var evidence: [ProbeResult]

        /// Makes a family's verdict.
        public init(level: ConnectivityLevel, evidence: [ProbeResult] = []) {
            self.level = level
            self.evidence = evidence
        }

        /// `full (2 of 2 probes passed)`, `local`, …
        public var description: String {
            guard !evidence.isEmpty else { return level.description }
            let passed = evidence.filter { $0.verdict == .passed }.count
            return "\(level) (\(passed) of \(evidence.count) probes passed)"
        }
    }

    /// The better level of the two families (the internet answers if it answers over either),
    /// or `unknown` while a family that could do better is still being judged.
    public var level: ConnectivityLevel
    /// IPv4's level and evidence.
    public var ipv4: Family
    /// IPv6's level and evidence.
    public var ipv6: Family
    /// The path the verdict was made on.
    public var path: NetworkPath
    /// Why no probe was sent although the path is up (an expensive or constrained path, no probe
    /// for any family), if so.
    public var probesSuspended: String?

    /// Makes a verdict; the overall level is the better of the two families'.
    public init(ipv4: Family, ipv6: Family, path: NetworkPath, probesSuspended: String? = nil) {
        self.ipv4 = ipv4
        self.ipv6 = ipv6
        self.path = path
        self.probesSuspended = probesSuspended
        level = ConnectivityLevel.better(ipv4.level, ipv6.level)
    }

    /// Not judged yet.
    public static let unknown = Connectivity(
        ipv4: Family(level: .unknown), ipv6: Family(level: .unknown),
        path: .unsatisfied(.monitorUnavailable))

    /// One family's verdict.
    public subscript(family: IPAddress.Family) -> Family {
        get { family == .ipv4 ? ipv4 : ipv6 }
        set {
            if family == .ipv4 { ipv4 = newValue } else { ipv6 = newValue }
            level = ConnectivityLevel.better(ipv4.level, ipv6.level)
        }
    }

    /// Sets ``level`` from the families judged: the better one, unless a family still being
    /// judged (`unknown`) could be better than what the other shows.
    mutating func settleLevel(judging families: Set<IPAddress.Family>) {
        let judged = IPAddress.Family.allCases.filter(families.contains).map { self[$0].level }
        let best = judged.reduce(ConnectivityLevel.unknown, ConnectivityLevel.better)
        level = best != .full && judged.contains(.unknown) ? .unknown : best
    }

    /// The levels alone: what a change is measured by (evidence differs every round).
    package var levels: [ConnectivityLevel] { [level, ipv4.level, ipv6.level] }

    /// `full (ipv4 full (2 of 2 probes passed), ipv6 local)`.
    public var description: String {
        "\(level) (ipv4 \(ipv4), ipv6 \(ipv6))" + (probesSuspended.map { "; probes suspended: \($0)" } ?? "")
    }
}

extension ConnectivityLevel {
    /// How far it reaches: none < local < limited < portal < full; unknown below all.
    var rank: Int {
        switch self {
        case .unknown: 0
        case .none: 1
        case .local: 2
        case .limited: 3
        case .portal: 4
        case .full: 5
        }
    }

    static func better(_ a: ConnectivityLevel, _ b: ConnectivityLevel) -> ConnectivityLevel {
        b.rank > a.rank ? b : a
    }
}
