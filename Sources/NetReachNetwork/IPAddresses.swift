import Foundation
import NetReach

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An IP address of either family, as Network.framework's `IPAddress` protocol.
///
/// Inside this module, NetReach's own address type is spelled `NetReach.IPAddress`; code that
/// imports both modules and names the type should qualify it the same way.
public protocol IPAddress {
    /// The address in network byte order: 4 bytes for IPv4, 16 for IPv6.
    var rawValue: Data { get }
    /// Makes an address from its bytes, optionally scoped to an interface.
    init?(_ rawValue: Data, _ interface: NWInterface?)
    /// Parses an address, with an optional `%interface` scope.
    init?(_ string: String)
    /// The interface the address is scoped to, if any.
    var interface: NWInterface? { get }
    /// Whether this is a loopback address.
    var isLoopback: Bool { get }
    /// Whether this is a link-local address.
    var isLinkLocal: Bool { get }
    /// Whether this is a multicast address.
    var isMulticast: Bool { get }
}

/// An IPv4 address, as Network.framework's `IPv4Address`.
///
/// ```swift
/// let gateway = IPv4Address("192.0.2.1")!
/// print(gateway, gateway.isLoopback)   // 192.0.2.1 false
/// ```
public struct IPv4Address: IPAddress, Sendable, Hashable, CustomDebugStringConvertible {
    /// The four bytes, in network byte order.
    public let rawValue: Data
    /// The interface the address is scoped to, if any.
    public let interface: NWInterface?

    /// Makes an address from four bytes; `nil` for any other length.
    public init?(_ rawValue: Data, _ interface: NWInterface? = nil) {
        guard rawValue.count == 4 else { return nil }
        self.rawValue = Data(rawValue)
        self.interface = interface
    }

    /// Parses dotted-quad text such as `192.0.2.1`, optionally `%eth0`; `nil` if it is not one, or
    /// the scope names no interface.
    public init?(_ string: String) {
        guard let (address, scope) = ScopedAddress.parse(string, family: .ipv4) else { return nil }
        self.init(Data(address.bytes), scope)
    }

    /// 0.0.0.0.
    public static let any = IPv4Address(Data([0, 0, 0, 0]))!
    /// 255.255.255.255.
    public static let broadcast = IPv4Address(Data([255, 255, 255, 255]))!
    /// 127.0.0.1.
    public static let loopback = IPv4Address(Data([127, 0, 0, 1]))!
    /// 224.0.0.1.
    public static let allHostsGroup = IPv4Address(Data([224, 0, 0, 1]))!
    /// 224.0.0.2.
    public static let allRoutersGroup = IPv4Address(Data([224, 0, 0, 2]))!
    /// 224.0.0.22.
    public static let allReportsGroup = IPv4Address(Data([224, 0, 0, 22]))!
    /// 224.0.0.251.
    public static let mdnsGroup = IPv4Address(Data([224, 0, 0, 251]))!

    /// 127.0.0.0/8.
    public var isLoopback: Bool { rawValue.first == 127 }
    /// 169.254.0.0/16.
    public var isLinkLocal: Bool { rawValue.prefix(2).elementsEqual([169, 254]) }
    /// 224.0.0.0/4.
    public var isMulticast: Bool { (rawValue.first ?? 0) & 0xf0 == 0xe0 }

    /// The dotted-quad text, with `%interface` when scoped.
    public var debugDescription: String { ScopedAddress.text(rawValue, family: .ipv4, interface: interface) }
}

/// An IPv6 address, as Network.framework's `IPv6Address`.
///
/// ```swift
/// let router = IPv6Address("fe80::1%eth0")   // scoped to eth0, if that interface exists
/// ```
public struct IPv6Address: IPAddress, Sendable, Hashable, CustomDebugStringConvertible {
    /// The sixteen bytes, in network byte order.
    public let rawValue: Data
    /// The interface the address is scoped to, if any.
    public let interface: NWInterface?

    /// A multicast address's scope (RFC 4291).
    public enum Scope: UInt8, Sendable {
        case nodeLocal = 1
        case linkLocal = 2
        case siteLocal = 5
        case organizationLocal = 8
        case global = 0x0e
    }

    /// Makes an address from sixteen bytes; `nil` for any other length.
    public init?(_ rawValue: Data, _ interface: NWInterface? = nil) {
        guard rawValue.count == 16 else { return nil }
        self.rawValue = Data(rawValue)
        self.interface = interface
    }

    /// Parses IPv6 text such as `2001:db8::1`, optionally `%eth0`; `nil` if it is not one, or the
    /// scope names no interface.
    public init?(_ string: String) {
        guard let (address, scope) = ScopedAddress.parse(string, family: .ipv6) else { return nil }
        self.init(Data(address.bytes), scope)
    }

    /// `::`.
    public static let any = IPv6Address(Data(repeating: 0, count: 16))!
    /// `::` (IPv6 has no broadcast; Apple's constant is the unspecified address too).
    public static let broadcast = IPv6Address(Data(repeating: 0, count: 16))!
    /// `::1`.
    public static let loopback = IPv6Address(Data(repeating: 0, count: 15) + [1])!
    /// `ff01::1`.
    public static let nodeLocalNodes = IPv6Address(Data([0xff, 0x01] + [UInt8](repeating: 0, count: 13) + [1]))!
    /// `ff02::1`.
    public static let linkLocalNodes = IPv6Address(Data([0xff, 0x02] + [UInt8](repeating: 0, count: 13) + [1]))!
    /// `ff02::2`.
    public static let linkLocalRouters = IPv6Address(Data([0xff, 0x02] + [UInt8](repeating: 0, count: 13) + [2]))!

    private var bytes: [UInt8] { [UInt8](rawValue) }

    /// `::`.
    public var isAny: Bool { bytes.allSatisfy { $0 == 0 } }
    /// `::1`.
    public var isLoopback: Bool { bytes == [UInt8](repeating: 0, count: 15) + [1] }
    /// fe80::/10.
    public var isLinkLocal: Bool { bytes[0] == 0xfe && bytes[1] & 0xc0 == 0x80 }
    /// ff00::/8.
    public var isMulticast: Bool { bytes[0] == 0xff }
    /// `::a.b.c.d` (deprecated IPv4-compatible form); Apple's spelling.
    public var isIPv4Compatabile: Bool { bytes[0..<12].allSatisfy { $0 == 0 } && !isAny && !isLoopback }
    /// `::ffff:a.b.c.d`.
    public var isIPv4Mapped: Bool { bytes[0..<10].allSatisfy { $0 == 0 } && bytes[10] == 0xff && bytes[11] == 0xff }
    /// 2002::/16.
    public var is6to4: Bool { bytes[0] == 0x20 && bytes[1] == 0x02 }
    /// The IPv4 address inside an IPv4-mapped or -compatible address.
    public var asIPv4: IPv4Address? {
        guard isIPv4Mapped || isIPv4Compatabile else { return nil }
        return IPv4Address(Data(bytes[12..<16]), interface)
    }
    /// A multicast address's scope; `nil` for other addresses or an unknown scope.
    public var multicastScope: Scope? { isMulticast ? Scope(rawValue: bytes[1] & 0x0f) : nil }

    /// The text form, with `%interface` when scoped.
    public var debugDescription: String { ScopedAddress.text(rawValue, family: .ipv6, interface: interface) }
}

/// Parsing and printing shared by both address types.
enum ScopedAddress {
    /// Splits `address%scope` and parses both; the scope must name an interface of this system.
    static func parse(_ string: String, family: NetReach.IPAddress.Family) -> (NetReach.IPAddress, NWInterface?)? {
        let parts = string.split(separator: "%", maxSplits: 1, omittingEmptySubsequences: false)
        guard let address = NetReach.IPAddress(String(parts[0])), address.family == family else { return nil }
        guard parts.count == 2 else { return (address, nil) }
        guard let interface = systemInterface(named: String(parts[1])) else { return nil }
        return (address, interface)
    }

    /// The interface of this system with that name (or index), typed `other`: a scope says where,
    /// not what kind of link.
    static func systemInterface(named name: String) -> NWInterface? {
        guard !name.isEmpty else { return nil }
        let index = if_nametoindex(name)
        if index != 0 { return NWInterface(name: name, index: Int(index), type: .other) }
        if let number = UInt32(name), number != 0 {
            var buffer = [CChar](repeating: 0, count: Int(IF_NAMESIZE) + 1)
            if let found = if_indextoname(number, &buffer) {
                return NWInterface(name: String(cString: found), index: Int(number), type: .other)
            }
        }
        return nil
    }

    static func text(_ raw: Data, family: NetReach.IPAddress.Family, interface: NWInterface?) -> String {
        let text = NetReach.IPAddress(bytes: [UInt8](raw))?.description ?? "?"
        return interface.map { "\(text)%\($0.name)" } ?? text
    }
}
