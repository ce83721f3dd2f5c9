import Foundation
import NetReach

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where something is on the network, as Network.framework's `NWEndpoint`. Paths use it for
/// ``NWPath/gateways``: each gateway is a `hostPort` with port 0.
///
/// Apple's `opaque(nw_endpoint_t)` case has no counterpart: it carries a C object of Apple's.
///
/// ```swift
/// for gateway in monitor.currentPath.gateways {
///     if case .hostPort(let host, _) = gateway { print(host) }   // 192.0.2.1
/// }
/// ```
public enum NWEndpoint: Sendable, Hashable, CustomDebugStringConvertible {
    /// A host and a port.
    case hostPort(host: NWEndpoint.Host, port: NWEndpoint.Port)
    /// A Bonjour service.
    case service(name: String, type: String, domain: String, interface: NWInterface?)
    /// A Unix domain socket.
    case unix(path: String)
    /// A URL.
    case url(URL)

    /// A host: a name or an address of either family.
    public enum Host: Sendable, Hashable, CustomDebugStringConvertible, ExpressibleByStringLiteral {
        /// A name, optionally scoped to an interface.
        case name(String, NWInterface?)
        /// An IPv4 address.
        case ipv4(IPv4Address)
        /// An IPv6 address.
        case ipv6(IPv6Address)

        /// An IPv4 literal is `.ipv4`, an IPv6 one `.ipv6` (an IPv4-mapped one `.ipv4`), anything
        /// else `.name`; a `%interface` suffix scopes it.
        public init(_ string: String) {
            if let address = IPv4Address(string) {
                self = .ipv4(address)
            } else if let address = IPv6Address(string) {
                self = address.isIPv4Mapped ? .ipv4(address.asIPv4!) : .ipv6(address)
            } else {
                let parts = string.split(separator: "%", maxSplits: 1, omittingEmptySubsequences: false)
                let scope = parts.count == 2 ? ScopedAddress.systemInterface(named: String(parts[1])) : nil
                self = .name(scope == nil ? string : String(parts[0]), scope)
            }
        }

        public init(stringLiteral value: String) { self.init(value) }

        /// The interface the host is scoped to, if any.
        public var interface: NWInterface? {
            switch self {
            case .name(_, let interface): interface
            case .ipv4(let address): address.interface
            case .ipv6(let address): address.interface
            }
        }

        /// The name or the address text, with `%interface` when scoped.
        public var debugDescription: String {
            switch self {
            case .name(let name, let interface): interface.map { "\(name)%\($0.name)" } ?? name
            case .ipv4(let address): address.debugDescription
            case .ipv6(let address): address.debugDescription
            }
        }
    }

    /// A port number.
    public struct Port: Sendable, Hashable, CustomDebugStringConvertible, ExpressibleByIntegerLiteral, RawRepresentable
    {
        /// The number.
        public let rawValue: UInt16

        /// Any number is a port; the initializer is failable only to match Apple's.
        public init?(rawValue: UInt16) { self.rawValue = rawValue }

        public init(integerLiteral value: UInt16) { rawValue = value }

        /// A number from 0 to 65535, or a service name from the system's services database
        /// (`http`, `ssh`, ...); `nil` otherwise.
        public init?(_ service: String) {
            if let number = UInt16(service) {
                rawValue = number
            } else if !service.isEmpty, let entry = getservbyname(service, "tcp") {
                rawValue = UInt16(bigEndian: UInt16(truncatingIfNeeded: entry.pointee.s_port))
            } else {
                return nil
            }
        }

        public static let any: Port = 0
        public static let ssh: Port = 22
        public static let smtp: Port = 25
        public static let http: Port = 80
        public static let pop: Port = 110
        public static let imap: Port = 143
        public static let https: Port = 443
        public static let imaps: Port = 993
        public static let socks: Port = 1080

        /// The number in decimal.
        public var debugDescription: String { String(rawValue) }
    }

    /// The interface a host or service is scoped to, if any.
    public var interface: NWInterface? {
        switch self {
        case .hostPort(let host, _): host.interface
        case .service(_, _, _, let interface): interface
        case .unix, .url: nil
        }
    }

    /// `192.0.2.1:0`, `2001:db8::1.0` (Apple separates an IPv6 host's port with a dot),
    /// `name.type.domain`, a socket's path or the URL.
    public var debugDescription: String {
        switch self {
        case .hostPort(let host, let port):
            if case .ipv6 = host { return "\(host.debugDescription).\(port.debugDescription)" }
            return "\(host.debugDescription):\(port.debugDescription)"
        case .service(let name, let type, let domain, let interface):
            return "\(name).\(type)\(domain)" + (interface.map { "%\($0.name)" } ?? "")
        case .unix(let path):
            return path
        case .url(let url):
            return url.absoluteString
        }
    }

    /// A gateway as Network.framework reports one: the address, port 0.
    init(gateway: NetReach.IPAddress) {
        let data = Data(gateway.bytes)
        let host: Host = gateway.family == .ipv4 ? .ipv4(IPv4Address(data)!) : .ipv6(IPv6Address(data)!)
        self = .hostPort(host: host, port: .any)
    }
}
