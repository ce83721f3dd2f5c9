#if os(Linux)
import Glibc

/// One route lookup: the `RTM_GETROUTE` request `ip route get ADDRESS [from SOURCE] [oif DEV]
/// [ipproto P] [sport S] [dport D] [fibmatch]` sends and the reading of the kernel's answer, as bytes (pure, so both are tested
/// with byte tables), and, under "Asking", the lookup itself on the requests socket, made the way
/// a program's socket gets its route.
///
/// A lookup sends nothing on any wire: the kernel only consults its routing rules and tables.
enum RouteQuery {
    /// `RTM_F_LOOKUP_TABLE`: report the table the route came from, not `main`.
    static let lookupTableFlag: UInt32 = 0x1000
    /// `RTM_F_FIB_MATCH`: answer with the table entry itself (`ip route get fibmatch`), whose
    /// `rta_expires` is the route's lifetime; the ordinary answer describes a cached clone that
    /// carries none.
    static let fibMatchFlag: UInt32 = 0x2000

    /// What the packet carries beyond its addresses, which policy rules can match (`ip rule ...
    /// ipproto tcp`, `dport 443`, `sport 32768-60999`): `ip route get ... ipproto P sport S dport D`.
    struct Packet: Equatable {
        var transport: TransportProtocol
        /// `nil`: no source port yet (a TCP `connect` picks its source before its port).
        var sourcePort: UInt16?
        var destinationPort: UInt16
    }

    /// The request for `destination`, from `source` when given (RTA_SRC: policy rules `from ADDR`
    /// and source-specific routes apply, as they do to a connected socket), bound to
    /// `interfaceIndex` when given (RTA_OIF), for `packet` when given (RTA_IP_PROTO, RTA_SPORT,
    /// RTA_DPORT; Linux 4.17 and later).
    static func request(
        for destination: IPAddress, source: IPAddress? = nil, interfaceIndex: Int?, packet: Packet? = nil,
        fibMatch: Bool = false, sequence: UInt32
    ) -> [UInt8] {
        var message: [UInt8] = []
        appendRequest(
            to: &message, for: destination, source: source, interfaceIndex: interfaceIndex, packet: packet,
            fibMatch: fibMatch, sequence: sequence)
        return message
    }

    /// ``request(for:source:interfaceIndex:packet:fibMatch:sequence:)`` written at the end of
    /// `message` (several requests make one datagram), in place: one append of the whole request,
    /// then its fields stored (appending field by field through the array's checks was ~1,500
    /// instructions a request, callgrind; Benchmarks/RESULTS.md, section 32).
    static func appendRequest(
        to message: inout [UInt8], for destination: IPAddress, source: IPAddress? = nil, interfaceIndex: Int?,
        packet: Packet? = nil, fibMatch: Bool = false, sequence: UInt32
    ) {
        let source = source.flatMap { $0.family == destination.family ? $0 : nil }
        let addressLength = destination.family.byteCount
        // nlmsghdr, rtmsg, RTA_DST, then RTA_SRC and RTA_OIF when given (addresses need no padding),
        // then the packet's attributes, each padded to 8 bytes.
        let packetLength = packet.map { 8 + ($0.sourcePort == nil ? 0 : 8) + 8 } ?? 0
        let length =
            16 + 12 + (4 + addressLength) + (source == nil ? 0 : 4 + addressLength) + (interfaceIndex == nil ? 0 : 8)
            + packetLength
        appendRequest(of: length, to: &message) { fields in
            fields.putHeader(type: 26, length: length, sequence: sequence) // RTM_GETROUTE
            // struct rtmsg { u8 family, dst_len, src_len, tos, table, protocol, scope, type; u32 flags; }
            fields.put(UInt8(destination.family == .ipv4 ? 2 : 10))
            fields.put(UInt8(addressLength * 8))
            fields.put(UInt8(source == nil ? 0 : addressLength * 8))
            fields.skip(5)
            fields.put(lookupTableFlag | (fibMatch ? fibMatchFlag : 0))
            fields.put(attribute: 1, destination) // RTA_DST
            if let source { fields.put(attribute: 2, source) } // RTA_SRC
            if let interfaceIndex {
                fields.put(UInt16(8))
                fields.put(UInt16(4)) // RTA_OIF
                fields.put(UInt32(truncatingIfNeeded: interfaceIndex))
            }
            if let packet {
                fields.put(UInt16(5))
                fields.put(UInt16(27)) // RTA_IP_PROTO: u8, then 3 bytes of padding
                fields.put(packet.transport.number)
                fields.skip(3)
                if let sourcePort = packet.sourcePort { fields.put(port: sourcePort, attribute: 28) } // RTA_SPORT
                fields.put(port: packet.destinationPort, attribute: 29) // RTA_DPORT
            }
        }
    }

    /// Appends `length` zero bytes to `message` and has `write` store a request's fields in them.
    private static func appendRequest(
        of length: Int, to message: inout [UInt8], _ write: (inout FieldWriter) -> Void
    ) {
        let start = message.count
        message.append(contentsOf: repeatElement(0, count: length))
        message.withUnsafeMutableBytes { whole in
            var fields = FieldWriter(bytes: UnsafeMutableRawBufferPointer(rebasing: whole[start...]))
            write(&fields)
        }
    }

    /// Stores a request's fields one after another into bytes already zeroed (host byte order, as
    /// netlink wants).
    private struct FieldWriter {
        let bytes: UnsafeMutableRawBufferPointer
        var offset = 0

        mutating func put<Value: FixedWidthInteger>(_ value: Value) {
            bytes.storeBytes(of: value, toByteOffset: offset, as: Value.self)
            offset += MemoryLayout<Value>.size
        }

        mutating func skip(_ count: Int) { offset += count }

        /// `nlmsghdr { u32 len; u16 type; u16 flags (NLM_F_REQUEST); u32 seq; u32 pid (the kernel's) }`.
        mutating func putHeader(type: UInt16, length: Int, sequence: UInt32) {
            put(UInt32(length))
            put(type)
            put(UInt16(1))
            put(sequence)
            put(UInt32(0))
        }

        /// A port attribute: a big-endian u16, then 2 bytes of padding.
        mutating func put(port: UInt16, attribute type: UInt16) {
            put(UInt16(6))
            put(type)
            put(port.bigEndian)
            skip(2)
        }

        /// An attribute whose payload is `address`'s bytes (4 or 16: no padding needed).
        mutating func put(attribute type: UInt16, _ address: IPAddress) {
            put(UInt16(4 + address.family.byteCount))
            put(type)
            address.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: bytes[offset...]).copyMemory(from: $0) }
            offset += address.family.byteCount
        }
    }

    /// The request `ip neigh get ADDRESS dev DEV` sends (`RTM_GETNEIGH` for one entry, Linux 4.20
    /// and later).
    static func neighbourRequest(for address: IPAddress, interfaceIndex: Int, sequence: UInt32) -> [UInt8] {
        let length = 16 + 12 + 4 + address.family.byteCount
        var message: [UInt8] = []
        appendRequest(of: length, to: &message) { fields in
            fields.putHeader(type: 30, length: length, sequence: sequence) // RTM_GETNEIGH
            // struct ndmsg { u8 family, pad1; u16 pad2; s32 ifindex; u16 state; u8 flags, type; }
            fields.put(UInt8(address.family == .ipv4 ? 2 : 10))
            fields.skip(3)
            fields.put(UInt32(truncatingIfNeeded: interfaceIndex))
            fields.skip(4)
            fields.put(attribute: 1, address) // NDA_DST
        }
        return message
    }

    /// What the kernel said of one neighbour entry.
    enum NeighbourAnswer: Equatable {
        /// The entry's `NUD_*` state bits.
        case state(UInt16)
        /// There is no entry (`ENOENT`), or the kernel cannot say (an older kernel, `EOPNOTSUPP`).
        case unknown
    }

    /// `NUD_PERMANENT | NUD_NOARP | NUD_REACHABLE | NUD_PROBE | NUD_STALE | NUD_DELAY`: states in
    /// which the kernel counts a next hop as good (`fib_good_nh`).
    static let validNeighbourStates: UInt16 = 0x80 | 0x40 | 0x02 | 0x10 | 0x04 | 0x08

    /// Reads the answer to the neighbour request with `sequence`; `nil` when the buffer holds none.
    static func neighbourAnswer(in buffer: UnsafeRawBufferPointer, sequence: UInt32) -> NeighbourAnswer? {
        var offset = 0
        let header = RtnetlinkParser.headerSize
        while offset + header <= buffer.count {
            let length = Int(buffer.loadU32(at: offset))
            guard length >= header, offset + length <= buffer.count else { return .unknown }
            let type = buffer.loadU16(at: offset + 4)
            let body = UnsafeRawBufferPointer(rebasing: buffer[(offset + header)..<(offset + length)])
            if buffer.loadU32(at: offset + 8) == sequence {
                switch type {
                case 2: // NLMSG_ERROR: no entry, or no support for a single get
                    guard body.count >= 4, body.loadU32(at: 0) != 0 else { return nil }
                    return .unknown
                case 28: // RTM_NEWNEIGH
                    guard body.count >= 12 else { return .unknown }
                    return .state(body.loadU16(at: 8))
                default:
                    break
                }
            }
            offset += RtnetlinkParser.align(length)
        }
        return nil
    }

    /// The kernel's answer, with how long until the route it names expires (an IPv6 route learnt
    /// from a router advertisement), after which the answer changes without any notification.
    struct Answer: Equatable {
        var lookup: RouteLookup
        /// Seconds until the chosen route has certainly expired; `nil` when it does not expire.
        var expiresIn: Double?
        /// The prefix length of the route that matched: 0 for a default route. Only a `fibmatch`
        /// answer (the table entry itself) tells; the ordinary answer describes the destination (/32).
        var prefixLength: UInt8?

        init(lookup: RouteLookup, expiresIn: Double? = nil, prefixLength: UInt8? = nil) {
            self.lookup = lookup
            self.expiresIn = expiresIn
            self.prefixLength = prefixLength
        }
    }

    /// Reads the answer to the request with `sequence` from one received buffer; `nil` when the
    /// buffer holds no answer to it (a stale reply to an earlier request, or nothing usable).
    /// A malformed answer is reported as a failed lookup (`EBADMSG`), never trusted.
    static func answer(in buffer: UnsafeRawBufferPointer, sequence: UInt32, ticksPerSecond: Double) -> Answer? {
        var offset = 0
        let header = RtnetlinkParser.headerSize
        while offset + header <= buffer.count {
            let length = Int(buffer.loadU32(at: offset))
            // Broken framing on the requests socket: the answer cannot be found, nor trusted.
            guard length >= header, offset + length <= buffer.count else { return Answer(lookup: .failed(errno: 74)) }
            let type = buffer.loadU16(at: offset + 4)
            let body = UnsafeRawBufferPointer(rebasing: buffer[(offset + header)..<(offset + length)])
            if buffer.loadU32(at: offset + 8) == sequence {
                switch type {
                case 2: // NLMSG_ERROR
                    guard body.count >= 4 else { return Answer(lookup: .failed(errno: 74)) }
                    let code = 0 &- Int32(bitPattern: body.loadU32(at: 0))
                    // errno 0 is an acknowledgement, which a lookup does not ask for: not an answer.
                    return code == 0 ? nil : Answer(lookup: RouteLookup(errno: code))
                case 24: // RTM_NEWROUTE
                    return route(body, ticksPerSecond: ticksPerSecond) ?? Answer(lookup: .failed(errno: 74)) // EBADMSG
                default:
                    break
                }
            }
            offset += RtnetlinkParser.align(length)
        }
        return nil
    }

    private static func route(_ body: UnsafeRawBufferPointer, ticksPerSecond: Double) -> Answer? {
        guard body.count >= 12 else { return nil }
        let family = body[0]
        guard family == 2 || family == 10 else { return nil }
        let prefixLength = body[1]
        var table = UInt32(body[4])
        var interfaceIndex: Int?
        var gateway: IPAddress?
        var source: IPAddress?
        var expiresIn: Double?
        var nextHops: [RouteLookup.NextHop] = []
        let addressSize = family == 2 ? 4 : 16
        do {
            try RtnetlinkParser.forEachAttribute(in: body, from: 12) { (attribute, value) throws(NetlinkParseError) in
                switch attribute {
                case 4 where value.count >= 4: interfaceIndex = Int(Int32(bitPattern: value.loadU32(at: 0))) // RTA_OIF
                case 5 where value.count == addressSize: gateway = IPAddress(networkOrder: value) // RTA_GATEWAY
                case 7 where value.count == addressSize: source = IPAddress(networkOrder: value) // RTA_PREFSRC
                case 9: nextHops = try RtnetlinkParser.nextHops(value, family: family) // RTA_MULTIPATH
                case 15 where value.count >= 4: table = value.loadU32(at: 0) // RTA_TABLE
                case 18 where value.count >= 2: // RTA_VIA (RFC 5549)
                    gateway = IPAddress(networkOrder: UnsafeRawBufferPointer(rebasing: value[2...]))
                case 12 where value.count >= 12: // RTA_CACHEINFO
                    // rta_expires counts whole ticks, rounded down: one more is when the route has
                    // certainly expired (waking a tick early finds it still there, with 0 left).
                    let ticks = Int32(bitPattern: value.loadU32(at: 8))
                    // (In Double: the kernel caps the value at Int32.max, where + 1 would trap.)
                    if ticks > 0 { expiresIn = (Double(ticks) + 1) / ticksPerSecond }
                default: break
                }
            }
        } catch {
            return nil
        }
        switch body[7] {
        case 1, 2, 3, 4, 5: // unicast, local, broadcast, anycast, multicast: traffic leaves
            // A table entry with several next hops (a fibmatch answer) names no single interface:
            // it stands for its first live leg, with every leg beside it.
            let leg = nextHops.first { !$0.isDead } ?? nextHops.first
            guard let interfaceIndex = interfaceIndex ?? leg?.interfaceIndex else {
                return Answer(lookup: .failed(errno: 74), expiresIn: expiresIn, prefixLength: prefixLength)
            }
            // Table 0: no route matched a lookup bound to an interface, and the kernel answered
            // as if the destination were on that link (it would ARP for it), which is no route
            // to the internet at all.
            if table == 0 { return Answer(lookup: .noRoute) }
            let route = RouteLookup.KernelRoute(
                interfaceIndex: interfaceIndex, gateway: gateway ?? leg?.gateway, source: source,
                table: table, isLocal: body[7] == 2,
                nextHops: nextHops.count > 1 ? nextHops : [])
            return Answer(lookup: .route(route), expiresIn: expiresIn, prefixLength: prefixLength)
        case 6: return Answer(lookup: .refused(.blackhole), prefixLength: prefixLength)
        case 7: return Answer(lookup: .refused(.unreachable), prefixLength: prefixLength)
        case 8: return Answer(lookup: .refused(.prohibit), prefixLength: prefixLength)
        case 9: return Answer(lookup: .noRoute, prefixLength: prefixLength) // throw
        default: return nil
        }
    }
}
// MARK: - Asking

extension RouteQuery {
    /// How long an answer may take; the kernel answers inside `send`, so waiting is only for the
    /// unexpected.
    static let answerTimeout: Duration = .seconds(5)
    /// `rta_expires` counts clock ticks (USER_HZ).
    private static let ticksPerSecond = Double(max(1, sysconf(Int32(_SC_CLK_TCK))))

    /// Where a connected socket to `destination` goes, for the monitored traffic (its protocol and
    /// destination port, with the first port of `ip_local_port_range` as source port): the source
    /// the kernel picks for it (``source(for:packet:sources:on:buffer:)``), then `ip route get
    /// DESTINATION from SOURCE ipproto P sport S dport D` for the route and the same with `fibmatch`
    /// for the table entry (its prefix, its legs, its lifetime). A refused connect is the kernel's
    /// verdict as it stands (its errno).
    static func connected(
        to destination: IPAddress, sources: borrowing SourceQuery, on requests: inout NetlinkSocket,
        buffer: UnsafeMutableRawBufferPointer
    ) throws(PathMonitorError) -> Answer {
        let packet = Packet(
            transport: sources.transport, sourcePort: sources.sourcePort(), destinationPort: sources.port)
        // A link-local destination names no link without a scope, and a socket cannot connect to
        // one without it (EINVAL): the kernel's lookup answers for it, as before.
        if destination.isLinkLocal { return try ask(destination, packet: packet, on: &requests, buffer: buffer) }
        let source: IPAddress
        switch try self.source(for: destination, packet: packet, sources: sources, on: &requests, buffer: buffer) {
        case .chosen(let chosen): source = chosen
        case .answered(let answer): return answer
        }
        // Both questions in one datagram: the kernel answers them in order, from one state.
        let (answer, entry) = try askWithEntry(
            destination, source: source, packet: packet, on: &requests, buffer: buffer)
        guard case .route(var route) = answer.lookup else { return answer }
        route.source = source
        if case .route(let matched) = entry.lookup { route.nextHops = matched.nextHops }
        // With `fib_multipath_use_neigh` the kernel leaves out a leg whose gateway's neighbour
        // entry is not valid (FAILED, INCOMPLETE): no route message says so, its neighbour does.
        if route.nextHops.count > 1, sources.multipathUsesNeighbours(for: destination.family) {
            route.nextHops = try withNeighbourVerdicts(route.nextHops, on: &requests, buffer: buffer)
        }
        return Answer(
            lookup: .route(route), expiresIn: entry.expiresIn ?? answer.expiresIn,
            prefixLength: entry.prefixLength)
    }

    /// The source a socket's first route gives it, or the kernel's verdict when there is none.
    enum SourceChoice: Equatable {
        case chosen(IPAddress)
        case answered(Answer)
    }

    /// The source address a client's socket for `packet` gets. A UDP `connect` (the sources) is
    /// routed as the kernel routes a UDP client's: from no source, with the port it was just given
    /// (IPv6 picks a source from any interface when no route matches without one). A TCP
    /// `connect` is routed from no source with no source port yet, and a UDP socket cannot show
    /// rules that match `ipproto tcp`: so for TCP the kernel is asked both ways from no source, in
    /// one datagram. When the answers agree, the rules do not tell the protocols apart before a
    /// source is chosen and the socket's source stands; when they differ, TCP's route decides, and
    /// its source (RTA_PREFSRC, the address `ip_route_connect` takes) is the one.
    static func source(
        for destination: IPAddress, packet: Packet, sources: borrowing SourceQuery, on requests: inout NetlinkSocket,
        buffer: UnsafeMutableRawBufferPointer
    ) throws(PathMonitorError) -> SourceChoice {
        let connected = sources.connect(to: destination)
        let fromProbe: SourceChoice =
            switch connected {
            case .success(let connection): .chosen(connection.source)
            case .failure(let failure): .answered(Answer(lookup: RouteLookup(errno: failure.errno)))
            }
        guard packet.transport == .tcp else { return fromProbe }
        let probePort: UInt16? = if case .success(let connection) = connected { connection.localPort } else { nil }
        let (asProbe, asTCP) = try askBoth(
            destination,
            Packet(transport: .udp, sourcePort: probePort, destinationPort: packet.destinationPort),
            Packet(transport: .tcp, sourcePort: nil, destinationPort: packet.destinationPort),
            on: &requests, buffer: buffer)
        guard asProbe.lookup != asTCP.lookup else { return fromProbe }
        guard case .route(let route) = asTCP.lookup, let source = route.source else { return .answered(asTCP) }
        return .chosen(source)
    }

    /// Where a socket bound to `interfaceIndex` (`SO_BINDTODEVICE`) would send the monitored traffic
    /// to `destination`: in two stages too, the source the kernel picks for that interface first
    /// (with no source port yet), then the route from it.
    static func bound(
        to destination: IPAddress, interfaceIndex: Int, sources: borrowing SourceQuery,
        on requests: inout NetlinkSocket,
        buffer: UnsafeMutableRawBufferPointer
    ) throws(PathMonitorError) -> Answer {
        var packet = Packet(transport: sources.transport, sourcePort: nil, destinationPort: sources.port)
        let first = try ask(
            destination, interfaceIndex: interfaceIndex, packet: packet, on: &requests, buffer: buffer)
        guard case .route(let route) = first.lookup, let source = route.source else { return first }
        packet.sourcePort = sources.sourcePort()
        let answer = try ask(
            destination, source: source, interfaceIndex: interfaceIndex, packet: packet, on: &requests,
            buffer: buffer)
        guard case .route(var sourced) = answer.lookup else { return answer }
        sourced.source = sourced.source ?? source
        guard destination.family == .ipv6 else { return Answer(lookup: .route(sourced)) }
        // Only IPv6 routes expire (router advertisements), and only the table entry says when.
        let entry = try ask(
            destination, source: source, interfaceIndex: interfaceIndex, packet: packet, fibMatch: true,
            on: &requests, buffer: buffer)
        return Answer(lookup: .route(sourced), expiresIn: entry.expiresIn)
    }

    /// `legs`, each whose gateway's neighbour entry the kernel does not count as valid marked dead
    /// (`fib_good_nh`: no entry counts as reachable).
    private static func withNeighbourVerdicts(
        _ legs: [RouteLookup.NextHop], on requests: inout NetlinkSocket, buffer: UnsafeMutableRawBufferPointer
    ) throws(PathMonitorError) -> [RouteLookup.NextHop] {
        var judged = legs
        for index in judged.indices where !judged[index].isDead {
            guard let gateway = judged[index].gateway else { continue }
            requests.sequence &+= 1
            let sequence = requests.sequence
            try requests.send(
                neighbourRequest(for: gateway, interfaceIndex: judged[index].interfaceIndex, sequence: sequence))
            let answer = try awaitAnswer(on: requests, buffer: buffer, what: "a neighbour lookup") { bytes in
                neighbourAnswer(in: bytes, sequence: sequence)
            }
            if case .state(let state) = answer, state & validNeighbourStates == 0 {
                judged[index].isDead = true
            }
        }
        return judged
    }

    /// One `RTM_GETROUTE` on the requests socket; replies to earlier requests are skipped.
    private static func ask(
        _ destination: IPAddress, source: IPAddress? = nil, interfaceIndex: Int? = nil, packet: Packet,
        fibMatch: Bool = false, on requests: inout NetlinkSocket, buffer: UnsafeMutableRawBufferPointer
    ) throws(PathMonitorError) -> Answer {
        requests.sequence &+= 1
        let sequence = requests.sequence
        try requests.send(
            request(
                for: destination, source: source, interfaceIndex: interfaceIndex, packet: packet, fibMatch: fibMatch,
                sequence: sequence))
        return try awaitAnswer(on: requests, buffer: buffer, what: "a route lookup") { bytes in
            answer(in: bytes, sequence: sequence, ticksPerSecond: ticksPerSecond)
        }
    }

    /// `ip route get DESTINATION from SOURCE ...` and the same with `fibmatch`, sent in one datagram
    /// (the kernel handles every request of a datagram in turn and queues each answer): one `send`
    /// for both, and no change can land between them that the other did not see.
    private static func askWithEntry(
        _ destination: IPAddress, source: IPAddress, packet: Packet, on requests: inout NetlinkSocket,
        buffer: UnsafeMutableRawBufferPointer
    ) throws(PathMonitorError) -> (route: Answer, entry: Answer) {
        try askPair(
            destination, (source, packet, false), (source, packet, true), on: &requests, buffer: buffer)
    }

    /// `ip route get DESTINATION` for two packets, from no source, in one datagram.
    private static func askBoth(
        _ destination: IPAddress, _ first: Packet, _ second: Packet, on requests: inout NetlinkSocket,
        buffer: UnsafeMutableRawBufferPointer
    ) throws(PathMonitorError) -> (Answer, Answer) {
        try askPair(destination, (nil, first, false), (nil, second, false), on: &requests, buffer: buffer)
    }

    /// Two lookups of `destination` in one datagram, answered in order from one state.
    private static func askPair(
        _ destination: IPAddress, _ first: (source: IPAddress?, packet: Packet, fibMatch: Bool),
        _ second: (source: IPAddress?, packet: Packet, fibMatch: Bool), on requests: inout NetlinkSocket,
        buffer: UnsafeMutableRawBufferPointer
    ) throws(PathMonitorError) -> (Answer, Answer) {
        requests.sequence &+= 2
        let firstSequence = requests.sequence &- 1
        let secondSequence = requests.sequence
        var both: [UInt8] = []
        both.reserveCapacity(192)
        appendRequest(
            to: &both, for: destination, source: first.source, interfaceIndex: nil, packet: first.packet,
            fibMatch: first.fibMatch, sequence: firstSequence)
        appendRequest(
            to: &both, for: destination, source: second.source, interfaceIndex: nil, packet: second.packet,
            fibMatch: second.fibMatch, sequence: secondSequence)
        try requests.send(both)
        let firstAnswer = try awaitAnswer(on: requests, buffer: buffer, what: "a route lookup") { bytes in
            answer(in: bytes, sequence: firstSequence, ticksPerSecond: ticksPerSecond)
        }
        let secondAnswer = try awaitAnswer(on: requests, buffer: buffer, what: "a route lookup") { bytes in
            answer(in: bytes, sequence: secondSequence, ticksPerSecond: ticksPerSecond)
        }
        return (firstAnswer, secondAnswer)
    }

    /// Reads the requests socket until `answer` finds the reply it waits for.
    private static func awaitAnswer<Found>(
        on requests: borrowing NetlinkSocket, buffer: UnsafeMutableRawBufferPointer, what: String,
        _ answer: (UnsafeRawBufferPointer) -> Found?
    ) throws(PathMonitorError) -> Found {
        while true {
            switch try requests.receive(into: buffer) {
            case .bytes(let count):
                if let found = answer(UnsafeRawBufferPointer(rebasing: buffer[0..<count])) { return found }
            case .overrun:
                continue
            case .wouldBlock:
                guard try requests.waitReadable(within: answerTimeout) else {
                    throw .dumpFailed("no answer to \(what) within \(answerTimeout)")
                }
            }
        }
    }
}
#endif
