import NetReach

/// What the network looks like to an ``NWPathMonitor``, as Network.framework's `NWPath`: whether
/// it can be used, over which interfaces, and with which properties.
///
/// Unlike Apple's, a path can be built in tests, so code that takes an `NWPath` is tested without
/// a protocol wrapped around it:
///
/// ```swift
/// let wifi = NWInterface(name: "wlan0", index: 3, type: .wifi)
/// let path = NWPath(status: .satisfied, availableInterfaces: [wifi], supportsIPv4: true, supportsDNS: true)
/// #expect(path.usesInterfaceType(.wifi))
/// ```
public struct NWPath: Sendable, Equatable, CustomDebugStringConvertible {
    /// Whether a path can be used.
    public enum Status: Sendable, Hashable {
        /// The path can send and receive data.
        case satisfied
        /// The path cannot be used.
        case unsatisfied
        /// Not available now, but establishing a connection could make it so. Linux has no
        /// on-demand connections: paths from the kernel never have this status.
        case requiresConnection
    }

    /// How good the link under the path is, as Network.framework's `NWPath.LinkQuality` (macOS and
    /// iOS 26): for tuning the first settings of algorithms that scale with the network, never
    /// for deciding whether to try a connection.
    ///
    /// Linux keeps no per-link quality estimate (Apple's comes from its Wi-Fi and cellular
    /// drivers), so paths from the kernel always say ``unknown``, Apple's value for "no
    /// measurement available"; a test can build a path with any value.
    public enum LinkQuality: Sendable, Hashable {
        /// No link quality measurement is available (always, on Linux).
        case unknown
        /// Link quality is minimal.
        case minimal
        /// Link quality is moderate.
        case moderate
        /// Link quality is good.
        case good
    }

    /// Why a path is unsatisfied, with Network.framework's cases.
    ///
    /// Linux has no per-app Wi-Fi, cellular or local-network permissions and no on-demand VPN, so
    /// paths from the kernel only ever say ``notAvailable``; the Linux reason (no default route, a
    /// kill switch's route, link down, ...) is in ``NWPath/linuxUnsatisfiedReason``.
    public enum UnsatisfiedReason: Sendable, Hashable {
        /// No reason given (on Linux: see ``NWPath/linuxUnsatisfiedReason``).
        case notAvailable
        /// The user denied cellular access (never on Linux).
        case cellularDenied
        /// The user denied Wi-Fi access (never on Linux).
        case wifiDenied
        /// The user denied local network access (never on Linux).
        case localNetworkDenied
        /// A required VPN is not active (never on Linux).
        case vpnInactive
    }

    /// Whether the path can be used.
    public let status: Status
    /// Why the path is unsatisfied: ``UnsatisfiedReason/notAvailable`` when there is no reason to
    /// give, as for a satisfied path.
    public let unsatisfiedReason: UnsatisfiedReason
    /// NetReach's reason on Linux, such as `noDefaultRoute` or `routeRefused`; `nil` when satisfied.
    public let linuxUnsatisfiedReason: NetReach.UnsatisfiedReason?
    /// The interfaces the path can use, in order of preference: the kernel's choice first.
    public let availableInterfaces: [NWInterface]
    /// Whether the path uses a cellular interface, or one configured as expensive.
    public let isExpensive: Bool
    /// Whether the path uses an interface configured as constrained (Linux has no Low Data Mode).
    public let isConstrained: Bool
    /// Whether the path uses an interface the user marked as ultra-constrained (macOS and iOS 26).
    /// Linux has no such preference: always `false`.
    public var isUltraConstrained: Bool { false }
    /// The quality of the link the path uses (macOS and iOS 26): ``LinkQuality/unknown`` on
    /// Linux, which keeps no estimate.
    public let linkQuality: LinkQuality
    /// Whether IPv4 traffic can be routed.
    public let supportsIPv4: Bool
    /// Whether IPv6 traffic can be routed.
    public let supportsIPv6: Bool
    /// Whether a DNS server is configured.
    public let supportsDNS: Bool
    /// The gateways of the available interfaces' default routes, each `hostPort` with port 0.
    public let gateways: [NWEndpoint]
    /// Always `nil` for a monitor's path (set on Apple platforms for a connection's path).
    public let localEndpoint: NWEndpoint? = nil
    /// Always `nil` for a monitor's path (set on Apple platforms for a connection's path).
    public let remoteEndpoint: NWEndpoint? = nil

    /// Makes a path, for tests and simulated networks (Apple's has no public initializer).
    public init(
        status: Status,
        unsatisfiedReason: UnsatisfiedReason = .notAvailable,
        availableInterfaces: [NWInterface] = [],
        isExpensive: Bool = false,
        isConstrained: Bool = false,
        supportsIPv4: Bool = false,
        supportsIPv6: Bool = false,
        supportsDNS: Bool = false,
        gateways: [NWEndpoint] = [],
        linkQuality: LinkQuality = .unknown
    ) {
        self.init(
            status: status, unsatisfiedReason: unsatisfiedReason, linuxUnsatisfiedReason: nil,
            availableInterfaces: availableInterfaces, isExpensive: isExpensive, isConstrained: isConstrained,
            supportsIPv4: supportsIPv4, supportsIPv6: supportsIPv6, supportsDNS: supportsDNS, gateways: gateways,
            linkQuality: linkQuality)
    }

    /// The path NetReach evaluated, in Network.framework's terms.
    public init(_ path: NetworkPath) {
        let status: Status =
            switch path.status {
            case .satisfied: .satisfied
            case .unsatisfied: .unsatisfied
            case .requiresConnection: .requiresConnection
            }
        self.init(
            status: status, unsatisfiedReason: .notAvailable,
            linuxUnsatisfiedReason: path.status == .satisfied ? nil : path.unsatisfiedReason,
            availableInterfaces: path.availableInterfaces.map(NWInterface.init),
            isExpensive: path.isExpensive, isConstrained: path.isConstrained,
            supportsIPv4: path.supportsIPv4, supportsIPv6: path.supportsIPv6, supportsDNS: path.supportsDNS,
            gateways: path.gateways.map(NWEndpoint.init(gateway:)), linkQuality: .unknown)
    }

    private init(
        status: Status, unsatisfiedReason: UnsatisfiedReason, linuxUnsatisfiedReason: NetReach.UnsatisfiedReason?,
        availableInterfaces: [NWInterface], isExpensive: Bool, isConstrained: Bool,
        supportsIPv4: Bool, supportsIPv6: Bool, supportsDNS: Bool, gateways: [NWEndpoint], linkQuality: LinkQuality
    ) {
        self.status = status
        self.unsatisfiedReason = unsatisfiedReason
        self.linuxUnsatisfiedReason = linuxUnsatisfiedReason
        self.availableInterfaces = availableInterfaces
        self.isExpensive = isExpensive
        self.isConstrained = isConstrained
        self.supportsIPv4 = supportsIPv4
        self.supportsIPv6 = supportsIPv6
        self.supportsDNS = supportsDNS
        self.gateways = gateways
        self.linkQuality = linkQuality
    }

    /// Whether traffic on this path goes over an interface of `type`, as on Apple platforms: the
    /// interface the kernel chose (the first available one), not a standby one. When that
    /// interface is a tunnel (`other`: WireGuard, OpenVPN's tun), the path also uses the link
    /// the tunnel's packets travel on, taken to be the next available interface that is not
    /// `other` — as a VPN over Wi-Fi answers true for both `.other` and `.wifi` on Apple platforms.
    ///
    /// NetReach's own `NetworkPath.usesInterfaceType(_:)` answers for every available interface.
    public func usesInterfaceType(_ type: NWInterface.InterfaceType) -> Bool {
        guard status == .satisfied, let used = availableInterfaces.first else { return false }
        if used.type == type { return true }
        guard used.type == .other else { return false }
        return availableInterfaces.dropFirst().first { $0.type != .other }?.type == type
    }

    /// One line: `satisfied (interface: wlan0, gateways: 192.0.2.1:0, ipv4, dns)` or
    /// `unsatisfied (no default route)`.
    public var debugDescription: String {
        var details: [String] = []
        switch status {
        case .satisfied:
            if !availableInterfaces.isEmpty {
                details.append("interface: " + availableInterfaces.map(\.name).joined(separator: ", "))
            }
            if !gateways.isEmpty {
                details.append("gateways: " + gateways.map(\.debugDescription).joined(separator: ", "))
            }
            if supportsIPv4 { details.append("ipv4") }
            if supportsIPv6 { details.append("ipv6") }
            if supportsDNS { details.append("dns") }
            if isExpensive { details.append("expensive") }
            if isConstrained { details.append("constrained") }
        case .unsatisfied, .requiresConnection:
            details.append(linuxUnsatisfiedReason.map { "\($0)" } ?? "\(unsatisfiedReason)")
        }
        return "\(status) (\(details.joined(separator: ", ")))"
    }
}
