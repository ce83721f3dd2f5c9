#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// An IPv4 or IPv6 address, as found in routes, addresses and resolv.conf.
///
/// ```swift
/// let gateway = IPAddress("192.0.2.1")!
/// print(gateway.family, gateway)   // ipv4 192.0.2.1
/// ```
public struct IPAddress: Sendable, Hashable, Codable, CustomStringConvertible, LosslessStringConvertible {
    /// The address family.
    public enum Family: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
        case ipv4, ipv6
        public var description: String { rawValue }
        /// Number of bytes in an address of this family.
        public var byteCount: Int { self == .ipv4 ? 4 : 16 }
    }

    /// The address family.
    public let family: Family
    /// The address in network byte order: 4 bytes for IPv4, 16 for IPv6.
    public let bytes: [UInt8]

    /// Creates an address from raw network-order bytes; `nil` unless there are exactly 4 or 16.
    public init?(bytes: [UInt8]) {
        switch bytes.count {
        case 4: family = .ipv4
        case 16: family = .ipv6
        default: return nil
        }
        self.bytes = bytes
    }

    /// Parses the textual form (`192.0.2.1`, `2001:db8::1`); an IPv6 zone (`fe80::1%eth0`) is
    /// accepted and dropped. Returns `nil` for anything else.
    public init?(_ description: String) {
        var text = Substring(description)
        if let percent = text.firstIndex(of: "%") { text = text[..<percent] }
        // inet_pton stops at a NUL, so "192.0.2.1\0garbage" would otherwise parse.
        guard !text.isEmpty, text.utf8.count < 64, !text.utf8.contains(0) else { return nil }
        // Bytes, not `contains(":")`: with Foundation in the module that is Foundation's
        // `range(of:)`, whose first call bridges to NSString (0.1 ms of `get`'s start-up).
        let isV6 = text.utf8.contains(UInt8(ascii: ":"))
        var buffer = [UInt8](repeating: 0, count: 16)
        let ok = String(text).withCString { cString in
            buffer.withUnsafeMutableBytes { inet_pton(isV6 ? AF_INET6 : AF_INET, cString, $0.baseAddress) }
        }
        guard ok == 1 else { return nil }
        self.init(bytes: Array(buffer.prefix(isV6 ? 16 : 4)))
    }

    /// Whether the first `length` bits equal those of `prefix` (network order; missing bytes count
    /// as zero, as a route's prefix may be sent short).
    func isIn(prefix: [UInt8], length: Int) -> Bool {
        var remaining = length
        for (index, byte) in bytes.enumerated() {
            guard remaining > 0 else { return true }
            let other = index < prefix.count ? prefix[index] : 0
            let mask: UInt8 = remaining >= 8 ? 0xff : ~(0xff >> UInt8(remaining))
            guard byte & mask == other & mask else { return false }
            remaining -= 8
        }
        return true
    }

    /// Whether this is a loopback address (127.0.0.0/8 or ::1).
    public var isLoopback: Bool {
        family == .ipv4 ? bytes[0] == 127 : bytes == [UInt8](repeating: 0, count: 15) + [1]
    }

    /// Whether this is an IPv6 link-local address (fe80::/10) or IPv4 169.254.0.0/16.
    public var isLinkLocal: Bool {
        family == .ipv4 ? (bytes[0] == 169 && bytes[1] == 254) : (bytes[0] == 0xfe && bytes[1] & 0xc0 == 0x80)
    }

    public var description: String {
        var out = [CChar](repeating: 0, count: 64)
        let domain = family == .ipv4 ? AF_INET : AF_INET6
        let result = bytes.withUnsafeBytes { raw in
            inet_ntop(domain, raw.baseAddress, &out, socklen_t(out.count))
        }
        guard result != nil else { return bytes.map(String.init).joined(separator: ".") }
        return String(decoding: out.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let address = IPAddress(text) else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "not an IP address: \(text)"))
        }
        self = address
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}
