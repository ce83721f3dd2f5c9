#if os(Linux)
/// The system snapshot kept up to date from rtnetlink messages: a value with no I/O, so its rules
/// are tested with message tables. Messages in; "changed or not" out.
///
/// It keeps only what evaluation needs: links, addresses, and main-table unicast default routes.
/// A route event for anything else is dropped in O(1) by the parser and never stored.
struct SnapshotStore: Sendable {
    private(set) var snapshot = SystemSnapshot()
    /// The nexthop objects (`ip nexthop`), by id: a handful on most hosts, none on many.
    private var nexthops: [UInt32: NexthopObject] = [:]
    /// The main-table default routes through a nexthop object; their legs are in
    /// `snapshot.defaultRoutes` as ``nexthopLegs``.
    private var nexthopRoutes: Set<NexthopRoute> = []
    /// The default routes ``nexthopRoutes`` resolve to now, as the snapshot holds them.
    private var nexthopLegs: Set<SystemSnapshot.DefaultRoute> = []

    /// Applies one message; returns whether the snapshot changed.
    mutating func apply(_ message: RtnetlinkMessage) -> Bool {
        switch message {
        case .newLink(var link):
            let previous = snapshot.links[link.index]
            if let previous, previous.name == link.name {
                // sysfs facts were read when the link appeared; a flag change does not repeat them.
                link.deviceType = link.deviceType ?? previous.deviceType
                link.isWireless = link.isWireless || previous.isWireless
            }
            var changed = previous != link
            snapshot.links[link.index] = link
            // The kernel flushes a downed link's IPv4 routes without RTM_DELROUTE and does not restore
            // them on link up, so forget them here or a later link-up would look routed.
            if previous?.isUp == true && !link.isUp {
                changed = snapshot.removeRoutes(throughInterface: link.index) || changed
            }
            // It deletes the nexthop objects through a link that goes down or loses carrier, with
            // no message at all (`nexthop_flush_dev`; checked on 6.18: a group loses the member).
            if (previous?.isUp ?? false && !link.isUp) || (previous?.hasCarrier ?? false && !link.hasCarrier) {
                changed = flushNexthops(throughInterface: link.index) || changed
            }
            return changed
        case .deleteLink(let index):
            let flushed = flushNexthops(throughInterface: index)
            return snapshot.removeLink(index: index) || flushed
        case .newAddress(let address):
            let previous = snapshot.addressTable[address.key]
            snapshot.upsertAddress(address)
            return previous != address
        case .deleteAddress(let address):
            guard snapshot.removeAddress(address) else { return false }
            // Likewise, when an interface loses its last IPv4 address the kernel disables IPv4 on it
            // and flushes its IPv4 routes without RTM_DELROUTE (checked on this kernel; removing one
            // of several addresses leaves the default route, and prefsrc routes are notified).
            let index = address.interfaceIndex
            if address.address.family == .ipv4,
                !snapshot.addressTable.values.contains(where: {
                    $0.interfaceIndex == index && $0.address.family == .ipv4
                })
            {
                snapshot.removeRoutes(throughInterface: index, family: .ipv4)
            }
            return true
        case .newDefaultRoute(let routes, let replaces):
            let before = snapshot.defaultRoutes
            if replaces, let first = routes.first {
                // NLM_F_REPLACE. A route updated in place is announced so too: an IPv6 router
                // advertisement that changes its router's preference (or `ip route replace` of the
                // same route). The other routes of that metric (the other routers') stay.
                let inPlace = routes.count == 1 && snapshot.defaultRoutes.contains(first)
                if !inPlace { replaceAll(family: first.family, table: first.table, metric: first.metric) }
            }
            snapshot.defaultRoutes.formUnion(routes)
            return snapshot.defaultRoutes != before
        case .deleteDefaultRoute(let routes):
            var changed = false
            for route in routes where !nexthopLegs.contains(route) {
                changed = snapshot.defaultRoutes.remove(route) != nil || changed
            }
            return changed
        case .newNexthopRoute(let route, let replaces):
            let before = snapshot.defaultRoutes
            // `nexthop_compat_mode` announces a group's change as a replace of each route using it.
            if replaces && !nexthopRoutes.contains(route) {
                replaceAll(family: route.family, table: route.table, metric: route.metric)
            }
            nexthopRoutes.insert(route)
            resolveNexthopRoutes()
            return snapshot.defaultRoutes != before
        case .deleteNexthopRoute(let route):
            guard nexthopRoutes.remove(route) != nil else { return false }
            let before = snapshot.defaultRoutes
            resolveNexthopRoutes()
            return snapshot.defaultRoutes != before
        case .newNexthop(let object):
            guard nexthops[object.id] != object else { return false }
            nexthops[object.id] = object
            let before = snapshot.defaultRoutes
            resolveNexthopRoutes()
            return snapshot.defaultRoutes != before
        case .deleteNexthop(let id):
            guard nexthops[id] != nil else { return false }
            let before = snapshot.defaultRoutes
            removeNexthops([id])
            return snapshot.defaultRoutes != before
        case .ignoredRoute, .rule, .nexthop, .neighbour, .networkConfiguration, .done, .error, .other:
            return false
        }
    }

    /// What NLM_F_REPLACE of a route not there does: the kernel replaced the route of that family,
    /// table and metric (IPv4's first alias, IPv6's first sibling set); which one, when there are
    /// several, no message says, so all of them go and the lookups say what is left.
    private mutating func replaceAll(family: IPAddress.Family, table: UInt32, metric: UInt32) {
        snapshot.defaultRoutes = snapshot.defaultRoutes.filter {
            !($0.family == family && $0.table == table && $0.metric == metric)
        }
        let replaced = nexthopRoutes.filter { $0.family == family && $0.table == table && $0.metric == metric }
        guard !replaced.isEmpty else { return }
        nexthopRoutes.subtract(replaced)
        resolveNexthopRoutes()
    }

    // MARK: Nexthop objects

    /// The legs of nexthop object `id`: its own, or its members'; none for a blackhole or an id
    /// not known.
    private func legs(ofNexthop id: UInt32) -> [(interfaceIndex: Int, gateway: IPAddress?)] {
        switch nexthops[id]?.kind {
        case .leg(let index, let gateway): [(index, gateway)]
        case .group(let members):
            members.compactMap { member in
                guard case .leg(let index, let gateway) = nexthops[member]?.kind else { return nil }
                return (index, gateway)
            }
        case .noLeg, nil: []
        }
    }

    /// Puts the legs of ``nexthopRoutes`` in the snapshot's default routes, in place of the
    /// ones they had. A few default routes through a few objects: cheap, and run only on nexthop
    /// messages and routes through nexthop objects.
    private mutating func resolveNexthopRoutes() {
        var legs = Set<SystemSnapshot.DefaultRoute>()
        for route in nexthopRoutes {
            for leg in self.legs(ofNexthop: route.nexthopID) {
                legs.insert(
                    SystemSnapshot.DefaultRoute(
                        family: route.family, interfaceIndex: leg.interfaceIndex, gateway: leg.gateway,
                        metric: route.metric, table: route.table))
            }
        }
        snapshot.defaultRoutes.subtract(nexthopLegs.subtracting(legs))
        snapshot.defaultRoutes.formUnion(legs)
        nexthopLegs = legs
    }

    /// What the kernel does when nexthop objects go: each leaves the groups it is in, a group left
    /// empty goes too, and the routes through any of them are deleted (without RTM_DELROUTE).
    private mutating func removeNexthops(_ ids: Set<UInt32>) {
        var gone = ids
        for id in ids { nexthops[id] = nil }
        for (id, object) in nexthops {
            guard case .group(let members) = object.kind, members.contains(where: gone.contains) else { continue }
            let left = members.filter { !gone.contains($0) }
            if left.isEmpty {
                nexthops[id] = nil
                gone.insert(id)
            } else {
                nexthops[id]?.kind = .group(left)
            }
        }
        nexthopRoutes = nexthopRoutes.filter { !gone.contains($0.nexthopID) }
        resolveNexthopRoutes()
    }

    /// Drops the nexthop objects through link `index`, as the kernel does when it goes down or
    /// loses carrier; returns whether the default routes changed.
    private mutating func flushNexthops(throughInterface index: Int) -> Bool {
        let through = nexthops.values.filter {
            if case .leg(let interfaceIndex, _) = $0.kind { interfaceIndex == index } else { false }
        }
        guard !through.isEmpty else { return false }
        let before = snapshot.defaultRoutes
        removeNexthops(Set(through.map(\.id)))
        return snapshot.defaultRoutes != before
    }

    /// Replaces the nameservers; returns whether they changed.
    mutating func setNameservers(_ nameservers: [IPAddress]) -> Bool {
        guard snapshot.nameservers != nameservers else { return false }
        snapshot.nameservers = nameservers
        return true
    }

    /// Forgets every kernel object before a full re-dump (nameservers are not the kernel's and
    /// stay). The store holds no route lookups: ``KernelQueries`` keeps and adds them.
    mutating func resetKernelState() {
        snapshot = SystemSnapshot(nameservers: snapshot.nameservers)
        nexthops = [:]
        nexthopRoutes = []
        nexthopLegs = []
    }

    // MARK: What a message means for the kernel's route lookups

    /// What the route lookups depend on beyond the store: the addresses they ask about and the
    /// gateways their answers named (with the default routes'). ``KernelQueries`` sets it after
    /// each refresh; a message about anything else asks the kernel nothing.
    struct LookupWatch: Equatable, Sendable {
        var addresses: [IPAddress]
        var gateways: Set<IPAddress> = []
    }

    /// One message applied, with what it means for the lookups.
    struct Absorbed: Equatable {
        /// The snapshot changed.
        var changed = false
        /// The families whose route choice may have changed: ask the kernel again for them before
        /// the next publish. An IPv4 route, address or rule cannot change an IPv6 answer.
        var asksLookups: LookupFamilies = []
        /// The message announces a change the kernel may finish after announcing it: IPv4's
        /// `fib_table_delete` sends RTM_DELROUTE before unlinking the route, a nexthop is
        /// announced deleted before its routes go, an address before the routes through it. A
        /// lookup made now can still find the old state, and nothing more will be sent, so the
        /// lookups of ``asksLookups`` are asked again shortly after.
        var announcesRemoval = false
        /// The routes a route's removal deleted (``RemovedRoute``); empty for other removals.
        var removedRoutes: [RemovedRoute] = []
        /// The link that went down or away, once per family (``LostLink``); empty for others.
        /// A removal that names neither has no end an answer shows.
        var lostLinks: [LostLink] = []
    }

    /// Link `index`, lost, for each family's lookups, with the addresses it has now.
    private func lostLinks(_ index: Int) -> [LostLink] {
        let addresses = Set(snapshot.addressTable.values.lazy.filter { $0.interfaceIndex == index }.map(\.address))
        return [IPAddress.Family.ipv4, .ipv6].map { LostLink(family: $0, index: index, addresses: addresses) }
    }

    /// Applies one message (as ``apply(_:)``) and says what it means for the lookups in `watch`:
    /// a link that changed, any address, a route of any table that covers a watched address,
    /// rules, nexthops and a watched gateway's neighbour entry ask again, for the families they
    /// can change; a batch of routes elsewhere, or a LAN host's neighbour entry, asks nothing.
    mutating func absorb(_ message: RtnetlinkMessage, watching watch: LookupWatch) -> Absorbed {
        switch message {
        case .newLink(let link):
            // A link message that changes nothing kept (statistics, an MTU) changes no route.
            let previous = snapshot.links[link.index]
            guard apply(message) else { return Absorbed() }
            // Going down with nothing coming up only removes (its routes, its addresses), and that
            // is done once no answer goes through it. Coming up adds what no answer shows yet.
            guard let previous else { return Absorbed(changed: true, asksLookups: .both, announcesRemoval: true) }
            let rose = (link.isUp && !previous.isUp) || (link.hasCarrier && !previous.hasCarrier)
            let fell = (previous.isUp && !link.isUp) || (previous.hasCarrier && !link.hasCarrier)
            guard fell && !rose else { return Absorbed(changed: true, asksLookups: .both, announcesRemoval: true) }
            // A link message keeps the link's addresses: read after it, they are the ones it had.
            return Absorbed(changed: true, asksLookups: .both, announcesRemoval: true, lostLinks: lostLinks(link.index))
        case .ignoredRoute(let coverage, let removed):
            // Only a route of the watched address's own family covers it. An addition (a local
            // route with each new address, a VPN's table) is announced once the kernel uses it.
            let covered = watch.addresses.filter(coverage.covers).map(\.family)
            guard removed, let family = coverage.family, !covered.isEmpty else {
                return Absorbed(asksLookups: LookupFamilies(covered))
            }
            return Absorbed(
                asksLookups: LookupFamilies(covered), announcesRemoval: true,
                removedRoutes: [RemovedRoute(family: family, prefixLength: coverage.length)])
        case .neighbour(let address):
            // Only a gateway's reachability moves the kernel's choice; every other neighbour (the
            // LAN's hosts, refreshed all the time) costs a set lookup. Both families: a route of
            // one may have a gateway of the other (`via inet6`, RFC 5549).
            return Absorbed(asksLookups: watch.gateways.contains(address) ? .both : [])
        case .networkConfiguration(let family):
            return Absorbed(asksLookups: LookupFamilies(family))
        case .newAddress(let address):
            // Announced after the kernel made them: no recheck needed.
            return Absorbed(changed: apply(message), asksLookups: LookupFamilies(address.address.family))
        case .newDefaultRoute(let routes, _):
            return Absorbed(changed: apply(message), asksLookups: LookupFamilies(routes.map(\.family)))
        case .done, .error, .other:
            return Absorbed()
        case .deleteLink(let index):
            // Read before the link and its addresses are removed.
            let lost = lostLinks(index)
            return Absorbed(changed: apply(message), asksLookups: .both, announcesRemoval: true, lostLinks: lost)
        case .deleteAddress(let address):
            // Counted even unchanged: a flag the store does not keep (deprecated, optimistic)
            // changes which source the kernel picks.
            return Absorbed(
                changed: apply(message), asksLookups: LookupFamilies(address.address.family), announcesRemoval: true)
        case .deleteDefaultRoute(let routes):
            return Absorbed(
                changed: apply(message), asksLookups: LookupFamilies(routes.map(\.family)), announcesRemoval: true,
                removedRoutes: routes.isEmpty ? [] : [RemovedRoute(routes)])
        case .rule(let family):
            // A rule is linked into (or out of) its family's list before it is announced, and a
            // lookup walks the list afresh: the answer read on the message is final.
            return Absorbed(asksLookups: LookupFamilies(family))
        case .nexthop, .newNexthop, .deleteNexthop:
            // Deleting a nexthop object announces it before its routes go; a group's new members
            // are a removal too when one left.
            return Absorbed(changed: apply(message), asksLookups: .both, announcesRemoval: true)
        case .newNexthopRoute(let route, _):
            return Absorbed(changed: apply(message), asksLookups: LookupFamilies(route.family))
        case .deleteNexthopRoute(let route):
            let legs = snapshot.defaultRoutes.filter {
                nexthopLegs.contains($0) && $0.family == route.family && $0.metric == route.metric
            }
            return Absorbed(
                changed: apply(message), asksLookups: LookupFamilies(route.family), announcesRemoval: true,
                removedRoutes: legs.isEmpty ? [] : [RemovedRoute(Array(legs))])
        }
    }
}

/// The address families whose route lookups are asked again (``KernelQueries``).
struct LookupFamilies: OptionSet, Hashable, Sendable {
    let rawValue: UInt8
    static let ipv4 = LookupFamilies(rawValue: 1)
    static let ipv6 = LookupFamilies(rawValue: 2)
    static let both: LookupFamilies = [.ipv4, .ipv6]

    init(rawValue: UInt8) { self.rawValue = rawValue }

    /// One family; `nil` (a message that does not say) is both.
    init(_ family: IPAddress.Family?) {
        switch family {
        case .ipv4: self = .ipv4
        case .ipv6: self = .ipv6
        case nil: self = .both
        }
    }

    /// Every family named; none named is none.
    init(_ families: some Sequence<IPAddress.Family>) {
        self = []
        for family in families { formUnion(LookupFamilies(family)) }
    }

    /// Whether `family`'s lookups are in the set.
    func includes(_ family: IPAddress.Family) -> Bool { contains(LookupFamilies(family)) }
}
#endif
