#if os(Linux)
import CNetReachLinux
import Foundation
import Glibc
@testable import NetReach
import NetReachTestSupport
import Testing

/// Route lookups as bytes: the request `ip route get` sends, and the kernel's answers read back,
/// including lying and stale ones.
@Suite("RouteQuery: lookup requests and answers")
struct RouteQueryTests {
    private static let sequence: UInt32 = 77
    private static let ticks = 100.0

    private func answer(_ bytes: NetlinkBytes, sequence: UInt32 = sequence) -> RouteQuery.Answer? {
        bytes.bytes.withUnsafeBytes { RouteQuery.answer(in: $0, sequence: sequence, ticksPerSecond: Self.ticks) }
    }

    private func routeReply(
        family: UInt8 = NetlinkBytes.inet, type: UInt8 = NetlinkBytes.unicast, attributes: [NetlinkBytes.Attribute]
    ) -> NetlinkBytes {
        NetlinkBytes().message(
            NetlinkBytes.newRoute, sequence: Self.sequence,
            body: NetlinkBytes.rtmsg(
                family: family, destinationLength: family == NetlinkBytes.inet ? 32 : 128, type: type),
            attributes: attributes)
    }

    @Test func theRequestIsWhatIpRouteGetSends() {
        let request = RouteQuery.request(for: IPAddress("8.8.8.8")!, interfaceIndex: 3, sequence: 9)
        // nlmsghdr: length 44, RTM_GETROUTE, NLM_F_REQUEST, sequence 9, port 0.
        #expect(
            Array(request[0..<16]) == NetlinkBytes.hostOrder(UInt32(44)) + NetlinkBytes.hostOrder(UInt16(RTM_GETROUTE))
                + NetlinkBytes.hostOrder(UInt16(NLM_F_REQUEST)) + NetlinkBytes.hostOrder(UInt32(9))
                + NetlinkBytes.hostOrder(UInt32(0)))
        // rtmsg: AF_INET, /32, RTM_F_LOOKUP_TABLE; then RTA_DST 8.8.8.8 and RTA_OIF 3.
        #expect(request[16] == UInt8(AF_INET) && request[17] == 32)
        #expect(Array(request[24..<28]) == NetlinkBytes.hostOrder(UInt32(RTM_F_LOOKUP_TABLE)))
        #expect(
            Array(request[28..<36]) == NetlinkBytes.hostOrder(UInt16(8))
                + NetlinkBytes.hostOrder(UInt16(RTA_DST.rawValue)) + [8, 8, 8, 8])
        #expect(
            Array(request[36..<44]) == NetlinkBytes.hostOrder(UInt16(8))
                + NetlinkBytes.hostOrder(UInt16(RTA_OIF.rawValue)) + NetlinkBytes.hostOrder(UInt32(3)))
        let v6 = RouteQuery.request(
            for: IPAddress("2001:4860:4860::8888")!, interfaceIndex: nil, fibMatch: true, sequence: 1)
        #expect(v6.count == 16 + 12 + 20 && v6[16] == UInt8(AF_INET6) && v6[17] == 128)
        #expect(Array(v6[24..<28]) == NetlinkBytes.hostOrder(UInt32(RTM_F_LOOKUP_TABLE) | UInt32(RTM_F_FIB_MATCH)))
    }

    @Test func aRequestForAPacketCarriesItsProtocolAndPorts() {
        // `ip route get 8.8.8.8 ipproto tcp sport 32768 dport 443`: RTA_IP_PROTO (u8), RTA_SPORT
        // and RTA_DPORT (big-endian u16), each padded to 4 bytes.
        let packet = RouteQuery.Packet(transport: .tcp, sourcePort: 32768, destinationPort: 443)
        let request = RouteQuery.request(
            for: IPAddress("8.8.8.8")!, interfaceIndex: nil, packet: packet, sequence: 9)
        #expect(request.count == 16 + 12 + 8 + 8 + 8 + 8)
        #expect(Array(request[0..<4]) == NetlinkBytes.hostOrder(UInt32(request.count)))
        #expect(
            Array(request[36..<44]) == NetlinkBytes.hostOrder(UInt16(5))
                + NetlinkBytes.hostOrder(UInt16(RTA_IP_PROTO.rawValue)) + [UInt8(IPPROTO_TCP), 0, 0, 0])
        #expect(
            Array(request[44..<52]) == NetlinkBytes.hostOrder(UInt16(6))
                + NetlinkBytes.hostOrder(UInt16(RTA_SPORT.rawValue)) + [0x80, 0x00, 0, 0])
        #expect(
            Array(request[52..<60]) == NetlinkBytes.hostOrder(UInt16(6))
                + NetlinkBytes.hostOrder(UInt16(RTA_DPORT.rawValue)) + [0x01, 0xbb, 0, 0])
        // UDP to 53 with no source port yet (a TCP connect's first lookup has none either).
        let udp = RouteQuery.request(
            for: IPAddress("2001:4860:4860::8888")!, source: IPAddress("2001:db8::2")!, interfaceIndex: 4,
            packet: RouteQuery.Packet(transport: .udp, sourcePort: nil, destinationPort: 53), sequence: 1)
        #expect(udp.count == 16 + 12 + 20 + 20 + 8 + 8 + 8)
        #expect(
            Array(udp[76..<84]) == NetlinkBytes.hostOrder(UInt16(5)) + NetlinkBytes.hostOrder(UInt16(27)) + [
                17, 0, 0, 0,
            ])
        #expect(
            Array(udp[84..<92]) == NetlinkBytes.hostOrder(UInt16(6)) + NetlinkBytes.hostOrder(UInt16(29)) + [
                0, 53, 0, 0,
            ])
    }

    @Test(arguments: [
        ("32768\t60999\n", UInt16(32768)), ("1024 65535\n", 1024), ("  40000\t50000", 40000),
    ])
    func theFirstPortOfTheLocalRangeIsTheSourcePort(text: String, port: UInt16) {
        #expect(SourceQuery.firstPort(ofRange: Array(text.utf8)) == port)
    }

    @Test(arguments: ["", "\n", "abc 1", "0 10", "70000 80000", "123456 1"])
    func aRangeWithNoPortIsNone(text: String) {
        #expect(SourceQuery.firstPort(ofRange: Array(text.utf8)) == nil)
    }

    @Test func theProbeReadsItsNamespacesPortRange() throws {
        // The reference: the file itself, read here (this process's namespace).
        let text = try String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)
        let sources = try SourceQuery(namespace: nil)
        #expect(sources.sourcePort() == SourceQuery.firstPort(ofRange: Array(text.utf8)))
    }

    @Test func aNeighbourRequestIsWhatIpNeighGetSendsAndItsAnswerGivesTheState() {
        let request = RouteQuery.neighbourRequest(for: IPAddress("10.124.0.1")!, interfaceIndex: 5, sequence: 9)
        // nlmsghdr: length 36, RTM_GETNEIGH, NLM_F_REQUEST; ndmsg AF_INET, ifindex 5; NDA_DST.
        #expect(
            Array(request[0..<8]) == NetlinkBytes.hostOrder(UInt32(36)) + NetlinkBytes.hostOrder(UInt16(RTM_GETNEIGH))
                + NetlinkBytes.hostOrder(UInt16(NLM_F_REQUEST)))
        #expect(request[16] == UInt8(AF_INET) && Array(request[20..<24]) == NetlinkBytes.hostOrder(UInt32(5)))
        #expect(
            Array(request[28..<36]) == NetlinkBytes.hostOrder(UInt16(8)) + NetlinkBytes.hostOrder(NetlinkBytes.ndaDst)
                + [10, 124, 0, 1])
        // ndmsg { family, pad, pad2, ifindex, state, flags, type }
        func reply(state: UInt16, sequence: UInt32 = 9) -> [UInt8] {
            let body =
                [NetlinkBytes.inet, 0, 0, 0] + NetlinkBytes.hostOrder(Int32(5)) + NetlinkBytes.hostOrder(state) + [
                    0, 0,
                ]
            return NetlinkBytes().message(
                NetlinkBytes.newNeighbour, sequence: sequence, body: body,
                attributes: [.init(type: NetlinkBytes.ndaDst, payload: [10, 124, 0, 1])]
            ).bytes
        }
        let failed = reply(state: NetlinkBytes.nudFailed).withUnsafeBytes {
            RouteQuery.neighbourAnswer(in: $0, sequence: 9)
        }
        #expect(failed == .state(NetlinkBytes.nudFailed))
        #expect(NetlinkBytes.nudFailed & RouteQuery.validNeighbourStates == 0)
        #expect(UInt16(0x02) & RouteQuery.validNeighbourStates != 0, "reachable is valid")
        #expect(
            reply(state: 2, sequence: 8).withUnsafeBytes { RouteQuery.neighbourAnswer(in: $0, sequence: 9) } == nil,
            "another request's answer")
        let missing = NetlinkBytes().message(
            2, sequence: 9, body: NetlinkBytes.hostOrder(Int32(-ENOENT)) + [UInt8](repeating: 0, count: 16)
        ).bytes
        #expect(missing.withUnsafeBytes { RouteQuery.neighbourAnswer(in: $0, sequence: 9) } == .unknown)
    }

    @Test func aRouteAnswerNamesInterfaceGatewaySourceAndTable() {
        let reply = routeReply(attributes: [
            .u32(NetlinkBytes.rtaTable, 51820), .u32(NetlinkBytes.rtaOif, 5),
            .address(NetlinkBytes.rtaGateway, "10.9.0.1"), .address(UInt16(RTA_PREFSRC.rawValue), "10.9.0.2"),
        ])
        #expect(
            answer(reply)?.lookup
                == .route(
                    .init(
                        interfaceIndex: 5, gateway: IPAddress("10.9.0.1"), source: IPAddress("10.9.0.2"), table: 51820))
        )
    }

    @Test func aRequestFromASourceCarriesItAsRTASrc() {
        // `ip route get 2001:db8:ffff::77 from 2001:db8:123::2 fibmatch`
        let request = RouteQuery.request(
            for: IPAddress("2001:db8:ffff::77")!, source: IPAddress("2001:db8:123::2"),
            interfaceIndex: nil, fibMatch: true, sequence: 3)
        #expect(request.count == 16 + 12 + 20 + 20)
        #expect(request[16] == UInt8(AF_INET6) && request[17] == 128 && request[18] == 128, "dst_len and src_len")
        #expect(
            Array(request[48..<52]) == NetlinkBytes.hostOrder(UInt16(20))
                + NetlinkBytes.hostOrder(UInt16(RTA_SRC.rawValue)))
        #expect(Array(request[52..<68]) == IPAddress("2001:db8:123::2")!.bytes)
        // A source of the other family is no source at all.
        let mixed = RouteQuery.request(
            for: IPAddress("8.8.8.8")!, source: IPAddress("2001:db8:123::2"), interfaceIndex: nil, sequence: 4)
        #expect(mixed.count == 16 + 12 + 8 && mixed[18] == 0)
    }

    @Test func aTableEntryTellsItsPrefixLength() {
        // `ip route get fibmatch 8.8.8.8` answers with the entry itself: `default` is /0, a host route /32.
        let entry = NetlinkBytes().message(
            NetlinkBytes.newRoute, sequence: Self.sequence,
            body: NetlinkBytes.rtmsg(family: NetlinkBytes.inet, destinationLength: 0),
            attributes: [.u32(NetlinkBytes.rtaOif, 2), .address(NetlinkBytes.rtaGateway, "10.123.0.1")])
        #expect(answer(entry)?.prefixLength == 0)
        let blackhole = NetlinkBytes().message(
            NetlinkBytes.newRoute, sequence: Self.sequence,
            body: NetlinkBytes.rtmsg(family: NetlinkBytes.inet, destinationLength: 32, type: NetlinkBytes.blackhole),
            attributes: [.address(NetlinkBytes.rtaDst, "8.8.8.8")])
        #expect(answer(blackhole) == RouteQuery.Answer(lookup: .refused(.blackhole), prefixLength: 32))
    }

    @Test func aMultipathEntryStandsForItsFirstLiveLegWithEveryLegBeside() {
        // Legs: via 10.123.0.1 dev #2 (dead: RTNH_F_DEAD | RTNH_F_LINKDOWN), via 10.124.0.1 dev #3.
        func leg(_ index: Int32, _ gateway: String, flags: UInt8) -> [UInt8] {
            let encoded = NetlinkBytes.Attribute.address(NetlinkBytes.rtaGateway, gateway).encoded
            return NetlinkBytes.hostOrder(UInt16(8 + encoded.count)) + [flags, 0] + NetlinkBytes.hostOrder(index)
                + encoded
        }
        let legs = NetlinkBytes.Attribute.raw(
            NetlinkBytes.rtaMultipath, leg(2, "10.123.0.1", flags: 0x11) + leg(3, "10.124.0.1", flags: 0))
        let entry = NetlinkBytes().message(
            NetlinkBytes.newRoute, sequence: Self.sequence,
            body: NetlinkBytes.rtmsg(family: NetlinkBytes.inet, destinationLength: 0),
            attributes: [.u32(NetlinkBytes.rtaTable, 254), legs])
        let expected = RouteLookup.route(
            .init(
                interfaceIndex: 3, gateway: IPAddress("10.124.0.1"),
                nextHops: [
                    .init(interfaceIndex: 2, gateway: IPAddress("10.123.0.1"), isDead: true),
                    .init(interfaceIndex: 3, gateway: IPAddress("10.124.0.1")),
                ]))
        #expect(answer(entry)?.lookup == expected)
        // A leg whose length runs past the attribute: the entry cannot be read, so it is no route.
        let broken = NetlinkBytes.Attribute.raw(
            NetlinkBytes.rtaMultipath, NetlinkBytes.hostOrder(UInt16(200)) + [0, 0] + NetlinkBytes.hostOrder(Int32(2)))
        let lying = NetlinkBytes().message(
            NetlinkBytes.newRoute, sequence: Self.sequence,
            body: NetlinkBytes.rtmsg(family: NetlinkBytes.inet, destinationLength: 0), attributes: [broken])
        #expect(answer(lying)?.lookup == .failed(errno: EBADMSG))
    }

    @Test func anIPv6GatewayOfAnIPv4RouteComesInRTAVia() {
        let via = NetlinkBytes.Attribute.raw(
            UInt16(RTA_VIA.rawValue), NetlinkBytes.hostOrder(UInt16(AF_INET6)) + IPAddress("fe80::1")!.bytes)
        let reply = routeReply(attributes: [.u32(NetlinkBytes.rtaOif, 2), via])
        #expect(answer(reply)?.lookup == .route(.init(interfaceIndex: 2, gateway: IPAddress("fe80::1"))))
    }

    @Test func anOnLinkGuessFromNoTableIsNoRoute() {
        // `ip route get 8.8.8.8 oif veth0` with no route: "dev veth0", no gateway, table 0.
        let reply = NetlinkBytes().message(
            NetlinkBytes.newRoute, sequence: Self.sequence,
            body: NetlinkBytes.rtmsg(family: NetlinkBytes.inet, destinationLength: 32, table: 0),
            attributes: [.u32(NetlinkBytes.rtaOif, 2), .address(UInt16(RTA_PREFSRC.rawValue), "10.123.0.2")])
        #expect(answer(reply)?.lookup == RouteLookup.noRoute)
    }

    @Test func theTableEntrysLifetimeIsReadFromCacheInfo() {
        // struct rta_cacheinfo: clntref, lastuse, expires (ticks), error, used, id, ts, tsage.
        let cacheInfo = [UInt32(0), 0, 250, 0, 0, 0, 0, 0].flatMap { NetlinkBytes.hostOrder($0) }
        let reply = routeReply(
            family: NetlinkBytes.inet6,
            attributes: [
                .u32(NetlinkBytes.rtaOif, 2), .address(NetlinkBytes.rtaGateway, "fe80::1"),
                .raw(UInt16(RTA_CACHEINFO.rawValue), cacheInfo),
            ])
        // 250 ticks left, rounded down by the kernel: certainly expired after 251.
        #expect(answer(reply)?.expiresIn == 2.51)
    }

    @Test(arguments: [
        (ENETUNREACH, RouteLookup.noRoute), (EHOSTUNREACH, .refused(.unreachable)),
        (EINVAL, .refused(.blackhole)), (EACCES, .refused(.prohibit)), (ENODEV, .failed(errno: ENODEV)),
    ])
    func anErrorAnswerIsTheKernelsVerdict(_ code: Int32, _ expected: RouteLookup) {
        let reply = NetlinkBytes().message(
            NetlinkBytes.error, sequence: Self.sequence, body: NetlinkBytes.errorBody(errno: code))
        #expect(answer(reply)?.lookup == expected)
    }

    @Test(arguments: [
        (UInt8(RTN_UNREACHABLE), RouteLookup.refused(.unreachable)), (UInt8(RTN_BLACKHOLE), .refused(.blackhole)),
        (UInt8(RTN_PROHIBIT), .refused(.prohibit)), (UInt8(RTN_THROW), .noRoute),
    ])
    func aRefusingRouteTypeIsARefusal(_ type: UInt8, _ expected: RouteLookup) {
        #expect(answer(routeReply(type: type, attributes: []))?.lookup == expected)
    }

    @Test func aStaleAnswerOrAnAcknowledgementIsNotTheAnswer() {
        let stale = routeReply(attributes: [.u32(NetlinkBytes.rtaOif, 2)])
        #expect(answer(stale, sequence: Self.sequence + 1) == nil)
        let ack = NetlinkBytes().message(
            NetlinkBytes.error, sequence: Self.sequence, body: NetlinkBytes.errorBody(errno: 0))
        #expect(answer(ack) == nil)
        // The stale answer first, then ours: ours is found.
        let both = stale.message(
            NetlinkBytes.error, sequence: Self.sequence + 1, body: NetlinkBytes.errorBody(errno: EACCES))
        #expect(answer(both, sequence: Self.sequence + 1)?.lookup == .refused(.prohibit))
    }

    @Test func aMalformedAnswerIsAFailedLookupNeverARoute() {
        // A unicast answer without RTA_OIF, one with an attribute that overruns it, a truncated body.
        let noInterface = routeReply(attributes: [.address(NetlinkBytes.rtaGateway, "192.0.2.1")])
        let overrun = routeReply(attributes: [
            .raw(NetlinkBytes.rtaOif, NetlinkBytes.hostOrder(UInt32(2)), declaredLength: 200)
        ])
        let truncated = NetlinkBytes().message(NetlinkBytes.newRoute, sequence: Self.sequence, body: [2, 32, 0])
        for reply in [noInterface, overrun, truncated] {
            #expect(answer(reply)?.lookup == .failed(errno: EBADMSG))
        }
        let shortError = NetlinkBytes().message(NetlinkBytes.error, sequence: Self.sequence, body: [])
        #expect(answer(shortError)?.lookup == .failed(errno: EBADMSG))
        // A header that lies about its length: nothing can be trusted, and waiting would not help.
        #expect(
            answer(NetlinkBytes().appending(NetlinkBytes.hostOrder(UInt32(500)) + [UInt8](repeating: 0, count: 12)))?
                .lookup
                == .failed(errno: EBADMSG))
        // The kernel caps rta_expires at INT_MAX (`expires 30000000`): read, not trapped on.
        let capped = [UInt32(0), 0, UInt32(Int32.max), 0, 0, 0, 0, 0].flatMap { NetlinkBytes.hostOrder($0) }
        let longLived = routeReply(
            family: NetlinkBytes.inet6,
            attributes: [
                .u32(NetlinkBytes.rtaOif, 2), .raw(UInt16(RTA_CACHEINFO.rawValue), capped),
            ])
        #expect((answer(longLived)?.expiresIn ?? 0) > 2e7)
    }
}
#endif
