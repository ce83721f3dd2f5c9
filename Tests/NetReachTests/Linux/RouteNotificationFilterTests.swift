#if os(Linux)
import NetReachSystem
import NetReachTestSupport
import Testing

@testable import NetReach

/// The events socket's route filter, run by its interpreter (the kernel's own run is
/// `RouteFilterIntegrationTests`): it may drop only what the store would read as nothing, and
/// drops a kernel's ordinary non-covering route. Off the pool: two of these run a filter
/// interpreter and a sort over thousands of routes for seconds in a debug build (30 s with two
/// CPU hogs), which took both pool threads from every test beside them.
@Suite("Route notification filter", .offPool)
struct RouteNotificationFilterTests {
    static let watched = ["8.8.8.8", "1.1.1.1", "2001:4860:4860::8888", "2606:4700:4700::1111"].map { IPAddress($0)! }
    static let filter = RouteNotificationFilter(watching: watched)!

    /// A route notification as the kernel lays it out: RTA_TABLE, then RTA_DST, then the rest.
    static func route(
        _ prefix: String, _ length: UInt8, type: UInt16 = NetlinkBytes.newRoute, sourceLength: UInt8 = 0,
        routeType: UInt8 = NetlinkBytes.unicast, table: UInt32 = 254, extra: [NetlinkBytes.Attribute] = [],
        destinationFirst: Int = 1
    ) -> [UInt8] {
        let address = IPAddress(prefix)!
        let family = address.family == .ipv4 ? NetlinkBytes.inet : NetlinkBytes.inet6
        var body = NetlinkBytes.rtmsg(family: family, destinationLength: length, type: routeType)
        body[2] = sourceLength
        var attributes = [NetlinkBytes.Attribute.u32(NetlinkBytes.rtaTable, table)] + extra
        attributes.insert(.raw(NetlinkBytes.rtaDst, address.bytes), at: min(destinationFirst, attributes.count))
        return NetlinkBytes().message(type, body: body, attributes: attributes).bytes
    }

    /// What the store makes of `bytes`: nothing at all, or something (a change, a question, an
    /// error the engine counts).
    static func storeReadsNothing(_ bytes: [UInt8], watching addresses: [IPAddress] = watched) -> Bool {
        let results = bytes.withUnsafeBytes { RtnetlinkParser.parse($0) }
        guard results.count == 1, case .success(let envelope) = results[0] else { return false }
        var store = SnapshotStore()
        return store.absorb(envelope.message, watching: .init(addresses: addresses)) == .init()
    }

    @Test func anInstructionIsLaidOutAsStructSockFilter() {
        #expect(MemoryLayout<RouteNotificationFilter.Instruction>.size == 8)
        #expect(MemoryLayout<RouteNotificationFilter.Instruction>.stride == 8)
        #expect(MemoryLayout<RouteNotificationFilter.Instruction>.offset(of: \.jumpIfTrue) == 2)
        #expect(MemoryLayout<RouteNotificationFilter.Instruction>.offset(of: \.jumpIfFalse) == 3)
        #expect(MemoryLayout<RouteNotificationFilter.Instruction>.offset(of: \.value) == 4)
    }

    @Test func aRouteThatCoversNoWatchedAddressIsDropped() {
        for bytes in [
            Self.route("10.1.2.3", 32), Self.route("10.1.2.3", 32, type: NetlinkBytes.deleteRoute),
            Self.route("8.8.8.9", 32), Self.route("8.8.8.0", 31), Self.route("128.0.0.0", 1),
            Self.route("2001:4860:4860::8889", 128), Self.route("2001:4860:4861::", 48),
            Self.route("8000::", 1), Self.route("2001:4860:8000::", 33),
            Self.route("10.0.0.0", 8, routeType: NetlinkBytes.blackhole, table: 100),
        ] {
            #expect(Self.storeReadsNothing(bytes))
            #expect(!Self.filter.keeps(bytes), "\(bytes)")
        }
    }

    @Test func aRouteThatCoversAWatchedAddressIsKept() {
        for bytes in [
            Self.route("8.8.8.8", 32), Self.route("8.8.8.0", 24), Self.route("8.8.8.9", 31), Self.route("0.0.0.0", 1),
            Self.route("1.1.1.1", 32, type: NetlinkBytes.deleteRoute), Self.route("8.0.0.0", 7, table: 100),
            Self.route("2001:4860:4860::8888", 128), Self.route("2001:4860:4860::8889", 127),
            Self.route("2001:4860::", 32), Self.route("2001:4860::", 33, table: 0), Self.route("::", 1),
            Self.route("2606:4700:4700::", 64, routeType: NetlinkBytes.blackhole),
        ] {
            #expect(!Self.storeReadsNothing(bytes))
            #expect(Self.filter.keeps(bytes), "\(bytes)")
        }
    }

    @Test func whatTheFilterDoesNotReadIsKept() {
        let kept: [(String, [UInt8])] = [
            ("a default route", Self.route("0.0.0.0", 0)),
            ("a source-specific route", Self.route("2001:db8::", 64, sourceLength: 56)),
            (
                "RTA_DST past the attributes searched",
                Self.route(
                    "10.1.2.3", 32,
                    extra: Array(
                        repeating: .u32(NetlinkBytes.rtaPriority, 1), count: RouteNotificationFilter.attributesSearched),
                    destinationFirst: RouteNotificationFilter.attributesSearched)
            ),
            (
                "no RTA_DST",
                NetlinkBytes().message(
                    NetlinkBytes.newRoute, body: NetlinkBytes.rtmsg(family: NetlinkBytes.inet, destinationLength: 32),
                    attributes: [.u32(NetlinkBytes.rtaTable, 254)]
                ).bytes
            ),
            (
                "an RTA_DST of the wrong size",
                NetlinkBytes().message(
                    NetlinkBytes.newRoute, body: NetlinkBytes.rtmsg(family: NetlinkBytes.inet, destinationLength: 32),
                    attributes: [.raw(NetlinkBytes.rtaDst, [10, 1, 2, 3, 4, 5, 6, 7])]
                ).bytes
            ),
            ("a prefix longer than the family's", Self.route("10.1.2.3", 33)),
            (
                "an attribute running past the message",
                NetlinkBytes().message(
                    NetlinkBytes.newRoute, body: NetlinkBytes.rtmsg(family: NetlinkBytes.inet, destinationLength: 32),
                    attributes: [.raw(NetlinkBytes.rtaTable, [254, 0, 0, 0], declaredLength: 200)]
                ).bytes
            ),
            (
                "an attribute shorter than its header",
                NetlinkBytes().message(
                    NetlinkBytes.newRoute, body: NetlinkBytes.rtmsg(family: NetlinkBytes.inet, destinationLength: 32),
                    attributes: [.raw(NetlinkBytes.rtaTable, [254, 0, 0, 0], declaredLength: 2)]
                ).bytes
            ),
            ("two messages in one datagram", Self.route("10.1.2.3", 32) + Self.route("10.1.2.4", 32)),
            ("a message longer than its datagram", Array(Self.route("10.1.2.3", 32).dropLast(4))),
            ("a header alone", Array(Self.route("10.1.2.3", 32).prefix(16))),
            (
                "a link",
                NetlinkBytes().message(
                    NetlinkBytes.newLink, body: NetlinkBytes.ifinfomsg(index: 2, flags: NetlinkBytes.up)
                ).bytes
            ),
            (
                "a neighbour",
                NetlinkBytes().message(NetlinkBytes.newNeighbour, body: [2] + Array(repeating: 0, count: 11)).bytes
            ),
            (
                "an MPLS route",
                NetlinkBytes().message(
                    NetlinkBytes.newRoute, body: [28, 20, 0, 0, 254, 3, 0, 1, 0, 0, 0, 0],
                    attributes: [.raw(NetlinkBytes.rtaDst, [0, 1, 0x01, 0])]
                ).bytes
            ),
            ("empty", []),
        ]
        for (what, bytes) in kept {
            #expect(Self.filter.keeps(bytes), "\(what)")
        }
    }

    @Test func withNoWatchedAddressOfAFamilyEveryRouteOfItCoveringSomethingIsDropped() {
        let ipv4Only = RouteNotificationFilter(watching: [IPAddress("8.8.8.8")!])!
        #expect(!ipv4Only.keeps(Self.route("2001:4860:4860::8888", 128)))
        #expect(ipv4Only.keeps(Self.route("::", 0)))
        #expect(ipv4Only.keeps(Self.route("8.8.0.0", 16)))
    }

    @Test func tooManyAddressesForTheKernelMakeNoFilter() {
        let many = (0..<400).map { IPAddress("2001:db8::\(String($0, radix: 16))")! }
        #expect(RouteNotificationFilter(watching: many) == nil)
        let some = Array(many.prefix(100))
        let filter = RouteNotificationFilter(watching: some)
        #expect(filter != nil)
        #expect((filter?.instructions.count ?? .max) <= RouteNotificationFilter.maximumLength)
        #expect(filter?.keeps(Self.route("2001:db8::63", 128)) == true)
        #expect(filter?.keeps(Self.route("2001:db8::64", 128)) == false)
    }

    /// The reference is the parser and the store on the same bytes: over many random routes near
    /// and far from the watched addresses, whatever the filter drops the store reads as nothing,
    /// and a kernel-shaped route the store reads as nothing is dropped.
    @Test func theFilterDropsExactlyWhatTheStoreReadsAsNothing() {
        var random = SeededRandom(seed: 0x5EED_F117)
        var dropped = 0
        for _ in 0..<20_000 {
            let ipv6 = Bool.random(using: &random)
            let near = Self.watched.filter { ($0.family == .ipv6) == ipv6 }.randomElement(using: &random)!
            var bytes =
                Bool.random(using: &random)
                ? near.bytes : (0..<near.bytes.count).map { _ in UInt8.random(in: 0...255, using: &random) }
            // Flip one bit somewhere: the boundaries of every prefix length get tried.
            let bit = Int.random(in: 0..<(bytes.count * 8), using: &random)
            bytes[bit / 8] ^= 0x80 >> UInt8(bit % 8)
            let length = UInt8.random(in: 0...UInt8(bytes.count * 8), using: &random)
            let sourceLength: UInt8 = Int.random(in: 0..<10, using: &random) == 0 ? 48 : 0
            let extra: [NetlinkBytes.Attribute] = (0..<Int.random(in: 0...3, using: &random)).map { _ in
                .u32(NetlinkBytes.rtaPriority, UInt32.random(in: 0...1024, using: &random))
            }
            let message = Self.route(
                IPAddress(bytes: bytes)!.description, length,
                type: Bool.random(using: &random) ? NetlinkBytes.newRoute : NetlinkBytes.deleteRoute,
                sourceLength: sourceLength, routeType: UInt8.random(in: 1...9, using: &random),
                table: [254, 255, 100, 0x10000].randomElement(using: &random)!, extra: extra,
                destinationFirst: Int.random(in: 0...extra.count + 1, using: &random))
            let nothing = Self.storeReadsNothing(message)
            let kept = Self.filter.keeps(message)
            if !kept {
                dropped += 1
                #expect(nothing, "dropped a route the store reads: \(message)")
            }
            if nothing, length > 0 {
                #expect(!kept, "kept a route the store reads as nothing: \(message)")
            }
        }
        #expect(dropped > 5_000)
    }
}
#endif
