#if os(Linux)
/// One rtnetlink message, reduced to what the snapshot store needs.
enum RtnetlinkMessage: Sendable, Equatable {
    case newLink(SystemSnapshot.Link)
    case deleteLink(index: Int)
    case newAddress(SystemSnapshot.Address)
    case deleteAddress(SystemSnapshot.Address)
    /// A default route change: one entry per next hop. `replaces` is set by NLM_F_REPLACE.
    case newDefaultRoute([SystemSnapshot.DefaultRoute], replaces: Bool)
    case deleteDefaultRoute([SystemSnapshot.DefaultRoute])
    /// A route the monitor does not keep (not default, not main table, not unicast): dropped, with
    /// the addresses it covers, since it may change the kernel's answer for those; `removed` for
    /// RTM_DELROUTE (announced before the kernel unlinks it), not for an addition.
    case ignoredRoute(RouteCoverage, removed: Bool)
    /// A policy rule of `family` changed (RTM_NEWRULE/DELRULE): nothing is kept, but the kernel's
    /// route lookups of that family may differ (`nil`: a message too short to say, both).
    case rule(IPAddress.Family?)
    /// A default route through a nexthop object (`RTA_NH_ID`): its legs are the object's, kept by
    /// the store, since a group changes with no route message. `replaces` is set by NLM_F_REPLACE.
    case newNexthopRoute(NexthopRoute, replaces: Bool)
    case deleteNexthopRoute(NexthopRoute)
    /// A nexthop object was made or changed (RTM_NEWNEXTHOP): the store keeps it, and the lookups
    /// of both families may differ (a group has no family, and a route of one family may use a
    /// nexthop of the other).
    case newNexthop(NexthopObject)
    /// A nexthop object was deleted (RTM_DELNEXTHOP): the kernel takes it out of its groups and
    /// deletes the routes that used it alone, with no route message.
    case deleteNexthop(id: UInt32)
    /// A nexthop message the parser could not read an id from: the lookups of both families may
    /// differ; nothing is kept.
    case nexthop
    /// A neighbour entry of this address changed (RTM_NEWNEIGH/DELNEIGH): when it is a gateway,
    /// the kernel may now prefer another router (IPv6 router reachability, IPv4 multipath with
    /// `fib_multipath_use_neigh`). Nothing is kept.
    case neighbour(IPAddress)
    /// A per-interface setting of `family` changed (RTM_NEWNETCONF/DELNETCONF), such as
    /// `ignore_routes_with_linkdown` or forwarding: the kernel's route choice for that family may
    /// differ (`nil`: a family the monitor does not look up, counted as both).
    case networkConfiguration(IPAddress.Family?)
    /// End of a dump (NLMSG_DONE); `interrupted` when the kernel flagged NLM_F_DUMP_INTR.
    case done(interrupted: Bool)
    /// NLMSG_ERROR: `errno` 0 is an acknowledgement.
    case error(errno: Int32)
    /// NLMSG_OVERRUN or a type the monitor does not use.
    case other(type: UInt16)
}

/// A nexthop object (`ip nexthop`): one way out, a group of other objects, or a blackhole.
struct NexthopObject: Sendable, Equatable {
    enum Kind: Sendable, Equatable {
        /// `via GATEWAY dev DEVICE` (or `dev DEVICE` alone).
        case leg(interfaceIndex: Int, gateway: IPAddress?)
        /// `group ID/ID...`: the members' ids, each once, in order.
        case group([UInt32])
        /// `blackhole`, or anything else that carries no traffic out (an FDB nexthop).
        case noLeg
    }

    var id: UInt32
    var kind: Kind
}

/// A default route that names a nexthop object (`ip route add default nhid ID`).
struct NexthopRoute: Sendable, Hashable {
    var family: IPAddress.Family
    var metric: UInt32
    var table: UInt32
    var nexthopID: UInt32
}

/// Which destinations a route covers: its prefix (`RTA_DST`, network order) and length.
struct RouteCoverage: Sendable, Equatable {
    /// `nil` for families the monitor does not look up (multicast routing, MPLS): covers nothing.
    var family: IPAddress.Family?
    var prefix: [UInt8]
    var length: UInt8
    /// A source-specific route (`from PREFIX`): it may apply to any destination.
    var sourceSpecific: Bool

    static let nothing = RouteCoverage(family: nil, prefix: [], length: 0, sourceSpecific: false)
    static func everything(_ family: IPAddress.Family) -> RouteCoverage {
        RouteCoverage(family: family, prefix: [], length: 0, sourceSpecific: false)
    }

    /// Whether a packet to `address` could be routed by this route.
    func covers(_ address: IPAddress) -> Bool {
        guard family == address.family else { return false }
        return sourceSpecific || address.isIn(prefix: prefix, length: Int(length))
    }
}

/// A parsed message with the header fields that tell dump replies from notifications.
struct RtnetlinkEnvelope: Sendable, Equatable {
    var sequence: UInt32
    var portID: UInt32
    var flags: UInt16
    var message: RtnetlinkMessage
}

/// Why bytes could not be parsed. Every case is recoverable: the source skips the message or, when
/// the stream itself cannot be trusted, resynchronizes with a fresh dump.
enum NetlinkParseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Fewer bytes than a netlink header.
    case truncatedHeader(offset: Int, available: Int)
    /// A header whose length is below the header size or beyond the buffer.
    case badLength(offset: Int, length: Int, available: Int)
    /// A known message type whose fixed body is shorter than its struct.
    case truncatedBody(type: UInt16, length: Int)
    /// An attribute whose length runs past its message.
    case badAttribute(type: UInt16, offset: Int)
    /// An address attribute of the wrong size for its family.
    case badAddress(type: UInt16, length: Int)

    /// The buffer's framing itself is broken, so messages after this one may have been lost: the
    /// state is re-read rather than trusted.
    var breaksFraming: Bool {
        switch self {
        case .truncatedHeader, .badLength: true
        case .truncatedBody, .badAttribute, .badAddress: false
        }
    }

    var description: String {
        switch self {
        case .truncatedHeader(let offset, let available):
            "truncated netlink header at \(offset) (\(available) bytes left)"
        case .badLength(let offset, let length, let available):
            "netlink length \(length) at \(offset) is invalid (\(available) bytes left)"
        case .truncatedBody(let type, let length): "message type \(type) too short (\(length) bytes)"
        case .badAttribute(let type, let offset): "attribute \(type) overruns its message at \(offset)"
        case .badAddress(let type, let length): "address attribute \(type) has \(length) bytes"
        }
    }
}
#endif
