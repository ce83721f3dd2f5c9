/// Turns a ``SystemSnapshot`` into a ``NetworkPath``: a pure function with no I/O, so every rule is
/// tested with plain fixtures.
///
/// The rules (see DESIGN.md "Path semantics"):
/// - an interface is *available* when it is up with carrier, has a usable address of some family
///   and a unicast default route of that family through it; loopback needs no route and counts
///   only when required;
/// - the path is satisfied when an interface the requirements allow is available;
/// - otherwise the reason is the furthest any allowed interface got (no default route, then no
///   address, then link down); with no allowed interface at all, it is
///   ``UnsatisfiedReason/excludedByRequirements`` when an excluded interface would have been
///   available, and ``UnsatisfiedReason/noInterface`` otherwise.
///
/// ```swift
/// let path = PathEvaluator.evaluate(snapshot, requirements: .init(requiredInterfaceType: .wifi))
/// ```
public enum PathEvaluator {
    /// Evaluates a snapshot under the given requirements and classification.
    public static func evaluate(
        _ snapshot: SystemSnapshot,
        requirements: PathRequirements = PathRequirements(),
        classification: InterfaceClassification = .automatic
    ) -> NetworkPath {
        var routesByInterface: [Int: [SystemSnapshot.DefaultRoute]] = [:]
        for route in snapshot.defaultRoutes { routesByInterface[route.interfaceIndex, default: []].append(route) }
        var usableFamilies: [Int: Set<IPAddress.Family>] = [:]
        for address in snapshot.addressTable.values where address.isUsable || isLoopbackUsable(address, in: snapshot) {
            usableFamilies[address.interfaceIndex, default: []].insert(address.address.family)
        }

        var available: [Candidate] = []
        var furthest: UnsatisfiedReason?
        var excludedWouldSatisfy = false

        for link in snapshot.links.values {
            let type = classification.type(of: link)
            if type == .loopback && requirements.requiredInterfaceType != .loopback { continue }
            let outcome = assess(link, type: type, families: usableFamilies[link.index] ?? [],
                                 routes: routesByInterface[link.index] ?? [])
            switch outcome {
            case .available(let candidate):
                if requirements.allows(type) { available.append(candidate) } else { excludedWouldSatisfy = true }
            case .unavailable(let reason):
                if requirements.allows(type), rank(reason) > rank(furthest) { furthest = reason }
            }
        }

        guard !available.isEmpty else {
            // An allowed interface's own trouble ("the Wi-Fi link is down") says more than the fact
            // that an excluded one would have worked.
            let reason = furthest ?? (excludedWouldSatisfy ? .excludedByRequirements : .noInterface)
            return .unsatisfied(reason)
        }
        available.sort { ($0.metric, $0.interface.index) < ($1.metric, $1.interface.index) }
        let primary = available[0].interface
        let gateways = available.flatMap(\.routes).sorted(by: preferred).compactMap(\.gateway)
        return NetworkPath(
            status: .satisfied,
            availableInterfaces: available.map(\.interface),
            isExpensive: primary.type == .cellular || classification.isMarkedExpensive(primary.name),
            isConstrained: classification.isMarkedConstrained(primary.name),
            supportsIPv4: available.contains { $0.families.contains(.ipv4) },
            supportsIPv6: available.contains { $0.families.contains(.ipv6) },
            supportsDNS: !snapshot.nameservers.isEmpty,
            gateways: uniqued(gateways)
        )
    }

    private struct Candidate {
        var interface: NetworkInterface
        var families: Set<IPAddress.Family>
        var routes: [SystemSnapshot.DefaultRoute]
        var metric: UInt32
    }

    private enum Outcome {
        case available(Candidate)
        case unavailable(UnsatisfiedReason)
    }

    private static func assess(
        _ link: SystemSnapshot.Link, type: InterfaceType, families: Set<IPAddress.Family>,
        routes: [SystemSnapshot.DefaultRoute]
    ) -> Outcome {
        guard link.isOperational else { return .unavailable(.linkDown) }
        guard !families.isEmpty else { return .unavailable(.noAddress) }
        let interface = NetworkInterface(name: link.name, index: link.index, type: type)
        if type == .loopback {
            return .available(Candidate(interface: interface, families: families, routes: [], metric: .max))
        }
        let usableRoutes = routes.filter { families.contains($0.family) }
        guard let metric = usableRoutes.map(\.metric).min() else { return .unavailable(.noDefaultRoute) }
        return .available(Candidate(
            interface: interface, families: Set(usableRoutes.map(\.family)), routes: usableRoutes, metric: metric))
    }

    /// A total order on routes: metric, then interface, then IPv4 before IPv6, then gateway bytes.
    /// Ties must not fall back on the set's hash order (NetworkManager gives its IPv4 and IPv6
    /// defaults the same metric), or equal snapshots would give paths that differ in order only.
    private static func preferred(_ a: SystemSnapshot.DefaultRoute, _ b: SystemSnapshot.DefaultRoute) -> Bool {
        if a.metric != b.metric { return a.metric < b.metric }
        if a.interfaceIndex != b.interfaceIndex { return a.interfaceIndex < b.interfaceIndex }
        if a.family != b.family { return a.family == .ipv4 }
        return (a.gateway?.bytes ?? []).lexicographicallyPrecedes(b.gateway?.bytes ?? [])
    }

    /// Loopback's addresses are host-scoped by nature; they are what a required loopback uses.
    private static func isLoopbackUsable(_ address: SystemSnapshot.Address, in snapshot: SystemSnapshot) -> Bool {
        !address.isTentative && !address.isDADFailed && snapshot.links[address.interfaceIndex]?.isLoopback == true
    }

    private static func rank(_ reason: UnsatisfiedReason?) -> Int {
        switch reason {
        case .noDefaultRoute: 3
        case .noAddress: 2
        case .linkDown: 1
        default: 0
        }
    }

    private static func uniqued(_ addresses: [IPAddress]) -> [IPAddress] {
        var seen = Set<IPAddress>()
        return addresses.filter { seen.insert($0).inserted }
    }
}
