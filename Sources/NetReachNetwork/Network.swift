/// Network.framework's module name as a namespace, so module-qualified names in ported code
/// resolve: `Network.NWPath`, `Network.NWPathMonitor`, `extension Network.NWPath.Status`.
///
/// VPN and tunnel code qualifies these names to tell them from NetworkExtension's older `NWPath`
/// class. There is no module named `Network` on Linux (one would make `canImport(Network)` true,
/// and Apple-only code in other packages, such as swift-nio-transport-services, would be compiled),
/// so this enum stands in for it after `import NetReachNetwork`:
///
/// ```swift
/// #if canImport(Network)
/// import Network
/// #else
/// import NetReachNetwork
/// #endif
///
/// func handle(_ status: Network.NWPath.Status) -> Bool { status == .satisfied }
/// ```
///
/// A type of your own named `Network` hides this one, as it hides the module on Apple platforms.
public enum Network {
    public typealias NWPathMonitor = NetReachNetwork.NWPathMonitor
    public typealias NWPath = NetReachNetwork.NWPath
    public typealias NWInterface = NetReachNetwork.NWInterface
    public typealias NWEndpoint = NetReachNetwork.NWEndpoint
    public typealias IPAddress = NetReachNetwork.IPAddress
    public typealias IPv4Address = NetReachNetwork.IPv4Address
    public typealias IPv6Address = NetReachNetwork.IPv6Address
}
