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
        // Families as bits, so the per-event work allocates two small dictionaries and one array.
        var addressed: [Int: Families] = Dictionary(minimumCapacity: snapshot.links.count)
        for address in snapshot.addressTable.values where address.isUsable || isLoopbackUsable(address, in: snapshot) {
            addressed[address.interfaceIndex, default: []].insert(Families(address.address.family))
        }
        var routed: [Int: (families: Families, metric: UInt32)] = Dictionary(minimumCapacity: snapshot.links.count)
        for route in snapshot.defaultRoutes where addressed[route.interfaceIndex]?.contains(Families(route.family)) == true {
            let previous = routed[route.interfaceIndex] ?? ([], .max)
            routed[route.interfaceIndex] = (previous.families.union(Families(route.family)), min(previous.metric, route.metric))
        }

        var available: [Candidate] = []
        var furthest: UnsatisfiedReason?
        var excludedWouldSatisfy = false
        for link in snapshot.links.values {
            let type = classification.type(of: link)
            if type == .loopback && requirements.requiredInterfaceType != .loopback { continue }
            switch assess(link, type: type, addressed: addressed[link.index] ?? [], routed: routed[link.index]) {
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
        let gateways = snapshot.defaultRoutes
            .filter { route in available.contains { $0.interface.index == route.interfaceIndex && $0.families.contains(Families(route.family)) } }
            .sorted(by: preferred)
            .compactMap(\.gateway)
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

    /// A set of address families in one byte.
    private struct Families: OptionSet {
        let rawValue: UInt8
        static let ipv4 = Families(rawValue: 1), ipv6 = Families(rawValue: 2)
        init(rawValue: UInt8) { self.rawValue = rawValue }
        init(_ family: IPAddress.Family) { self = family == .ipv4 ? .ipv4 : .ipv6 }
    }

    private struct Candidate {
        var interface: NetworkInterface
        var families: Families
        var metric: UInt32
    }

    private enum Outcome {
        case available(Candidate)
        case unavailable(UnsatisfiedReason)
    }

    private static func assess(
        _ link: SystemSnapshot.Link, type: InterfaceType, addressed: Families, routed: (families: Families, metric: UInt32)?
    ) -> Outcome {
        guard link.isOperational else { return .unavailable(.linkDown) }
        guard !addressed.isEmpty else { return .unavailable(.noAddress) }
        let interface = NetworkInterface(name: link.name, index: link.index, type: type)
        if type == .loopback {
            return .available(Candidate(interface: interface, families: addressed, metric: .max))
        }
        guard let routed else { return .unavailable(.noDefaultRoute) }
        return .available(Candidate(interface: interface, families: routed.families, metric: routed.metric))
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
