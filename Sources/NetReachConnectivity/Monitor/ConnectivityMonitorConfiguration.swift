import NetReach

extension ConnectivityMonitor {
    /// What to probe and how: the probes and their quorum, the hysteresis, when to probe again,
    /// and on which paths probing is allowed.
    ///
    /// ```swift
    /// var configuration = ConnectivityMonitor.Configuration(probes: [
    ///     ConnectivityProbe(URL(string: "http://probe-a.example.net/generate_204")!),
    ///     ConnectivityProbe(URL(string: "http://probe-b.example.org/generate_204")!),
    /// ])
    /// configuration.quorum = 1                 // one passing probe is enough
    /// configuration.probeInterval = .seconds(600)
    /// ```
    public struct Configuration: Sendable, Hashable {
        /// The probes of every round (none are built in).
        public var probes: [ConnectivityProbe]
        /// How many probes of a family must pass for `full` (at most the probes that can be sent
        /// over it). 1 by default.
        public var quorum: Int
        /// The families judged; a family left out stays `unknown`. Both by default.
        public var families: Set<IPAddress.Family>
        /// Consecutive rounds that are not full before `full` is left (2).
        public var failedRoundsToLeaveFull: Int
        /// The least time between the first of those rounds and the last (10 s).
        public var dwell: Duration
        /// The longest wait between rounds while not `full`, and the period while `full` when
        /// ``probesWhileFull`` is set (300 s).
        public var probeInterval: Duration
        /// The first wait after a round that is not `full`; it doubles up to ``maximumBackOff`` (1 s).
        public var initialBackOff: Duration
        /// The longest wait between rounds while not `full`: how late a recovery can be noticed
        /// (`nil`, the default: ``probeInterval``, as NetworkManager). `netreach watch` and `serve`
        /// use 30 s, `wait --internet` 1 s.
        ///
        /// ```swift
        /// configuration.maximumBackOff = .seconds(30)   // a return is seen within 30 s
        /// ```
        public var maximumBackOff: Duration?
        /// How long a lost carrier (a path unsatisfied with ``NetReach/UnsatisfiedReason/linkDown``)
        /// must last before the levels act on it (6 s, NetworkManager's `carrier-wait-timeout`).
        /// The path in the verdict changes at once; the levels keep what the last round said, so a
        /// link that flaps for a moment changes them at most once. Zero acts at once.
        public var carrierLossDelay: Duration
        /// Whether to probe every ``probeInterval`` while `full` (no: no traffic while all is well).
        public var probesWhileFull: Bool
        /// How long one probe may take (10 s).
        public var probeTimeout: Duration
        /// Whether to probe over an expensive path (no: probes cost money on metered links).
        public var allowsExpensiveProbes: Bool
        /// Whether to probe over a constrained path (no).
        public var allowsConstrainedProbes: Bool
        /// Whether to ask the RFC 8908 captive-portal API the network announced for the path's
        /// preferred interface (see ``CaptivePortalAPI``) before the probes (yes). The network
        /// announced it: asking it tells nobody else anything.
        public var usesCaptivePortalAPI: Bool
        /// Where the announced API URLs are read: systemd-networkd's link state files (tests
        /// point it elsewhere).
        package var linkStateDirectory: String

        /// A configuration with these probes and the defaults above.
        public init(probes: [ConnectivityProbe]) {
            self.probes = probes
            quorum = 1
            families = [.ipv4, .ipv6]
            failedRoundsToLeaveFull = 2
            dwell = .seconds(10)
            probeInterval = .seconds(300)
            initialBackOff = .seconds(1)
            maximumBackOff = nil
            carrierLossDelay = .seconds(6)
            probesWhileFull = false
            probeTimeout = .seconds(10)
            allowsExpensiveProbes = false
            allowsConstrainedProbes = false
            usesCaptivePortalAPI = true
            linkStateDirectory = CaptivePortalAPI.networkdLinkStateDirectory
        }
    }
}
