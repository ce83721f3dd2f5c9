#if os(Linux)
/// Parses the bytes of one `recv` from a NETLINK_ROUTE socket. A pure function: no system calls,
/// every read bounds-checked, so a truncated, garbage or lying buffer yields an error, never a
/// crash or a read past the end.
///
/// Netlink uses host byte order; addresses inside attributes are in network order.
enum RtnetlinkParser {
    // Values from <linux/netlink.h>, <linux/rtnetlink.h>, <linux/if_link.h>, <linux/if_addr.h>;
    // kept here so the parser is plain Swift over bytes.
    static let headerSize = 16
    static let messageDone: UInt16 = 3, messageError: UInt16 = 2, messageOverrun: UInt16 = 4
    static let newLink: UInt16 = 16, deleteLink: UInt16 = 17
    static let newAddress: UInt16 = 20, deleteAddress: UInt16 = 21
    static let newRoute: UInt16 = 24, deleteRoute: UInt16 = 25
    static let newRule: UInt16 = 32, deleteRule: UInt16 = 33
    static let newNexthop: UInt16 = 104, deleteNexthop: UInt16 = 105
    static let newNeighbour: UInt16 = 28, deleteNeighbour: UInt16 = 29
    static let newNetconf: UInt16 = 80, deleteNetconf: UInt16 = 81
    static let flagMulti: UInt16 = 0x2, flagDumpInterrupted: UInt16 = 0x10, flagReplace: UInt16 = 0x100

    /// Parses every message in `bytes`. A message whose body is malformed becomes a `.failure` and
    /// parsing goes on with the next; a header that cannot be trusted ends the buffer with a
    /// `.failure`, since the next message's start is then unknown.
    static func parse(_ bytes: UnsafeRawBufferPointer) -> [Result<RtnetlinkEnvelope, NetlinkParseError>] {
        Array(Messages(bytes))
    }

    /// ``parse(_:)-(UnsafeRawBufferPointer)`` one message at a time, with no array between: how the
    /// engine reads every notification and dump. `bytes` must outlive the iteration.
    struct Messages: Sequence, IteratorProtocol {
        private let bytes: UnsafeRawBufferPointer
        private var offset = 0

        init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

        mutating func next() -> Result<RtnetlinkEnvelope, NetlinkParseError>? {
            guard offset < bytes.count else { return nil }
            let available = bytes.count - offset
            guard available >= headerSize else {
                defer { offset = bytes.count }
                return .failure(.truncatedHeader(offset: offset, available: available))
            }
            let length = Int(bytes.loadU32(at: offset))
            guard length >= headerSize, length <= available else {
                defer { offset = bytes.count }
                return .failure(.badLength(offset: offset, length: length, available: available))
            }
            defer { offset += align(length) }
            let type = bytes.loadU16(at: offset + 4)
            let flags = bytes.loadU16(at: offset + 6)
            let body = UnsafeRawBufferPointer(rebasing: bytes[(offset + headerSize)..<(offset + length)])
            let parsed = Result { () throws(NetlinkParseError) in try parseBody(type: type, flags: flags, body) }
            return parsed.map {
                RtnetlinkEnvelope(
                    sequence: bytes.loadU32(at: offset + 8), portID: bytes.loadU32(at: offset + 12),
                    flags: flags, message: $0)
            }
        }
    }

    /// Convenience for tests and fixtures.
    static func parse(_ bytes: [UInt8]) -> [Result<RtnetlinkEnvelope, NetlinkParseError>] {
        bytes.withUnsafeBytes { parse($0) }
    }

    private static func parseBody(
        type: UInt16, flags: UInt16, _ body: UnsafeRawBufferPointer
    ) throws(NetlinkParseError) -> RtnetlinkMessage {
        switch type {
        case messageDone:
            return .done(interrupted: flags & flagDumpInterrupted != 0)
        case messageError:
            guard body.count >= 4 else { throw .truncatedBody(type: type, length: body.count) }
            // Wrapping negation: a lying kernel buffer with Int32.min must not trap.
            return .error(errno: 0 &- Int32(bitPattern: body.loadU32(at: 0)))
        case newLink, deleteLink:
            return try parseLink(type: type, body)
        case newAddress, deleteAddress:
            return try parseAddress(type: type, body)
        case newRoute, deleteRoute:
            return try parseRoute(type: type, replaces: flags & flagReplace != 0, body)
        case newRule, deleteRule:
            // Nothing to keep: the kernel's answer to the next route lookup says what changed.
            // A rule belongs to one family's rule list (struct fib_rule_hdr { u8 family; ... }).
            return .rule(lookupFamily(body.first))
        case newNexthop, deleteNexthop:
            // Deleting a nexthop object removes its routes with only RTM_DELNEXTHOP. A group is
            // AF_UNSPEC, and an IPv6 route may use an IPv4 nexthop (RFC 5549): both families.
            return parseNexthop(type: type, body)
        case newNeighbour, deleteNeighbour:
            return try parseNeighbour(type: type, body)
        case newNetconf, deleteNetconf:
            // struct netconfmsg { u8 family; }
            return .networkConfiguration(lookupFamily(body.first))
        default:
            return .other(type: type)
        }
    }

    /// The family a message's first byte names, when the monitor looks that family up; `nil`
    /// otherwise (a message too short to say counts for both families).
    private static func lookupFamily(_ family: UInt8?) -> IPAddress.Family? {
        switch family {
        case 2: .ipv4 // AF_INET
        case 10: .ipv6 // AF_INET6
        default: nil
        }
    }

    // struct ifinfomsg { u8 family; u8 pad; u16 type; s32 index; u32 flags; u32 change; }
    private static func parseLink(
        type: UInt16, _ body: UnsafeRawBufferPointer
    ) throws(NetlinkParseError) -> RtnetlinkMessage {
        guard body.count >= 16 else { throw .truncatedBody(type: type, length: body.count) }
        // Only AF_UNSPEC messages describe the link itself. AF_BRIDGE ones describe bridge ports:
        // a port leaving its bridge sends an AF_BRIDGE RTM_DELLINK while the link lives on
        // (seen on this kernel with `ip link set v0 nomaster`).
        guard body[0] == 0 else { return .other(type: type) }
        let index = Int(Int32(bitPattern: body.loadU32(at: 4)))
        if type == deleteLink { return .deleteLink(index: index) }
        let hardwareType = body.loadU16(at: 2)
        let flags = body.loadU32(at: 8)
        var name = ""
        var kind: String?
        try forEachAttribute(in: body, from: 16) { (attribute, value) throws(NetlinkParseError) in
            switch attribute {
            case 3: name = string(value) // IFLA_IFNAME
            case 18: // IFLA_LINKINFO (nested)
                try forEachAttribute(in: value, from: 0) { (nested, nestedValue) throws(NetlinkParseError) in
                    if nested == 1 { kind = string(nestedValue) } // IFLA_INFO_KIND
                }
            default: break
            }
        }
        // The kernel always names a link; a nameless one cannot be classified or shown.
        guard !name.isEmpty else { return .other(type: type) }
        return .newLink(
            SystemSnapshot.Link(
                index: index, name: name,
                isUp: flags & 0x1 != 0, // IFF_UP
                hasCarrier: flags & 0x40 != 0, // IFF_RUNNING: LOWER_UP alone can still mean NO-CARRIER
                isLoopback: flags & 0x8 != 0, // IFF_LOOPBACK
                hardwareType: hardwareType, kind: kind))
    }

    // struct ifaddrmsg { u8 family; u8 prefixlen; u8 flags; u8 scope; u32 index; }
    private static func parseAddress(
        type: UInt16, _ body: UnsafeRawBufferPointer
    ) throws(NetlinkParseError) -> RtnetlinkMessage {
        guard body.count >= 8 else { throw .truncatedBody(type: type, length: body.count) }
        let family = body[0]
        guard family == 2 || family == 10 else { return .other(type: type) } // AF_INET, AF_INET6
        var flags = UInt32(body[2])
        var local: IPAddress?
        var peer: IPAddress?
        try forEachAttribute(in: body, from: 8) { (attribute, value) throws(NetlinkParseError) in
            switch attribute {
            case 1: peer = try ipAddress(value, family: family, attribute: attribute) // IFA_ADDRESS
            case 2: local = try ipAddress(value, family: family, attribute: attribute) // IFA_LOCAL
            case 8 where value.count >= 4: flags = value.loadU32(at: 0) // IFA_FLAGS (u32)
            default: break
            }
        }
        // IFA_LOCAL is the local end on point-to-point links; IFA_ADDRESS otherwise.
        guard let ip = local ?? peer else { return .other(type: type) }
        let address = SystemSnapshot.Address(
            interfaceIndex: Int(body.loadU32(at: 4)), address: ip, prefixLength: body[1], scope: body[3],
            // IFA_F_TENTATIVE without IFA_F_OPTIMISTIC: an optimistic address is a source the kernel uses.
            isTentative: flags & 0x40 != 0 && flags & 0x04 == 0, isDADFailed: flags & 0x08 != 0)
        return type == newAddress ? .newAddress(address) : .deleteAddress(address)
    }

    // struct ndmsg { u8 family; u8 pad1; u16 pad2; s32 ifindex; u16 state; u8 flags; u8 type; }
    private static func parseNeighbour(
        type: UInt16, _ body: UnsafeRawBufferPointer
    ) throws(NetlinkParseError) -> RtnetlinkMessage {
        guard body.count >= 12 else { throw .truncatedBody(type: type, length: body.count) }
        let family = body[0]
        // AF_BRIDGE entries (a bridge's forwarding database) share the group: not neighbours of ours.
        guard family == 2 || family == 10 else { return .other(type: type) }
        var destination: IPAddress?
        try forEachAttribute(in: body, from: 12) { (attribute, value) throws(NetlinkParseError) in
            if attribute == 1 { destination = try ipAddress(value, family: family, attribute: attribute) } // NDA_DST
        }
        guard let destination else { return .other(type: type) }
        return .neighbour(destination)
    }

    // struct nhmsg { u8 nh_family; u8 nh_scope; u8 nh_protocol; u8 resvd; u32 nh_flags; }
    private static func parseNexthop(type: UInt16, _ body: UnsafeRawBufferPointer) -> RtnetlinkMessage {
        guard body.count >= 8 else { return .nexthop }
        let family = body[0]
        var id: UInt32?
        var members: [UInt32] = []
        var isGroup = false
        var interfaceIndex: Int?
        var gateway: IPAddress?
        var carriesNothing = false
        // Attributes that cannot be read keep nothing but still ask the lookups again (`.nexthop`).
        let read = Result { () throws(NetlinkParseError) in
            try forEachAttribute(in: body, from: 8) { (attribute, value) throws(NetlinkParseError) in
                switch attribute {
                case 1 where value.count >= 4: id = value.loadU32(at: 0) // NHA_ID
                case 2: // NHA_GROUP: struct nexthop_grp { u32 id; u8 weight; u8 weight_high; u16 resvd2; }
                    isGroup = true
                    var offset = 0
                    while offset + 8 <= value.count {
                        let member = value.loadU32(at: offset)
                        if !members.contains(member) { members.append(member) }
                        offset += 8
                    }
                case 4, 11: carriesNothing = true // NHA_BLACKHOLE, NHA_FDB (bridge forwarding only)
                case 5 where value.count >= 4: interfaceIndex = Int(Int32(bitPattern: value.loadU32(at: 0))) // NHA_OIF
                case 6 where family == 2 || family == 10: // NHA_GATEWAY, of the nexthop's family
                    gateway = try ipAddress(value, family: family, attribute: attribute)
                default: break
                }
            }
        }
        guard case .success = read, let id else { return .nexthop }
        if type == deleteNexthop { return .deleteNexthop(id: id) }
        let kind: NexthopObject.Kind =
            if carriesNothing {
                .noLeg
            } else if isGroup {
                .group(members)
            } else if let interfaceIndex {
                .leg(interfaceIndex: interfaceIndex, gateway: gateway)
            } else {
                .noLeg
            }
        return .newNexthop(NexthopObject(id: id, kind: kind))
    }

    // struct rtmsg { u8 family, dst_len, src_len, tos, table, protocol, scope, type; u32 flags; }
    private static func parseRoute(
        type: UInt16, replaces: Bool, _ body: UnsafeRawBufferPointer
    ) throws(NetlinkParseError) -> RtnetlinkMessage {
        guard body.count >= 12 else { throw .truncatedBody(type: type, length: body.count) }
        let family = body[0]
        let removed = type == deleteRoute
        guard let routeFamily = lookupFamily(family) else { return .ignoredRoute(.nothing, removed: removed) }
        // The O(1) exit that keeps a million-route table cheap: only unicast (type 1) default
        // routes with no source prefix are kept. Of the others only the addresses they cover are
        // read, so the reader can tell whether the kernel's answers for its lookups may change.
        guard body[1] == 0, body[2] == 0, body[7] == 1 else {
            var destination: [UInt8] = []
            try forEachAttribute(in: body, from: 12) { (attribute, value) throws(NetlinkParseError) in
                if attribute == 1 { destination = Array(value) } // RTA_DST
            }
            return .ignoredRoute(
                RouteCoverage(family: routeFamily, prefix: destination, length: body[1], sourceSpecific: body[2] != 0),
                removed: removed)
        }
        var table = UInt32(body[4])
        var interfaceIndex: Int?
        var gateway: IPAddress?
        var metric: UInt32 = 0
        var hops: [(Int, IPAddress?)] = []
        var nexthopID: UInt32?
        try forEachAttribute(in: body, from: 12) { (attribute, value) throws(NetlinkParseError) in
            switch attribute {
            case 4 where value.count >= 4: interfaceIndex = Int(value.loadU32(at: 0)) // RTA_OIF
            case 5: gateway = try ipAddress(value, family: family, attribute: attribute) // RTA_GATEWAY
            case 6 where value.count >= 4: metric = value.loadU32(at: 0) // RTA_PRIORITY
            case 15 where value.count >= 4: table = value.loadU32(at: 0) // RTA_TABLE
            case 18 where value.count >= 2: // RTA_VIA
                gateway = IPAddress(networkOrder: UnsafeRawBufferPointer(rebasing: value[2...]))
            case 9: hops = try nextHops(value, family: family).map { ($0.interfaceIndex, $0.gateway) } // RTA_MULTIPATH
            case 30 where value.count >= 4: nexthopID = value.loadU32(at: 0) // RTA_NH_ID
            default: break
            }
        }
        guard table == SystemSnapshot.DefaultRoute.mainTable else {
            return .ignoredRoute(.everything(routeFamily), removed: removed)
        }
        // Through a nexthop object: its legs are the object's (the expanded legs `nexthop_compat_mode`
        // adds are those of the moment, and a group changes with no route message).
        if let nexthopID {
            let route = NexthopRoute(family: routeFamily, metric: metric, table: table, nexthopID: nexthopID)
            return type == newRoute ? .newNexthopRoute(route, replaces: replaces) : .deleteNexthopRoute(route)
        }
        if hops.isEmpty, let interfaceIndex { hops = [(interfaceIndex, gateway)] }
        let routes = hops.map { hop in
            SystemSnapshot.DefaultRoute(
                family: routeFamily, interfaceIndex: hop.0, gateway: hop.1, metric: metric, table: table)
        }
        guard !routes.isEmpty else { return .ignoredRoute(.everything(routeFamily), removed: removed) }
        return type == newRoute ? .newDefaultRoute(routes, replaces: replaces) : .deleteDefaultRoute(routes)
    }

    private static func string(_ value: UnsafeRawBufferPointer) -> String {
        String(decoding: value.prefix { $0 != 0 }, as: UTF8.self)
    }
}

#endif
