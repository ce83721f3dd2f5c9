/// Where a per-destination ``PathMonitor`` looks: one address, or a host name whose addresses are
/// looked up at start and again after each change of the network.
///
/// ```swift
/// let api = PathMonitor(destination: "api.example.com")
/// let database = PathMonitor(destination: "10.20.0.5")     // through the VPN's split tunnel?
/// let local = PathMonitor(destination: .address(IPAddress("127.0.0.1")!))
/// ```
public enum PathDestination: Sendable, Hashable, CustomStringConvertible, ExpressibleByStringLiteral {
    /// An IPv4 or IPv6 address.
    case address(IPAddress)
    /// A host name, resolved with the system resolver (`getaddrinfo`).
    case host(String)

    /// An address when `text` is one (IPv6 may be in brackets: `[2001:db8::1]`), else a host name.
    public init(_ text: String) {
        let unbracketed = text.hasPrefix("[") && text.hasSuffix("]") ? String(text.dropFirst().dropLast()) : text
        if let address = IPAddress(unbracketed) { self = .address(address) } else { self = .host(text) }
    }

    public init(stringLiteral value: String) { self.init(value) }

    public var description: String {
        switch self {
        case .address(let address): address.description
        case .host(let host): host
        }
    }
}
