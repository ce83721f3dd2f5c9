#if os(Linux)
import CoreMetrics

/// What the netlink engine counts, per source (one engine per namespace): the notifications it
/// reads, the ones it cannot parse, its full re-reads and the questions it asks the kernel.
///
/// Every counter is made once, when the engine is made; counting a message is a switch and one
/// increment, with no allocation, so a route storm costs what it did.
struct NetlinkEngineMetrics: Sendable {
    static let messagesLabel = "netreach_netlink_messages_total"
    static let malformedLabel = "netreach_netlink_malformed_messages_total"
    static let resyncsLabel = "netreach_netlink_resyncs_total"
    static let routeLookupsLabel = "netreach_route_lookups_total"
    static let snapshotsLabel = "netreach_netlink_snapshots_published_total"

    /// The `kind` of a notification: what object changed.
    enum MessageKind: String, CaseIterable {
        case link, address, route, rule, neighbour, netconf, other
    }

    /// The `reason` of a full re-read.
    enum ResyncReason: String, CaseIterable {
        /// The socket's buffer overflowed (ENOBUFS): notifications were lost.
        case overrun
        /// A message broke the stream's framing: what follows cannot be trusted.
        case malformed
        /// An earlier re-read or `poll` failed; this one tries again.
        case retry
    }

    /// Per ``MessageKind``, in `allCases` order (a switch picks one: no array is built per event).
    private let messages:
        (
            link: Counter, address: Counter, route: Counter, rule: Counter, neighbour: Counter, netconf: Counter,
            other: Counter
        )
    private let resyncs: (overrun: Counter, malformed: Counter, retry: Counter)
    let malformed: Counter
    /// One per `RTM_GETROUTE` question (a lookup the way a connected or bound socket gets its route).
    let routeLookups: Counter
    /// Snapshots handed to the monitors: wake-ups that changed what the kernel says.
    let snapshotsPublished: Counter

    init(factory: any MetricsFactory) {
        func message(_ kind: MessageKind) -> Counter {
            Counter(label: Self.messagesLabel, dimensions: [("kind", kind.rawValue)], factory: factory)
        }
        func resync(_ reason: ResyncReason) -> Counter {
            Counter(label: Self.resyncsLabel, dimensions: [("reason", reason.rawValue)], factory: factory)
        }
        messages = (
            message(.link), message(.address), message(.route), message(.rule), message(.neighbour),
            message(.netconf), message(.other)
        )
        resyncs = (resync(.overrun), resync(.malformed), resync(.retry))
        malformed = Counter(label: Self.malformedLabel, factory: factory)
        routeLookups = Counter(label: Self.routeLookupsLabel, factory: factory)
        snapshotsPublished = Counter(label: Self.snapshotsLabel, factory: factory)
    }

    /// Counts a notification read from the events socket.
    func received(_ message: RtnetlinkMessage) {
        switch Self.kind(of: message) {
        case .link: messages.link.increment()
        case .address: messages.address.increment()
        case .route: messages.route.increment()
        case .rule: messages.rule.increment()
        case .neighbour: messages.neighbour.increment()
        case .netconf: messages.netconf.increment()
        case .other: messages.other.increment()
        }
    }

    /// Counts a full re-read of the kernel's state.
    func resynced(_ reason: ResyncReason) {
        switch reason {
        case .overrun: resyncs.overrun.increment()
        case .malformed: resyncs.malformed.increment()
        case .retry: resyncs.retry.increment()
        }
    }

    static func kind(of message: RtnetlinkMessage) -> MessageKind {
        switch message {
        case .newLink, .deleteLink: .link
        case .newAddress, .deleteAddress: .address
        case .newDefaultRoute, .deleteDefaultRoute, .newNexthopRoute, .deleteNexthopRoute, .ignoredRoute: .route
        case .rule, .nexthop, .newNexthop, .deleteNexthop: .rule
        case .neighbour: .neighbour
        case .networkConfiguration: .netconf
        case .done, .error, .other: .other
        }
    }
}
#endif
