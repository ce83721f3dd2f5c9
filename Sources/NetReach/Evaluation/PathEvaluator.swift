/// Turns a ``SystemSnapshot`` into a ``NetworkPath``: a pure function with no I/O, so every rule is
/// tested with plain fixtures.
///
/// The rules:
/// - per family, the path follows the kernel's own route lookup (``SystemSnapshot/routeLookups``):
///   the family is usable when the lookup yields a route out of an interface that is up with
///   carrier, that the requirements allow, with a source address the kernel would use (from any
///   interface) that is not link-local and that can carry traffic (not loopback for traffic that
///   leaves the host, not unspecified, not tentative or DAD-failed), else
///   ``UnsatisfiedReason/noAddress``;
/// - the path is satisfied when either family is usable; its interfaces are the ones the kernel
///   uses (IPv4's first), then standby interfaces that could carry traffic (allowed, up, addressed,
///   with a main-table default route; lowest metric first); its gateways are the next hops of the
///   kernel's routes, then the standby routes'; expensive and constrained describe the interfaces
///   in use only;
/// - when the route the kernel uses goes through an interface the requirements exclude, the path
///   is judged by the kernel's answer for traffic bound to an allowed interface, as
///   Network.framework scopes a connection with requirements;
/// - otherwise the reason is the most telling of the two families: a route the kernel would use
///   says more (``UnsatisfiedReason/routeRefused``, ``UnsatisfiedReason/excludedByRequirements``,
///   ``UnsatisfiedReason/noAddress``, ``UnsatisfiedReason/linkDown`` of that route's interface) than
///   the state of the links when there is no route at all (the furthest any allowed link got:
///   no default route, then no address, then link down; no allowed link: no interface);
/// - a snapshot whose source can no longer observe the system (``SystemSnapshot/observationFailure``)
///   is ``UnsatisfiedReason/monitorUnavailable``;
/// - a monitor that requires ``InterfaceType/loopback`` is satisfied by `lo` being up with an
///   address, since no route lookup for the internet ever leaves through it.
///
/// ```swift
/// let path = PathEvaluator.evaluate(snapshot, requirements: .init(requiredInterfaceType: .wifi))
/// ```
public enum PathEvaluator {
    /// Evaluates a snapshot under the given requirements and classification: the path to the
    /// internet, or, with `destinations`, the path to those addresses (one host's addresses, in the
    /// order to try them).
    ///
    /// A destination's path follows the kernel's lookup for that address alone: a loopback or own
    /// address is satisfied through loopback, an on-link one without any default route, and a
    /// split tunnel's route shows its interface. Its interfaces are only those the lookups use.
    public static func evaluate(
        _ snapshot: SystemSnapshot,
        requirements: PathRequirements = PathRequirements(),
        classification: InterfaceClassification = .automatic,
        destinations: [IPAddress]? = nil
    ) -> NetworkPath {
        if snapshot.observationFailure != nil { return .unsatisfied(.monitorUnavailable) }
        let evaluation = Evaluation(snapshot: snapshot, requirements: requirements, classification: classification)
        if let destinations {
            let verdicts = destinations.map { destination in
                (
                    destination.family,
                    evaluation.verdict(
                        snapshot.routeLookup(to: destination), family: destination.family,
                        linkLocalDestination: destination.isLinkLocal)
                )
            }
            return evaluation.path(from: verdicts, withStandby: false)
        }
        if requirements.requiredInterfaceType == .loopback {
            return evaluateLoopback(snapshot, requirements: requirements, classification: classification)
        }
        return evaluation.path(
            from: [(.ipv4, evaluation.familyVerdict(.ipv4)), (.ipv6, evaluation.familyVerdict(.ipv6))],
            withStandby: true)
    }

    /// Why each family cannot carry traffic to the internet, by the rules of
    /// ``evaluate(_:requirements:classification:destinations:)``; usable families are absent.
    /// For judging a family the path does not support (``NetworkPath`` keeps one reason, for the
    /// whole path): `noAddress` for IPv4 on an IPv6-only host, `noDefaultRoute` for a family that
    /// stops at the local network.
    package static func familyReasons(
        _ snapshot: SystemSnapshot, requirements: PathRequirements = PathRequirements(),
        classification: InterfaceClassification = .automatic
    ) -> [IPAddress.Family: UnsatisfiedReason] {
        if snapshot.observationFailure != nil { return [.ipv4: .monitorUnavailable, .ipv6: .monitorUnavailable] }
        let evaluation = Evaluation(snapshot: snapshot, requirements: requirements, classification: classification)
        var reasons: [IPAddress.Family: UnsatisfiedReason] = [:]
        for family in IPAddress.Family.allCases {
            if let failure = evaluation.familyVerdict(family).failure { reasons[family] = failure.reason }
        }
        return reasons
    }

    /// What one family's lookup means for the path.
    enum Verdict {
        case usable(Use)
        case unusable(Failure)

        var usable: Use? { if case .usable(let use) = self { use } else { nil } }
        var failure: Failure? { if case .unusable(let failure) = self { failure } else { nil } }
    }

    struct Use {
        var interface: NetworkInterface
        var gateway: IPAddress?
        /// The other live legs of a multipath route (the kernel spreads flows over all of them).
        var otherLegs: [(interface: NetworkInterface, gateway: IPAddress?)] = []
    }

    struct Failure {
        var reason: UnsatisfiedReason
        /// Whether the kernel had a route (so the reason is about that route, not about links).
        var fromRoute: Bool

        /// Higher is more telling: any reason about the kernel's own route, then by rank.
        var weight: Int {
            let rank =
                switch reason {
                case .routeRefused: 6
                case .excludedByRequirements: 5
                case .noDefaultRoute: 3
                case .noAddress: 2
                case .linkDown: 1
                default: 0
                }
            return (fromRoute ? 10 : 0) + rank
        }
    }

    /// Judges lookups against one snapshot, requirements and classification.
    struct Evaluation {
        let snapshot: SystemSnapshot
        let requirements: PathRequirements
        let classification: InterfaceClassification
        /// The type of one of the snapshot's links: its automatic type (worked out when the link
        /// was made), unless the classification overrides it by name.
        func interfaceType(of link: SystemSnapshot.Link) -> InterfaceType { classification.type(of: link) }

        /// The path from verdicts in order of preference: satisfied through the interfaces of the
        /// usable ones (plus, for the internet, standby interfaces), else the most telling reason.
        ///
        /// Plain loops over a few elements, no sets: this runs on every change (see
        /// ``standbyInterfaces(excluding:)``).
        func path(from verdicts: [(family: IPAddress.Family, verdict: Verdict)], withStandby: Bool) -> NetworkPath {
            var inUse: [NetworkInterface] = []
            var gateways: [IPAddress] = []
            var telling: Failure?
            var supportsIPv4 = false
            var supportsIPv6 = false
            var isMultipath = false
            for (family, verdict) in verdicts {
                switch verdict {
                case .unusable(let failure):
                    // The first of the weightiest, as `max(by:)` picks.
                    if failure.weight > telling?.weight ?? -1 { telling = failure }
                case .usable(let use):
                    if family == .ipv4 { supportsIPv4 = true } else { supportsIPv6 = true }
                    if !use.otherLegs.isEmpty { isMultipath = true }
                    if !inUse.contains(use.interface) { inUse.append(use.interface) }
                    if let gateway = use.gateway, !gateways.contains(gateway) { gateways.append(gateway) }
                    for leg in use.otherLegs {
                        if !inUse.contains(leg.interface) { inUse.append(leg.interface) }
                        if let gateway = leg.gateway, !gateways.contains(gateway) { gateways.append(gateway) }
                    }
                }
            }
            guard supportsIPv4 || supportsIPv6 else { return .unsatisfied(telling?.reason ?? .noInterface) }
            let (standby, standbyGateways) =
                withStandby ? standbyInterfaces(excluding: inUse.map(\.index)) : ([], [])
            for gateway in standbyGateways where !gateways.contains(gateway) { gateways.append(gateway) }
            return NetworkPath(
                status: .satisfied,
                availableInterfaces: inUse + standby,
                isExpensive: inUse.contains { $0.type == .cellular || classification.isMarkedExpensive($0.name) },
                isConstrained: inUse.contains { classification.isMarkedConstrained($0.name) },
                supportsIPv4: supportsIPv4,
                supportsIPv6: supportsIPv6,
                supportsDNS: !snapshot.nameservers.isEmpty,
                gateways: gateways,
                isMultipath: isMultipath
            )
        }

        /// The verdict for traffic to the internet over `family`: the unbound route's, or, when that
        /// route uses an interface the requirements exclude, the first allowed interface whose
        /// bound lookup is usable (lowest main-table default metric first, then interface index).
        func familyVerdict(_ family: IPAddress.Family) -> Verdict {
            let unbound = verdict(
                snapshot.routeLookup(for: family), family: family, manyFlows: true)
            guard let failure = unbound.failure, failure.reason == .excludedByRequirements, failure.fromRoute else {
                return unbound
            }
            var metrics: [Int: UInt32] = [:]
            for route in snapshot.defaultRoutes where route.family == family {
                metrics[route.interfaceIndex] = min(metrics[route.interfaceIndex] ?? .max, route.metric)
            }
            let candidates = snapshot.links.values
                .filter { requirements.allows(interfaceType(of: $0)) }
                .sorted { (metrics[$0.index] ?? .max, $0.index) < (metrics[$1.index] ?? .max, $1.index) }
            var telling: Failure?
            for link in candidates {
                let bound = verdict(
                    snapshot.scopedRouteLookup(for: family, interfaceIndex: link.index), family: family)
                if bound.usable != nil { return bound }
                // A bound lookup refused by a kill switch says more than "no default route".
                if let failure = bound.failure, failure.fromRoute, failure.weight > telling?.weight ?? -1 {
                    telling = failure
                }
            }
            // An allowed interface's own trouble ("the Wi-Fi link is down") says more than the fact
            // that an excluded one works.
            guard !candidates.isEmpty else { return unbound }
            if let telling { return .unusable(telling) }
            return noRoute(family)
        }

        /// Interfaces the kernel does not use now but that could carry traffic: allowed, up with
        /// carrier, with a usable address of a family and a main-table default route of that family
        /// through them; lowest metric first, then interface index. Also their gateways, in route order.
        ///
        /// Linear scans of the default routes (a handful) and, per route, of the addresses: sets
        /// here cost more than they save (building and hashing them was a tenth of a change's
        /// instructions, callgrind; Benchmarks/RESULTS.md, section 32).
        func standbyInterfaces(excluding inUse: [Int]) -> ([NetworkInterface], [IPAddress]) {
            // Legs of the route in use that the kernel sends nothing through (dead, linkdown, or a
            // gateway whose neighbour failed under fib_multipath_use_neigh) are no standby either.
            var deadLegs: [(interfaceIndex: Int, gateway: IPAddress?)] = []
            for family in [IPAddress.Family.ipv4, .ipv6] {
                guard case .route(let route) = snapshot.routeLookup(for: family) else { continue }
                for leg in route.nextHops where leg.isDead { deadLegs.append((leg.interfaceIndex, leg.gateway)) }
            }
            var metrics: [(index: Int, metric: UInt32)] = []
            var routes: [SystemSnapshot.DefaultRoute] = []
            for route in snapshot.defaultRoutes
            where !inUse.contains(route.interfaceIndex)
                && !deadLegs.contains(where: { $0 == (route.interfaceIndex, route.gateway) })
                && hasUsableAddress(route.interfaceIndex, route.family)
            {
                // Bound traffic the kernel refuses (a kill switch) is no standby.
                if case .refused = snapshot.scopedRouteLookup(for: route.family, interfaceIndex: route.interfaceIndex) {
                    continue
                }
                guard let link = snapshot.links[route.interfaceIndex], link.isOperational else { continue }
                guard requirements.allows(interfaceType(of: link)) else { continue }
                if let known = metrics.firstIndex(where: { $0.index == link.index }) {
                    metrics[known].metric = min(metrics[known].metric, route.metric)
                } else {
                    metrics.append((link.index, route.metric))
                }
                routes.append(route)
            }
            let interfaces = metrics.sorted { ($0.metric, $0.index) < ($1.metric, $1.index) }.compactMap {
                entry -> NetworkInterface? in
                guard let link = snapshot.links[entry.index] else { return nil }
                return NetworkInterface(name: link.name, index: link.index, type: interfaceType(of: link))
            }
            return (interfaces, routes.sorted { $0.isPreferred(over: $1) }.compactMap(\.gateway))
        }

        /// The verdict on a lookup for a destination of `family` (`linkLocalDestination`: the
        /// destination itself is link-local, so a link-local source is fine). `manyFlows`: the
        /// lookup's address stands for the internet, many destinations, not for itself.
        func verdict(
            _ lookup: RouteLookup, family: IPAddress.Family, linkLocalDestination: Bool = false,
            manyFlows: Bool = false,
        ) -> Verdict {
            switch lookup {
            case .route(let route):
                guard let link = snapshot.links[route.interfaceIndex] else {
                    return .unusable(Failure(reason: .noInterface, fromRoute: true))
                }
                let type = interfaceType(of: link)
                // A local destination is reached through loopback whatever the requirements say.
                guard requirements.allows(type) || (route.isLocal && type == .loopback) else {
                    return .unusable(Failure(reason: .excludedByRequirements, fromRoute: true))
                }
                // The legs of a multipath route that can carry traffic too: not dead, through a
                // link with carrier that the requirements allow.
                var otherLegs: [(interface: NetworkInterface, gateway: IPAddress?)] = []
                for leg in route.nextHops
                where !leg.isDead && (leg.interfaceIndex, leg.gateway) != (route.interfaceIndex, route.gateway) {
                    guard let legLink = snapshot.links[leg.interfaceIndex], legLink.isOperational else { continue }
                    let legType = interfaceType(of: legLink)
                    guard requirements.allows(legType) else { continue }
                    otherLegs.append(
                        (NetworkInterface(name: legLink.name, index: legLink.index, type: legType), leg.gateway))
                }
                // The kernel still routes through a link that lost carrier (a `linkdown` route):
                // the traffic is lost, and the path says why. A multipath route keeps hashing some
                // flows onto a `linkdown` leg (unless `ignore_routes_with_linkdown`), the rest onto
                // its live legs: the one address asked about is one flow, so for the internet the
                // live legs (with an address of the family) carry the path.
                guard link.isOperational else {
                    let live = otherLegs.filter { hasUsableAddress($0.interface.index, family) }
                    guard manyFlows, let first = live.first else {
                        return .unusable(Failure(reason: .linkDown, fromRoute: true))
                    }
                    return .usable(
                        Use(interface: first.interface, gateway: first.gateway, otherLegs: Array(live.dropFirst())))
                }
                guard let source = route.source, linkLocalDestination || !source.isLinkLocal,
                    canSource(source, leaving: !(route.isLocal || link.isLoopback))
                else {
                    return .unusable(Failure(reason: .noAddress, fromRoute: true))
                }
                return .usable(
                    Use(
                        interface: NetworkInterface(name: link.name, index: link.index, type: type),
                        gateway: route.gateway, otherLegs: otherLegs))
            case .refused:
                return .unusable(Failure(reason: .routeRefused, fromRoute: true))
            case .noRoute, .failed:
                return noRoute(family)
            }
        }

        /// Whether the kernel's choice of `source` lets a connection work. Not the unspecified
        /// address (the kernel's pick, `0.0.0.0`, when no interface has an IPv4 address for a
        /// route through a device); not loopback for traffic `leaving` the host (while every global
        /// IPv6 address is still tentative the kernel hands `connect` `::1`, and nothing ever
        /// answers it, even after DAD ends); not an address the snapshot holds only as tentative
        /// (an optimistic one is usable, RFC 4429, and the snapshot does not count it as tentative)
        /// or DAD-failed. An address held by an interface that is down is fine: IPv4 keeps its
        /// local route, and a connection from it completes through another interface (weak host
        /// model; measured with a real TCP connection). An address the snapshot does not hold is
        /// taken at the kernel's word, and so is any source of traffic that stays on the host.
        func canSource(_ source: IPAddress, leaving: Bool) -> Bool {
            if source.isUnspecified { return false }
            guard leaving else { return true }
            if source.isLoopback { return false }
            var held = false
            for entry in snapshot.addressTable.values where entry.address == source {
                held = true
                if !entry.isTentative, !entry.isDADFailed { return true }
            }
            return !held
        }

        /// Whether the link holds a usable address of `family` (``SystemSnapshot/Address/isUsable``).
        func hasUsableAddress(_ interfaceIndex: Int, _ family: IPAddress.Family) -> Bool {
            snapshot.addressTable.values.contains {
                $0.interfaceIndex == interfaceIndex && $0.address.family == family && $0.isUsable
            }
        }

        /// No route for `family`: unusable, with why told by the links (``linkReason(family:)``).
        func noRoute(_ family: IPAddress.Family) -> Verdict {
            .unusable(Failure(reason: linkReason(family: family), fromRoute: false))
        }

        /// Why there is no route, told by the links: the furthest any allowed link got.
        func linkReason(family: IPAddress.Family) -> UnsatisfiedReason {
            var furthest: Failure?
            var excludedExists = false
            let addressed = snapshot.interfacesWithUsableAddress(family)
            for link in snapshot.links.values {
                let type = interfaceType(of: link)
                if type == .loopback { continue }
                guard requirements.allows(type) else {
                    excludedExists = true
                    continue
                }
                let reason: UnsatisfiedReason =
                    !link.isOperational
                    ? .linkDown
                    : !addressed.containsSorted(link.index) ? .noAddress : .noDefaultRoute
                let failure = Failure(reason: reason, fromRoute: false)
                if failure.weight > furthest?.weight ?? -1 { furthest = failure }
            }
            return furthest?.reason ?? (excludedExists ? .excludedByRequirements : .noInterface)
        }
    }

    /// A required loopback: `lo` up with a usable (not tentative) address of some family.
    private static func evaluateLoopback(
        _ snapshot: SystemSnapshot, requirements: PathRequirements, classification: InterfaceClassification
    ) -> NetworkPath {
        let loopbacks = snapshot.links.values.filter { classification.type(of: $0) == .loopback }
        guard let link = loopbacks.min(by: { $0.index < $1.index }), requirements.allows(.loopback) else {
            return .unsatisfied(.noInterface)
        }
        guard link.isOperational else { return .unsatisfied(.linkDown) }
        let families = Set(
            snapshot.addressTable.values
                .filter { $0.interfaceIndex == link.index && !$0.isTentative && !$0.isDADFailed }
                .map(\.address.family))
        guard !families.isEmpty else { return .unsatisfied(.noAddress) }
        return NetworkPath(
            status: .satisfied,
            availableInterfaces: [NetworkInterface(name: link.name, index: link.index, type: .loopback)],
            supportsIPv4: families.contains(.ipv4),
            supportsIPv6: families.contains(.ipv6),
            supportsDNS: !snapshot.nameservers.isEmpty
        )
    }
}
