import NetReachSystem
import Testing

@testable import NetReach

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `IPAddress` keeps its bytes inline, in two words: it must still say, compare, order and hash
/// exactly what its bytes say.
@Suite("IPAddress: bytes kept inline")
struct IPAddressStorageTests {
    /// Random addresses of both families, some sharing leading bytes or ending in zeros, so the
    /// orderings meet ties and IPv4 addresses that are prefixes of IPv6 ones.
    private static func addresses(count: Int) -> [IPAddress] {
        var random = SeededRandom(seed: 0x1DAD_D2E5)
        return (0..<count).map { index in
            var bytes = random.bytes(count: index % 3 == 0 ? 4 : 16)
            if index % 5 == 0 { bytes[0] = 192 }
            if index % 7 == 0 { for position in 4..<bytes.count { bytes[position] = 0 } }
            return IPAddress(bytes: bytes)!
        }
    }

    @Test func bytesComeBackAsGivenAndOnlyFourOrSixteenMake() {
        for address in Self.addresses(count: 300) {
            #expect(IPAddress(bytes: address.bytes) == address)
            #expect(address.bytes.count == address.family.byteCount)
            #expect(address.withUnsafeBytes { Array($0) } == address.bytes)
            #expect((0..<address.bytes.count).map(address.byte(at:)) == address.bytes)
        }
        for count in [0, 1, 3, 5, 15, 17, 32] {
            #expect(IPAddress(bytes: [UInt8](repeating: 1, count: count)) == nil)
        }
        #expect(IPAddress("2001:db8::1")?.bytes == [0x20, 0x01, 0x0d, 0xb8] + [UInt8](repeating: 0, count: 11) + [1])
        #expect(IPAddress("192.0.2.1")?.bytes == [192, 0, 2, 1])
    }

    @Test func equalAndHashedByFamilyAndBytes() {
        // 1.2.3.4 and 1.2.3.4:: share their first words but are different addresses.
        let ipv4 = IPAddress("1.2.3.4")!
        let ipv6 = IPAddress("102:304::")!
        #expect(ipv4 != ipv6)
        #expect(Set([ipv4, ipv6, IPAddress("1.2.3.4")!]).count == 2)
        let addresses = Self.addresses(count: 200)
        for (first, second) in zip(addresses, addresses.dropFirst()) {
            #expect((first == second) == (first.family == second.family && first.bytes == second.bytes))
        }
        #expect(Set(addresses + addresses).count == Set(addresses.map(\.bytes)).count)
    }

    @Test func precedesIsTheBytesOrder() {
        let addresses = Self.addresses(count: 120) + [IPAddress("1.2.3.4")!, IPAddress("102:304::")!]
        for first in addresses {
            for second in addresses {
                #expect(first.precedes(second) == first.bytes.lexicographicallyPrecedes(second.bytes))
            }
        }
    }

    @Test func prefixesLoopbackAndLinkLocal() {
        let address = IPAddress("192.0.2.130")!
        #expect(address.isIn(prefix: [192, 0, 2], length: 24))
        #expect(address.isIn(prefix: [192, 0, 2, 128], length: 25))
        #expect(!address.isIn(prefix: [192, 0, 2, 0], length: 25))
        #expect(address.isIn(prefix: [], length: 0))
        #expect(IPAddress("2001:db8::1")!.isIn(prefix: [0x20, 0x01, 0x0d, 0xb8], length: 32))
        #expect(!IPAddress("2001:db9::1")!.isIn(prefix: [0x20, 0x01, 0x0d, 0xb8], length: 32))
        #expect(IPAddress("127.8.9.1")!.isLoopback && IPAddress("::1")!.isLoopback)
        #expect(!IPAddress("::")!.isLoopback && !IPAddress("::1:0")!.isLoopback && !IPAddress("1::1")!.isLoopback)
        #expect(IPAddress("169.254.7.1")!.isLinkLocal && IPAddress("fe80::1")!.isLinkLocal)
        #expect(IPAddress("febf::1")!.isLinkLocal && !IPAddress("fec0::1")!.isLinkLocal)
        #expect(!IPAddress("169.253.7.1")!.isLinkLocal)
        #expect(IPAddress("fe80::1%eth0")?.description == "fe80::1")
    }

    /// What `inet_ntop`, the reference, writes for `address`.
    private static func inetNtop(_ address: IPAddress) -> String {
        var out = [CChar](repeating: 0, count: 64)
        let domain = address.family == .ipv4 ? AF_INET : AF_INET6
        let bytes = address.bytes
        let result = bytes.withUnsafeBytes { inet_ntop(domain, $0.baseAddress, &out, socklen_t(out.count)) }
        #expect(result != nil)
        return String(decoding: out.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    @Test func textIsWhatInetNtopWrites() {
        var random = SeededRandom(seed: 0x7E_A7)
        var addresses = Self.addresses(count: 300)
        // Groups drawn from zero, 0xffff, small and any value, so runs of zeros of every length
        // and place, ties between runs, and the IPv4-compatible and -mapped forms all occur.
        for _ in 0..<3000 {
            var bytes: [UInt8] = []
            for _ in 0..<8 {
                let group: UInt16 =
                    switch random.next() % 5 {
                    case 0, 1: 0
                    case 2: 0xffff
                    case 3: UInt16(random.next() % 16)
                    default: UInt16(truncatingIfNeeded: random.next())
                    }
                bytes += [UInt8(group >> 8), UInt8(group & 0xff)]
            }
            addresses.append(IPAddress(bytes: bytes)!)
        }
        for byte in [0, 1, 9, 10, 99, 100, 199, 200, 255] as [UInt8] {
            addresses.append(IPAddress(bytes: [byte, 255 - byte, byte / 2, 7])!)
        }
        for text in [
            "::", "::1", "1::", "::ffff:1.2.3.4", "::1.2.3.4", "::ffff:0:1.2.3.4", "::fffe:1.2.3.4", "1:0:0:1:0:0:0:1",
            "1:0:0:0:1:0:0:1", "0:0:1::", "fe80::", "2001:db8::1", "0.0.0.0", "255.255.255.255", "::0.0.1.0",
        ] {
            addresses.append(IPAddress(text)!)
        }
        for address in addresses {
            #expect(address.description == Self.inetNtop(address))
        }
    }
}
