import NetReach

/// When an "offline" indicator shows and hides: after the network has been gone for a grace
/// period (a blip never flashes it), for at least a minimum time once shown (it never flickers).
///
/// ```swift
/// var policy = OfflineIndicatorPolicy()
/// policy.gracePeriod = .seconds(3)
/// policy.countsLimitedAsOffline = true   // a captive portal or a dead uplink shows it too
/// ```
public struct OfflineIndicatorPolicy: Sendable, Hashable {
    /// How long the network must stay gone before the indicator shows (2 s by default; zero shows
    /// it at once).
    public var gracePeriod: Duration
    /// How long the indicator stays up once shown, even if the network is back sooner (1 s by
    /// default).
    public var minimumDisplayTime: Duration
    /// Whether `.limited` and `.portal` count as offline (they do not by default: some things
    /// still work, and a portal wants its own message).
    public var countsLimitedAsOffline: Bool

    /// A policy; the defaults suit a banner in an app or a status line in a terminal.
    public init(
        gracePeriod: Duration = .seconds(2), minimumDisplayTime: Duration = .seconds(1),
        countsLimitedAsOffline: Bool = false
    ) {
        self.gracePeriod = gracePeriod
        self.minimumDisplayTime = minimumDisplayTime
        self.countsLimitedAsOffline = countsLimitedAsOffline
    }

    /// Whether `path` means offline: any status but `.satisfied`.
    public func isOffline(_ path: NetworkPath) -> Bool { path.status != .satisfied }

    /// Whether `level` means offline; `nil` for `.unknown`, which changes nothing.
    public func isOffline(_ level: ConnectivityLevel) -> Bool? {
        switch level {
        case .unknown: nil
        case .none, .local: true
        case .limited, .portal: countsLimitedAsOffline
        case .full: false
        }
    }
}
