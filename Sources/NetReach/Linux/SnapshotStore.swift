#if os(Linux)
/// The system snapshot kept up to date from rtnetlink messages: a value with no I/O, so its rules
/// are tested with message tables. Messages in; "changed or not" out.
///
/// It keeps only what evaluation needs: links, addresses, and main-table unicast default routes.
/// A route event for anything else is dropped in O(1) by the parser and never stored.
struct SnapshotStore: Sendable {
    private(set) var snapshot = SystemSnapshot()

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
            return changed
        case .deleteLink(let index):
            return snapshot.removeLink(index: index)
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
                // NLM_F_REPLACE: the kernel swapped the route with the same family, table and metric.
                snapshot.defaultRoutes = snapshot.defaultRoutes.filter {
                    !($0.family == first.family && $0.table == first.table && $0.metric == first.metric)
                }
            }
            snapshot.defaultRoutes.formUnion(routes)
            return snapshot.defaultRoutes != before
        case .deleteDefaultRoute(let routes):
            var changed = false
            for route in routes { changed = snapshot.defaultRoutes.remove(route) != nil || changed }
            return changed
        case .ignoredRoute, .routingPolicy, .neighbour, .networkConfiguration, .done, .error, .other:
            return false
        }
    }

    /// Replaces the kernel's route lookups; returns whether they changed.
    mutating func setRouteLookups(
        _ lookups: [IPAddress.Family: RouteLookup], scoped: [IPAddress.Family: [Int: RouteLookup]],
        destinations: [IPAddress: RouteLookup]
    ) -> Bool {
        guard
            snapshot.routeLookups != lookups || snapshot.scopedRouteLookups != scoped
                || snapshot.destinationLookups != destinations
        else { return false }
        snapshot.routeLookups = lookups
        snapshot.scopedRouteLookups = scoped
        snapshot.destinationLookups = destinations
        return true
    }

    /// Replaces the nameservers; returns whether they changed.
    mutating func setNameservers(_ nameservers: [IPAddress]) -> Bool {
        guard snapshot.nameservers != nameservers else { return false }
        snapshot.nameservers = nameservers
        return true
    }

    /// Forgets every kernel object before a full re-dump (nameservers are not the kernel's and
    /// stay; route lookups stay until the lookups after the dump replace them).
    mutating func resetKernelState() {
        let previous = snapshot
        snapshot = SystemSnapshot(
            nameservers: previous.nameservers, routeLookups: previous.routeLookups,
            scopedRouteLookups: previous.scopedRouteLookups)
        snapshot.destinationLookups = previous.destinationLookups
    }
}
#endif
