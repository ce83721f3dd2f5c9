#if os(Linux)
import Foundation
import NetReachTestSupport
import Testing

@testable import NetReach

/// The route filter run by the kernel, against the same notifications read without it: two
/// events sockets in one namespace, one filtered, see the same changes. The kernel must keep
/// exactly what the interpreter (`RouteNotificationFilterTests`) keeps, byte for byte, and so
/// drop only what the store reads as nothing.
@Suite("Route filter in the kernel (integration)", .offPool, .needsNamespaceRoot)
struct RouteFilterIntegrationTests {
    static let watched = ["8.8.8.8", "1.1.1.1", "2001:4860:4860::8888"].map { IPAddress($0)! }

    /// Every datagram `socket` receives until one carries `sentinel` (a route to it), bounded.
    static func datagrams(
        _ socket: borrowing NetlinkSocket, until sentinel: IPAddress, buffer: UnsafeMutableRawBufferPointer
    ) throws -> [[UInt8]] {
        var datagrams: [[UInt8]] = []
        while try socket.waitReadable(within: .seconds(10)) {
            guard case .bytes(let count) = try socket.receive(into: buffer) else { continue }
            let datagram = Array(buffer[0..<count])
            datagrams.append(datagram)
            let messages = datagram.withUnsafeBytes { RtnetlinkParser.parse($0) }
            for case .success(let envelope) in messages {
                if case .ignoredRoute(let coverage, removed: false) = envelope.message, coverage.length == 32,
                    coverage.covers(sentinel)
                {
                    return datagrams
                }
            }
        }
        Issue.record("the sentinel route never arrived (\(datagrams.count) datagrams)")
        return datagrams
    }

    @Test func theKernelKeepsExactlyWhatTheInterpreterKeeps() async throws {
        try await NetnsLab.withLab(.init(ipv4: true, ipv6: true)) { lab in
            let namespace = try NamespaceHandle(lab.namespace)
            let plain = try NetlinkSocket(
                .events, namespace: (namespace.fd, namespace.path), receiveBufferSize: 4 << 20)
            let filtered = try NetlinkSocket(
                .events, namespace: (namespace.fd, namespace.path), receiveBufferSize: 4 << 20)
            let filter = try #require(RouteNotificationFilter(watching: Self.watched))
            try filtered.filter(filter)

            let v4 = NetnsLab.ipv4Gateway
            let v6 = NetnsLab.ipv6Gateway
            let changes = [
                "route add 198.51.100.0/24 via \(v4)", "route add 8.8.8.0/24 via \(v4)",
                "route add 8.8.0.0/16 via \(v4) table 100", "route add 203.0.113.7/32 via \(v4) table 100",
                "route add blackhole 192.0.2.0/24", "route add unreachable 8.0.0.0/8",
                "route add prohibit 1.1.1.1/32 table 100",
                "route add 10.200.0.0/16 nexthop via \(v4) weight 1 nexthop via 10.123.0.3 weight 2",
                "route add 0.0.0.0/1 via \(v4) table 100", "route add 128.0.0.0/1 via \(v4) table 100",
                "route add 2001:db8:ffff::/48 via \(v6)", "route add 2001:4860::/32 via \(v6)",
                "route add 2001:4860:4860::8889/128 via \(v6) table 100", "route add ::/1 via \(v6) table 100",
                "route add blackhole 2001:4860:4860::8888/128 table 100",
                "link set \(NetnsLab.interface) mtu 1400", "address add 10.123.0.9/24 dev \(NetnsLab.interface)",
                "route del 198.51.100.0/24", "route del 8.8.8.0/24", "route del 8.8.0.0/16 table 100",
                "route del 10.200.0.0/16", "route del 2001:db8:ffff::/48", "route del 2001:4860::/32",
                "route add 8.8.8.8/32 via \(v4) table 201",
            ]
            try await lab.batch(changes)

            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 16, alignment: 8)
            defer { buffer.deallocate() }
            let sentinel = IPAddress("8.8.8.8")!
            let everything = try Self.datagrams(plain, until: sentinel, buffer: buffer)
            let kept = try Self.datagrams(filtered, until: sentinel, buffer: buffer)

            #expect(kept == everything.filter(filter.keeps))
            // Every datagram the kernel dropped, the store reads as nothing; it dropped some.
            let dropped = everything.filter { !filter.keeps($0) }
            for datagram in dropped {
                #expect(RouteNotificationFilterTests.storeReadsNothing(datagram, watching: Self.watched))
            }
            // 198.51.100.0/24, 203.0.113.7, 192.0.2.0/24, 10.200.0.0/16, 128.0.0.0/1, 2001:db8:ffff::/48,
            // 2001:4860:4860::8889, the address's local and broadcast routes, and their removals.
            #expect(dropped.count >= 10)
            // Both families' covering routes, the link and the address came through.
            #expect(kept.count >= 12)
        }
    }
}
#endif
