/// The kind of link an interface is, in Network.framework's vocabulary.
///
/// On Linux the type comes from the kernel and sysfs (see ``InterfaceClassification``):
/// - ``loopback``: the interface has `IFF_LOOPBACK`.
/// - ``wifi``: sysfs shows `wireless`/`phy80211`, or `DEVTYPE=wlan`.
/// - ``cellular``: `DEVTYPE=wwan`, or a wwan/qmi/mbim driver.
/// - ``wiredEthernet``: any other Ethernet-framed link (`ARPHRD_ETHER`), veth included:
///   a container's `eth0` is its wire.
/// - ``other``: tun, WireGuard, PPP and everything else.
///
/// ```swift
/// let monitor = PathMonitor(requiredInterfaceType: .wiredEthernet)
/// ```
public enum InterfaceType: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
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

    public var description: String { rawValue }
}
