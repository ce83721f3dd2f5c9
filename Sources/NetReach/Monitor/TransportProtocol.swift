/// The transport protocol of the traffic a monitor asks about: policy rules can send TCP and UDP
/// apart (`ip rule add ipproto tcp dport 443 table 100`), so the path a web client's connections
/// take need not be the path its DNS queries take.
///
/// ```swift
/// let web = PathMonitor()                                  // TCP to port 443, by default
/// let dns = PathMonitor(port: 53, protocol: .udp)          // what a DNS query gets
/// ```
public enum TransportProtocol: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    /// TCP (`IPPROTO_TCP`).
    case tcp
    /// UDP (`IPPROTO_UDP`).
    case udp

    /// The IP protocol number (`RTA_IP_PROTO`, `ip route get ... ipproto`).
    var number: UInt8 {
        switch self {
        case .tcp: 6
        case .udp: 17
        }
    }

    public var description: String { rawValue }
}
