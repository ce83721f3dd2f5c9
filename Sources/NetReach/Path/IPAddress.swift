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

        /// Hashes the case, not its raw value: a `String` raw value would have every lookup of a
        /// per-family table hash the text (`RawRepresentable`'s default), several times per change.
        public func hash(into hasher: inout Hasher) { hasher.combine(self == .ipv4) }
    }

    /// The address family.
    public let family: Family
    /// The address's 16 bytes in network order, packed big-endian into two words (an IPv4
    /// address in the first 4, the rest zero): kept inline, an address is copied, compared and
    /// hashed with no heap object behind it (a path change handles dozens).
    private let high: UInt64
    private let low: UInt64

    /// The address in network byte order: 4 bytes for IPv4, 16 for IPv6.
    public var bytes: [UInt8] { withUnsafeBytes { Array($0) } }

    /// Creates an address from raw network-order bytes; `nil` unless there are exactly 4 or 16.
    public init?(bytes: [UInt8]) {
        guard let address = bytes.withUnsafeBytes({ IPAddress(networkOrder: $0) }) else { return nil }
        self = address
    }

    /// Creates an address from raw network-order bytes (a netlink attribute, a `sockaddr`'s
    /// address); `nil` unless there are exactly 4 or 16.
    init?(networkOrder raw: UnsafeRawBufferPointer) {
        switch raw.count {
        case 4: family = .ipv4
        case 16: family = .ipv6
        default: return nil
        }
        var words: (UInt64, UInt64) = (0, 0)
        withUnsafeMutableBytes(of: &words) { $0.copyMemory(from: raw) }
        high = UInt64(bigEndian: words.0)
        low = UInt64(bigEndian: words.1)
    }

    /// Calls `body` with the address's bytes in network order (4 or 16).
    func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        let words = (high.bigEndian, low.bigEndian)
        return try Swift.withUnsafeBytes(of: words) {
            try body(UnsafeRawBufferPointer(rebasing: $0[..<family.byteCount]))
        }
    }

    /// The byte at `index`, 0 to 15 (0 is the first in network order); an IPv4 address's
    /// bytes 4 to 15 are 0.
    func byte(at index: Int) -> UInt8 {
        let word = index < 8 ? high : low
        return UInt8(truncatingIfNeeded: word >> (56 - 8 * UInt64(index % 8)))
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
        var buffer: (UInt64, UInt64) = (0, 0)
        let ok = String(text).withCString { cString in
            Swift.withUnsafeMutableBytes(of: &buffer) { inet_pton(isV6 ? AF_INET6 : AF_INET, cString, $0.baseAddress) }
        }
        guard ok == 1 else { return nil }
        let address = Swift.withUnsafeBytes(of: buffer) {
            IPAddress(networkOrder: UnsafeRawBufferPointer(rebasing: $0[..<(isV6 ? 16 : 4)]))
        }
        guard let address else { return nil }
        self = address
    }

    /// Whether the first `length` bits equal those of `prefix` (network order; missing bytes count
    /// as zero, as a route's prefix may be sent short).
    func isIn(prefix: [UInt8], length: Int) -> Bool {
        var remaining = length
        for index in 0..<family.byteCount {
            guard remaining > 0 else { return true }
            let other = index < prefix.count ? prefix[index] : 0
            let mask: UInt8 = remaining >= 8 ? 0xff : ~(0xff >> UInt8(remaining))
            guard byte(at: index) & mask == other & mask else { return false }
            remaining -= 8
        }
        return true
    }

    /// Whether this address comes before `other` byte by byte (an IPv4 address, shorter, before
    /// an IPv6 one it equals in its first four bytes), as `bytes.lexicographicallyPrecedes` says.
    func precedes(_ other: IPAddress) -> Bool {
        if high != other.high { return high < other.high }
        if low != other.low { return low < other.low }
        return family.byteCount < other.family.byteCount
    }

    /// Whether this is a loopback address (127.0.0.0/8 or ::1).
    public var isLoopback: Bool {
        family == .ipv4 ? byte(at: 0) == 127 : high == 0 && low == 1
    }

    /// Whether this is the unspecified address (0.0.0.0 or ::).
    var isUnspecified: Bool { high == 0 && low == 0 }

    /// Whether this is an IPv6 link-local address (fe80::/10) or IPv4 169.254.0.0/16.
    public var isLinkLocal: Bool {
        family == .ipv4
            ? (byte(at: 0) == 169 && byte(at: 1) == 254) : (byte(at: 0) == 0xfe && byte(at: 1) & 0xc0 == 0x80)
    }

    /// The address as `inet_ntop` writes it: dotted decimal, or RFC 5952's IPv6 form (lowercase,
    /// the first longest run of two or more zero groups as `::`, an IPv4-compatible or -mapped
    /// address's last 32 bits dotted).
    public var description: String {
        String(unsafeUninitializedCapacity: Self.maximumTextLength) { writeText(into: $0) }
    }

    /// The longest ``description`` can be: `ffff:ffff:ffff:ffff:ffff:ffff:255.255.255.255`.
    package static let maximumTextLength = 45

    /// Writes ``description``'s bytes at the start of `buffer` (room for ``maximumTextLength``)
    /// and returns how many: written here rather than by `inet_ntop` (its IPv4 form goes through
    /// `sprintf`), for writers that place the text in a buffer of their own (a JSON line's).
    package func writeText(into buffer: UnsafeMutableBufferPointer<UInt8>) -> Int {
        precondition(buffer.count >= Self.maximumTextLength, "room for an address's text")
        var text = TextWriter(buffer: buffer)
        guard family == .ipv6 else {
            text.dotted(byte(at: 0), byte(at: 1), byte(at: 2), byte(at: 3))
            return text.count
        }
        // The first longest run of zero groups, compressed only from two groups on.
        var runStart = -1
        var runLength = 0
        var start = -1
        for group in 0..<8 {
            if self.group(group) == 0 {
                if start < 0 { start = group }
                if group - start + 1 > runLength {
                    runStart = start
                    runLength = group - start + 1
                }
            } else {
                start = -1
            }
        }
        if runLength < 2 { runStart = -1 }
        var group = 0
        while group < 8 {
            if group == runStart {
                text.put(UInt8(ascii: ":"))
                group += runLength
                if group == 8 { text.put(UInt8(ascii: ":")) }
                continue
            }
            if group != 0 { text.put(UInt8(ascii: ":")) }
            // An IPv4-compatible (::a.b.c.d) or -mapped (::ffff:a.b.c.d) address, as inet_ntop.
            if group == 6 && runStart == 0 && (runLength == 6 || (runLength == 5 && self.group(5) == 0xffff)) {
                text.dotted(byte(at: 12), byte(at: 13), byte(at: 14), byte(at: 15))
                return text.count
            }
            text.hex(self.group(group))
            group += 1
        }
        return text.count
    }

    /// The 16-bit group `index` (0-7) of an IPv6 address.
    private func group(_ index: Int) -> UInt16 {
        let word = index < 4 ? high : low
        return UInt16(truncatingIfNeeded: word >> (48 - 16 * (index % 4)))
    }

    /// Writes an address's text into a buffer with room for it.
    private struct TextWriter {
        let buffer: UnsafeMutableBufferPointer<UInt8>
        var count = 0

        mutating func put(_ byte: UInt8) {
            buffer[count] = byte
            count += 1
        }

        /// `a.b.c.d` in decimal.
        mutating func dotted(_ a: UInt8, _ b: UInt8, _ c: UInt8, _ d: UInt8) {
            decimal(a)
            put(UInt8(ascii: "."))
            decimal(b)
            put(UInt8(ascii: "."))
            decimal(c)
            put(UInt8(ascii: "."))
            decimal(d)
        }

        mutating func decimal(_ value: UInt8) {
            if value >= 100 { put(UInt8(ascii: "0") + value / 100) }
            if value >= 10 { put(UInt8(ascii: "0") + value / 10 % 10) }
            put(UInt8(ascii: "0") + value % 10)
        }

        /// A group in lowercase hexadecimal, without leading zeros.
        mutating func hex(_ value: UInt16) {
            var shift = 12
            while shift > 0 && value >> shift == 0 { shift -= 4 }
            while shift >= 0 {
                let digit = UInt8(truncatingIfNeeded: value >> shift) & 0xF
                put(digit < 10 ? UInt8(ascii: "0") + digit : UInt8(ascii: "a") + digit - 10)
                shift -= 4
            }
        }
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
