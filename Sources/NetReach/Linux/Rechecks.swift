#if os(Linux)
/// A route the kernel announced deleted (`RTM_DELROUTE`). IPv4's `fib_table_delete` sends the
/// message before it unlinks the route, so a lookup made on the message may still find it; once
/// no answer can be it, its removal has nothing left to change.
struct RemovedRoute: Equatable, Sendable {
    /// One way out of the route: an answer through none of them is another route.
    struct Leg: Hashable, Sendable {
        var interfaceIndex: Int
        var gateway: IPAddress?
    }

    var family: IPAddress.Family
    /// The destination prefix's length: a `fibmatch` answer with another length is another route.
    var prefixLength: UInt8
    /// The routing table, when the message said (a default route of `main`).
    var table: UInt32?
    /// Its legs, each once, when the message said; `nil`: unknown (a route the store does not
    /// keep). A few at most: a list, scanned, not a set to build and hash on every deletion.
    var legs: [Leg]?

    /// A default route of the store's, one message's legs.
    init(_ routes: [SystemSnapshot.DefaultRoute]) {
        family = routes.first?.family ?? .ipv4
        prefixLength = 0
        table = routes.first?.table
        var legs: [Leg] = []
        for route in routes {
            let leg = Leg(interfaceIndex: route.interfaceIndex, gateway: route.gateway)
            if !legs.contains(leg) { legs.append(leg) }
        }
        self.legs = legs
    }

    /// A route the store does not keep: only its family and prefix length are known.
    init(family: IPAddress.Family, prefixLength: UInt8) {
        self.family = family
        self.prefixLength = prefixLength
    }

    /// Whether `answer` (of this route's family) may be this route, still linked. Unknown is yes:
    /// an answer without the table entry's prefix length (a bound lookup, a link-local one), a
    /// refusal when this route's type is unknown, a failed lookup.
    func mayBe(_ answer: RouteQuery.Answer) -> Bool {
        switch answer.lookup {
        case .noRoute:
            // Still linked, it would have matched.
            return false
        case .refused:
            // A default route of the store's is unicast; a refusing route is not.
            return legs == nil
        case .failed:
            return true
        case .route(let route):
            guard let length = answer.prefixLength else { return true }
            guard length == prefixLength else { return false }
            if let table, route.table != table { return false }
            guard let legs else { return true }
            if legs.contains(Leg(interfaceIndex: route.interfaceIndex, gateway: route.gateway)) { return true }
            return route.nextHops.contains {
                legs.contains(Leg(interfaceIndex: $0.interfaceIndex, gateway: $0.gateway))
            }
        }
    }
}

/// A link that went down or away, for one family's lookups. The kernel announces it before it
/// flushes the routes through it and removes its addresses (`__dev_notify_flags` sends
/// `RTM_NEWLINK`, then runs the `NETDEV_DOWN` notifiers), so a lookup made on the message may
/// still go through it; its going only removes, so an answer through neither it nor one of its
/// addresses cannot change when it is done.
struct LostLink: Equatable, Sendable {
    var family: IPAddress.Family
    var index: Int
    /// Its addresses when the message came: a source the kernel picked from them goes with it.
    var addresses: Set<IPAddress>

    /// Whether `answer` may still go through the link, or come from one of its addresses.
    func mayUse(_ answer: RouteQuery.Answer) -> Bool {
        switch answer.lookup {
        case .noRoute, .refused:
            // A route through the link, still there, would have been chosen over no route; a
            // refusing route or rule has no link.
            return false
        case .failed:
            return true
        case .route(let route):
            if route.interfaceIndex == index || route.nextHops.contains(where: { $0.interfaceIndex == index }) {
                return true
            }
            return route.source.map(addresses.contains) ?? false
        }
    }
}

/// The removals the messages since the last lookups announced, which the kernel may finish after
/// announcing them.
struct AnnouncedRemovals: Equatable, Sendable {
    /// Families with a removal no answer can show finished: a link coming up or changing, an
    /// address, a nexthop object, or messages lost. Asked again at every recheck.
    var opaque: LookupFamilies = []
    /// Deleted routes: asked again only while some answer may still be one of them.
    var routes: [RemovedRoute] = []
    /// Links gone down or away: asked again only while some answer may still use one.
    var links: [LostLink] = []

    var isEmpty: Bool { opaque.isEmpty && routes.isEmpty && links.isEmpty }

    /// The families with a removal.
    var families: LookupFamilies {
        opaque.union(LookupFamilies(routes.map(\.family))).union(LookupFamilies(links.map(\.family)))
    }

    /// Adds what one message announced: the routes or link it named, else its families.
    mutating func add(_ absorbed: SnapshotStore.Absorbed) {
        guard absorbed.announcesRemoval else { return }
        if !absorbed.removedRoutes.isEmpty {
            absorbed.removedRoutes.forEach { insert($0) }
        } else if !absorbed.lostLinks.isEmpty {
            absorbed.lostLinks.forEach { insert($0) }
        } else {
            opaque.formUnion(absorbed.asksLookups)
        }
    }

    /// These removals and `other`'s deleted routes and lost links (not its opaque families).
    func withRoutesAndLinks(of other: AnnouncedRemovals) -> AnnouncedRemovals {
        var merged = self
        other.routes.forEach { merged.insert($0) }
        other.links.forEach { merged.insert($0) }
        return merged
    }

    /// Keeps each table entry once: a route deleted again (a flapping route is deleted every time
    /// it goes) widens the entry kept to the new legs, which answers `mayBe` as either would. So
    /// the list stays as long as the distinct routes removed, however long the flapping lasts.
    private mutating func insert(_ route: RemovedRoute) {
        guard
            let index = routes.firstIndex(where: {
                $0.family == route.family && $0.prefixLength == route.prefixLength && $0.table == route.table
            })
        else { return routes.append(route) }
        if let kept = routes[index].legs, let legs = route.legs {
            routes[index].legs = kept + legs.filter { !kept.contains($0) }
        } else {
            routes[index].legs = nil
        }
    }

    /// Keeps each link once per family, with every address it was seen to lose: `mayUse` answers
    /// as either would.
    private mutating func insert(_ link: LostLink) {
        guard let index = links.firstIndex(where: { $0.family == link.family && $0.index == link.index }) else {
            return links.append(link)
        }
        links[index].addresses.formUnion(link.addresses)
    }

    /// Whether an answer of `family` may show one of these removals unfinished.
    func mayBeUnfinished(_ answer: RouteQuery.Answer, _ family: IPAddress.Family) -> Bool {
        routes.contains { $0.family == family && $0.mayBe(answer) }
            || links.contains { $0.family == family && $0.mayUse(answer) }
    }

    /// Drops the routes and links of the families `asked` where no answer may show them
    /// unfinished (not in `stillSeen`); those of a family not asked stay.
    mutating func dropFinished(stillSeen: LookupFamilies, asked: LookupFamilies) {
        routes.removeAll { asked.includes($0.family) && !stillSeen.includes($0.family) }
        links.removeAll { asked.includes($0.family) && !stillSeen.includes($0.family) }
    }
}

/// When the lookups are asked again after a removal: 20 ms and 200 ms after the lookups that
/// read it, for as long as the removal may not be finished. An opaque removal
/// (``AnnouncedRemovals``) gets both rechecks; a deleted route none of the answers can be any
/// more, or a lost link none goes through, gets none, and one that a recheck no longer finds gets
/// no further one. A removal during the rechecks starts them again, and any lookups put the next
/// one off by its delay.
struct RecheckSchedule: Equatable, Sendable {
    static let delays: [Duration] = [.milliseconds(20), .milliseconds(200)]

    /// The families the next recheck asks again.
    private(set) var families: LookupFamilies = []
    /// When it is due; `nil`: none is.
    private(set) var dueAt: ContinuousClock.Instant?
    /// The removals still being rechecked.
    private(set) var pending = AnnouncedRemovals()
    /// How far along the rechecks are (an index into ``delays``; at its end, none is due).
    private var stage = RecheckSchedule.delays.count

    /// The deleted routes and lost links the answers must be compared with: those still being
    /// rechecked, and `removals`' new ones.
    func toCompare(with removals: AnnouncedRemovals) -> AnnouncedRemovals {
        let new = AnnouncedRemovals(routes: removals.routes, links: removals.links)
        guard stage < Self.delays.count else { return new }
        return AnnouncedRemovals(routes: pending.routes, links: pending.links).withRoutesAndLinks(of: new)
    }

    /// Updates the schedule after lookups made at `now` for the families `asked`: `removals` were
    /// announced since the last ones, and `stillSeen` are the families where some answer may still
    /// show one of ``toCompare(with:)`` unfinished.
    mutating func lookupsMade(
        at now: ContinuousClock.Instant, asked: LookupFamilies, removals: AnnouncedRemovals, stillSeen: LookupFamilies
    ) {
        let inProgress = stage < Self.delays.count
        if !removals.isEmpty {
            var next = toCompare(with: removals)
            next.opaque = (inProgress ? pending.opaque : []).union(removals.opaque)
            pending = next
            stage = 0
        } else if let dueAt, now >= dueAt {
            stage += 1
        }
        // A deleted route no answer of its (asked) family can be is gone, or never mattered; the
        // same for a link no answer goes through.
        pending.dropFinished(stillSeen: stillSeen, asked: asked)
        families = pending.families
        if families.isEmpty || stage >= Self.delays.count {
            stage = Self.delays.count
            families = []
            pending = AnnouncedRemovals()
        }
        // A recheck is due its delay after the last lookups: a removal finished later is still
        // caught, and changes closer together than the delay are not followed by rechecks between
        // them (each would wake the engine for a refresh of its own).
        dueAt = stage < Self.delays.count ? now + Self.delays[stage] : nil
    }
}
#endif
