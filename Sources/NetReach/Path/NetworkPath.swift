/// What the network looks like to a ``PathMonitor``: whether it can be used, through which
/// interfaces, and with which properties. The Linux counterpart of Network.framework's `NWPath`.
///
/// A path is a value: compare two paths with `==`, encode one as JSON, keep it in a log.
///
/// ```swift
/// let path = monitor.currentPath
/// if path.status == .satisfied, !path.isExpensive {
///     startBackgroundUpload()
/// } else if let reason = path.unsatisfiedReason {
///     print("offline: \(reason)")          // offline: no default route
/// }
/// ```
public struct NetworkPath: Sendable, Hashable, Codable, CustomStringConvertible {
    /// Whether the path can be used.
    public var status: PathStatus
    /// Why the path is not satisfied; `nil` when ``status`` is ``PathStatus/satisfied``.
    public var unsatisfiedReason: UnsatisfiedReason?
    /// Interfaces that can carry traffic under the monitor's requirements, the preferred one
    /// (lowest default-route metric) first. Empty unless the path is satisfied.
    public var availableInterfaces: [NetworkInterface]
    /// Whether the path uses an interface that is cellular or configured as expensive.
    public var isExpensive: Bool
    /// Whether the path uses an interface configured as constrained. Linux has no Low Data Mode,
    /// so this is only ever true through ``InterfaceClassification/constrainedInterfaces``.
    public var isConstrained: Bool
    /// Whether some available interface has a usable IPv4 address and an IPv4 default route.
    public var supportsIPv4: Bool
    /// Whether some available interface has a usable global IPv6 address and an IPv6 default route.
    public var supportsIPv6: Bool
    /// Whether the path is satisfied and resolv.conf names at least one nameserver.
    public var supportsDNS: Bool
    /// The gateways of the default routes through available interfaces, preferred first.
    public var gateways: [IPAddress]
    /// Whether the kernel spreads traffic over several next hops (an ECMP route): each flow
    /// takes one of them, so every leg's interface and gateway is listed first in
    /// ``availableInterfaces`` and ``gateways`` (the leg a lookup happened to pick leading), not one
    /// leg as if it were the only one.
    public var isMultipath: Bool

    /// Creates a path. Usually you get paths from a ``PathMonitor``; this initializer is for tests
    /// and simulated networks.
    public init(
        status: PathStatus,
        unsatisfiedReason: UnsatisfiedReason? = nil,
        availableInterfaces: [NetworkInterface] = [],
        isExpensive: Bool = false,
        isConstrained: Bool = false,
        supportsIPv4: Bool = false,
        supportsIPv6: Bool = false,
        supportsDNS: Bool = false,
        gateways: [IPAddress] = [],
        isMultipath: Bool = false
    ) {
        self.status = status
        self.unsatisfiedReason = status == .satisfied ? nil : unsatisfiedReason
        self.availableInterfaces = availableInterfaces
        self.isExpensive = isExpensive
        self.isConstrained = isConstrained
        self.supportsIPv4 = supportsIPv4
        self.supportsIPv6 = supportsIPv6
        self.supportsDNS = supportsDNS
        self.gateways = gateways
        self.isMultipath = status == .satisfied && isMultipath
    }

    /// An unsatisfied path with the given reason and nothing available.
    public static func unsatisfied(_ reason: UnsatisfiedReason) -> NetworkPath {
        NetworkPath(status: .unsatisfied, unsatisfiedReason: reason)
    }

    /// `true` when ``status`` is ``PathStatus/satisfied``.
    public var isConnected: Bool { status == .satisfied }

    /// The preferred interface, if the path is satisfied.
    public var primaryInterface: NetworkInterface? { availableInterfaces.first }

    /// The type of the preferred interface, if the path is satisfied.
    public var primaryInterfaceType: InterfaceType? { availableInterfaces.first?.type }

    /// Whether the path uses an interface of the given type, as `NWPath.usesInterfaceType(_:)`.
    public func usesInterfaceType(_ type: InterfaceType) -> Bool {
        availableInterfaces.contains { $0.type == type }
    }

    private enum CodingKeys: String, CodingKey {
        case status, unsatisfiedReason, availableInterfaces, isExpensive, isConstrained
        case supportsIPv4, supportsIPv6, supportsDNS, gateways, isMultipath
    }

    /// Decodes a path; `isMultipath`, added later, may be missing (then `false`).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            status: try container.decode(PathStatus.self, forKey: .status),
            unsatisfiedReason: try container.decodeIfPresent(UnsatisfiedReason.self, forKey: .unsatisfiedReason),
            availableInterfaces: try container.decode([NetworkInterface].self, forKey: .availableInterfaces),
            isExpensive: try container.decode(Bool.self, forKey: .isExpensive),
            isConstrained: try container.decode(Bool.self, forKey: .isConstrained),
            supportsIPv4: try container.decode(Bool.self, forKey: .supportsIPv4),
            supportsIPv6: try container.decode(Bool.self, forKey: .supportsIPv6),
            supportsDNS: try container.decode(Bool.self, forKey: .supportsDNS),
            gateways: try container.decode([IPAddress].self, forKey: .gateways),
            isMultipath: try container.decodeIfPresent(Bool.self, forKey: .isMultipath) ?? false
        )
    }

    /// Encodes every key, `unsatisfiedReason` as `null` when satisfied, so line-oriented consumers
    /// of JSON always see the same keys.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(status, forKey: .status)
        if let unsatisfiedReason {
            try container.encode(unsatisfiedReason, forKey: .unsatisfiedReason)
        } else {
            try container.encodeNil(forKey: .unsatisfiedReason)
        }
        try container.encode(availableInterfaces, forKey: .availableInterfaces)
        try container.encode(isExpensive, forKey: .isExpensive)
        try container.encode(isConstrained, forKey: .isConstrained)
        try container.encode(supportsIPv4, forKey: .supportsIPv4)
        try container.encode(supportsIPv6, forKey: .supportsIPv6)
        try container.encode(supportsDNS, forKey: .supportsDNS)
        try container.encode(gateways, forKey: .gateways)
        try container.encode(isMultipath, forKey: .isMultipath)
    }

    /// One line a person can read, such as
    /// `satisfied via eth0(wiredEthernet) ipv4 ipv6 dns gateways 192.0.2.1` or
    /// `unsatisfied (no default route)`.
    public var description: String {
        guard status == .satisfied else {
            return "\(status) (\(unsatisfiedReason?.description ?? "unknown"))"
        }
        var parts = ["satisfied via", availableInterfaces.map(\.description).joined(separator: ",")]
        if supportsIPv4 { parts.append("ipv4") }
        if supportsIPv6 { parts.append("ipv6") }
        if supportsDNS { parts.append("dns") }
        if isExpensive { parts.append("expensive") }
        if isConstrained { parts.append("constrained") }
        if !gateways.isEmpty { parts.append("gateways " + gateways.map(\.description).joined(separator: ",")) }
        if isMultipath { parts.append("multipath") }
        return parts.joined(separator: " ")
    }
}
