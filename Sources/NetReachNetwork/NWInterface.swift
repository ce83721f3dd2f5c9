import NetReach

/// A network interface a path can use, as Network.framework's `NWInterface`: its name, the
/// kernel's index for it, and what kind of link it is.
///
/// Equal when name and index are equal (the type is not compared), as on Apple platforms.
///
/// ```swift
/// for interface in monitor.currentPath.availableInterfaces {
///     print(interface.name, interface.index, interface.type == .wifi)
/// }
/// ```
public struct NWInterface: Sendable, Hashable, CustomDebugStringConvertible {
    /// The kind of link an interface is, with Network.framework's cases.
    ///
    /// On Linux: `loopback` is `IFF_LOOPBACK`; `wifi` is a wireless device (sysfs `wireless` or
    /// `phy80211`, `DEVTYPE=wlan`); `cellular` a WWAN device; `wiredEthernet` any other Ethernet-framed
    /// link, veth included; `other` tun, WireGuard, PPP and the rest.
    ///
    /// Like Apple's, this enum is not `CaseIterable` and not `CustomStringConvertible`, so code that
    /// adds those conformances itself (a common pattern) compiles here unchanged.
    public enum InterfaceType: Sendable, Hashable {
        /// A virtual or otherwise unclassified link (tun, WireGuard, PPP, ...).
        case other
        /// A Wi-Fi link.
        case wifi
        /// A cellular (WWAN) link.
        case cellular
        /// A wired Ethernet link, including veth pairs.
        case wiredEthernet
        /// The loopback interface.
        case loopback
    }

    /// The interface's name, such as `eth0` or `wlan0`.
    public let name: String
    /// The kernel's index for the interface.
    public let index: Int
    /// The kind of link.
    public let type: InterfaceType

    /// Makes an interface, for tests and simulated paths (Apple's has no public initializer).
    ///
    /// ```swift
    /// let wifi = NWInterface(name: "wlan0", index: 3, type: .wifi)
    /// ```
    public init(name: String, index: Int, type: InterfaceType) {
        self.name = name
        self.index = index
        self.type = type
    }

    /// The interface NetReach reported.
    public init(_ interface: NetworkInterface) {
        self.init(name: interface.name, index: interface.index, type: InterfaceType(interface.type))
    }

    /// The name, as on Apple platforms.
    public var debugDescription: String { name }

    public static func == (lhs: NWInterface, rhs: NWInterface) -> Bool {
        lhs.index == rhs.index && lhs.name == rhs.name
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(index)
        hasher.combine(name)
    }
}

extension NWInterface.InterfaceType {
    /// The Network.framework spelling of NetReach's interface type.
    public init(_ type: NetReach.InterfaceType) {
        switch type {
        case .other: self = .other
        case .wifi: self = .wifi
        case .cellular: self = .cellular
        case .wiredEthernet: self = .wiredEthernet
        case .loopback: self = .loopback
        }
    }

    /// NetReach's spelling of this type.
    public var netReachType: NetReach.InterfaceType {
        switch self {
        case .other: .other
        case .wifi: .wifi
        case .cellular: .cellular
        case .wiredEthernet: .wiredEthernet
        case .loopback: .loopback
        }
    }
}
