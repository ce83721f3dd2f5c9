#if os(Linux)
import CoreMetrics
import NetReachSystem

/// The kernel's own route choices, which the snapshot carries beside the links, addresses and
/// default routes the ``SnapshotStore`` keeps: where traffic to the internet goes per family, bound
/// to each other interface that could carry it, and to each monitored destination. The engine
/// marks a family ``stale`` when a message can change its answers; ``snapshot(of:removals:destinations:requests:sources:buffer:)``
/// asks again then, and adds the answers to the store's snapshot.
///
/// "The internet" is not one address: a VPN's host route to its DNS server, or a network's
/// `blackhole 8.8.8.8/32`, covers one destination and must not decide for all of them. Each
/// family's candidates (``SystemPathSource/Configuration/routeLookupAddresses``, never contacted)
/// are asked in order until one is routed by a default route (prefix 0); otherwise the one whose
/// route is broadest (shortest prefix, the table entry the kernel matched: `ip route get fibmatch`)
/// stands for the internet. A destination no route matches at all counts as broadest: that is
/// where "the internet" has no route either. A refused one counts as narrowest (the kernel tells no
/// refusing route's prefix, even to `fibmatch`), so a refusal decides only when every candidate is
/// refused (a kill switch, a `blackhole default`).
struct KernelQueries {
    /// Global addresses whose routes stand for "the internet", per family in order of preference.
    let lookupAddresses: [IPAddress]
    /// The families whose answers may have changed (by a message, a due recheck or expiry, new
    /// destinations): the next snapshot asks again for them, once. An IPv4 route or rule cannot
    /// change what an IPv6 socket is routed by, so a change of one family asks only its own.
    var stale: LookupFamilies = .both
    /// What the last answers depend on, for ``SnapshotStore/absorb(_:watching:)``, once
    /// ``settle(_:)`` has run. A change of destinations always marks the lookups stale, so this is
    /// never behind when a message is read.
    private(set) var watch: SnapshotStore.LookupWatch
    /// When to ask again with no message: a route the last answers chose expires (an IPv6 route
    /// from a router advertisement, which the kernel then stops using without a word), or a
    /// removal is due to be rechecked. `nil`: not until something happens. Current once
    /// ``settle(_:)`` has run.
    private(set) var wakeAt: ContinuousClock.Instant?
    /// When a route the last answers of each family chose expires.
    private var expiries: [IPAddress.Family: ContinuousClock.Instant] = [:]
    /// When the lookups are asked again after a removal, and of which families.
    private(set) var rechecks = RecheckSchedule()
    private var routeLookups: [IPAddress.Family: RouteLookup] = [:]
    private var scopedRouteLookups: [IPAddress.Family: [Int: RouteLookup]] = [:]
    private var destinationLookups: [IPAddress: RouteLookup] = [:]
    /// Counts every question asked (`netreach_route_lookups_total`).
    private let lookupCounter: Counter?
    /// The watched namespace's multipath hash policies; `nil`: not read (legs stay listed).
    private let multipathSysctls: MultipathSysctls?
    /// The hash policy per family, read at the last lookups of that family that found a
    /// destination over several legs (``SilentDependencies``).
    private var hashPolicies: [IPAddress.Family: MultipathHashPolicy] = [:]
    /// The legs that connections to each destination over several legs take, asked of the kernel
    /// when the hash reads ports.
    private var legsTaken: [IPAddress: [RouteLookup.NextHop]] = [:]
    /// What the last answers depend on that no message announces, per family.
    private var silent = SilentDependencies()
    /// When to look at ``silent`` again; `nil`: nothing silent.
    private var silentCheckAt: ContinuousClock.Instant?

    /// How often the kernel state that no message announces is looked at while an answer depends
    /// on it: within a second of the kernel's change, the path shows it.
    static let silentCheckInterval: Duration = .milliseconds(500)

    init(
        lookupAddresses: [IPAddress] = SystemPathSource.Configuration.defaultRouteLookupAddresses,
        lookups: Counter? = nil, multipathSysctls: MultipathSysctls? = nil
    ) {
        self.lookupAddresses = lookupAddresses
        self.lookupCounter = lookups
        self.multipathSysctls = multipathSysctls
        watch = SnapshotStore.LookupWatch(addresses: lookupAddresses)
    }

    /// The kernel state an answer depends on that changes with no message, per family.
    ///
    /// - `neighbours`: IPv4's choice among default routes of equal metric (`fib_select_default`
    ///   leaves a gateway whose neighbour entry is not REACHABLE) and a multipath leg under
    ///   `fib_multipath_use_neigh` (`fib_good_nh`: an INCOMPLETE entry is not valid) move with
    ///   neighbour states the kernel does not announce: an entry made INCOMPLETE by the first
    ///   packet, REACHABLE turning DELAY. Only FAILED (seconds later) is announced. IPv6's router
    ///   choice (`rt6_check_neigh`) leaves a router only on FAILED, which is announced, so IPv6
    ///   needs none of this.
    /// - `hashPolicy`: a destination over several legs, whose listing depends on the hash policy,
    ///   a sysctl whose writes send no message.
    struct SilentDependencies: Equatable {
        var neighbours: LookupFamilies = []
        var hashPolicy: LookupFamilies = []

        var isEmpty: Bool { neighbours.isEmpty && hashPolicy.isEmpty }
    }

    /// Marks stale the families whose expiry or recheck is due at `now` (``wakeAt`` has passed),
    /// and those whose silent dependencies (``SilentDependencies``) are due to be looked at: a
    /// family whose answers depend on neighbour states is asked again, one whose listing depends
    /// on the hash policy only when the policy changed (two `pread`s).
    mutating func markDue(now: ContinuousClock.Instant = .now) {
        for (family, expiry) in expiries where now >= expiry { stale.insert(LookupFamilies(family)) }
        if let due = rechecks.dueAt, now >= due { stale.formUnion(rechecks.families) }
        if let due = silentCheckAt, now >= due {
            stale.formUnion(silent.neighbours)
            for family in [IPAddress.Family.ipv4, .ipv6] where silent.hashPolicy.includes(family) {
                if multipathSysctls?.policy(for: family) != hashPolicies[family] {
                    stale.insert(LookupFamilies(family))
                }
            }
            // Looked at again one interval on (`settle` after the lookups, or now if none were asked).
            silentCheckAt = now + Self.silentCheckInterval
            wakeAt = nextWake()
        }
    }

    /// The earliest of the rechecks, the expiries and the silent check.
    private func nextWake() -> ContinuousClock.Instant? {
        var wake = rechecks.dueAt
        for expiry in expiries.values { wake = min(wake ?? expiry, expiry) }
        if let check = silentCheckAt { wake = min(wake ?? check, check) }
        return wake
    }

    /// A destination's answer as the path reads it: over several legs whose hash ignores the ports
    /// (``MultipathHashPolicy/addresses``), every connection to it takes the leg the lookup named,
    /// so that leg alone is its route. The full answer is kept for the watch and the rechecks.
    /// Under a policy that reads ports, the legs the kernel named for sampled ports
    /// (``RouteQuery/legsTaken(to:from:among:transport:port:on:buffer:)``) are its route, the named one first.
    private func asRead(_ answer: RouteLookup, of destination: IPAddress) -> RouteLookup {
        guard case .route(var route) = answer, !route.nextHops.isEmpty else { return answer }
        switch hashPolicies[destination.family] {
        case .addresses:
            route.nextHops = []
        case .ports:
            guard let taken = legsTaken[destination] else { return answer }
            route.nextHops = taken.count > 1 ? taken : []
        case nil:
            return answer
        }
        return .route(route)
    }

    /// `kernel` (the store's snapshot) with the kernel's route choices added, asked again first
    /// for the families that are stale or due. `removals`: what the messages since the last call
    /// announced removed, asked again while it may not be finished (``RecheckSchedule``).
    ///
    /// With the snapshot comes what the answers mean for later wake-ups (`nil` when nothing was
    /// asked): the engine publishes the snapshot, then hands it to ``settle(_:)``, so none of
    /// that bookkeeping is between the kernel's answer and the subscribers.
    mutating func snapshot(
        of kernel: SystemSnapshot, removals: AnnouncedRemovals, destinations: Set<IPAddress>,
        requests: inout NetlinkSocket, sources: borrowing SourceQuery, buffer: UnsafeMutableRawBufferPointer
    ) throws(PathMonitorError) -> (SystemSnapshot, Settlement?) {
        let now = ContinuousClock.now
        markDue(now: now)
        var settlement: Settlement?
        // A destination never asked about (a new one) is asked about whatever is stale.
        if !stale.isEmpty || destinations.contains(where: { destinationLookups[$0] == nil }) {
            settlement = try refresh(
                kernel, removals: removals, destinations: destinations, now: now, requests: &requests,
                sources: sources, buffer: buffer)
        }
        var snapshot = kernel
        snapshot.routeLookups = routeLookups
        snapshot.scopedRouteLookups = scopedRouteLookups
        snapshot.destinationLookups =
            hashPolicies.isEmpty
            ? destinationLookups
            : destinationLookups.reduce(into: [:]) { $0[$1.key] = asRead($1.value, of: $1.key) }
        return (snapshot, settlement)
    }

    /// Asks the kernel again for the stale families, the way a program's socket gets its route
    /// (``RouteQuery``); the other family's answers stay as they were. Only the answers are taken
    /// in here; what they mean for later wake-ups is returned, for ``settle(_:)``.
    private mutating func refresh(
        _ kernel: SystemSnapshot, removals: AnnouncedRemovals, destinations: Set<IPAddress>,
        now: ContinuousClock.Instant, requests: inout NetlinkSocket, sources: borrowing SourceQuery,
        buffer: UnsafeMutableRawBufferPointer
    ) throws(PathMonitorError) -> Settlement {
        let asked = stale
        stale = []
        // Every answer, the candidates' that do not decide too, is compared with the deleted
        // routes and lost links: one that may still be there is asked about again.
        let removed = rechecks.toCompare(with: removals)
        var stillSeen: LookupFamilies = []
        var earliest: [IPAddress.Family: ContinuousClock.Instant] = [:]
        func compare(_ answer: RouteQuery.Answer, _ family: IPAddress.Family) {
            guard !removed.isEmpty, !stillSeen.includes(family) else { return }
            if removed.mayBeUnfinished(answer, family) { stillSeen.insert(LookupFamilies(family)) }
        }
        func noteExpiry(_ seconds: Double?, _ family: IPAddress.Family) {
            // A few milliseconds late, so the kernel already treats the route as expired.
            guard let seconds else { return }
            let expiry = now + .milliseconds(Int((seconds * 1000).rounded(.up)) + 5)
            earliest[family] = min(earliest[family] ?? expiry, expiry)
        }
        for family in [IPAddress.Family.ipv4, .ipv6] where asked.includes(family) {
            routeLookups[family] = nil
            scopedRouteLookups[family] = nil
            var best: (address: IPAddress, answer: RouteQuery.Answer, breadth: Int)?
            for candidate in lookupAddresses where candidate.family == family {
                lookupCounter?.increment()
                let answer = try RouteQuery.connected(to: candidate, sources: sources, on: &requests, buffer: buffer)
                compare(answer, family)
                let breadth: Int = if case .refused = answer.lookup { 256 } else { Int(answer.prefixLength ?? 0) }
                if breadth < best?.breadth ?? .max { best = (candidate, answer, breadth) }
                if breadth == 0 { break }
            }
            guard let best else { continue }
            routeLookups[family] = best.answer.lookup
            noteExpiry(best.answer.expiresIn, family)
            guard case .route(let chosen) = best.answer.lookup else { continue }
            // The legs (a few) scanned: no set to build and hash.
            let addressed = kernel.interfacesWithUsableAddress(family)
            for link in kernel.links.values
            where link.index != chosen.interfaceIndex
                && !chosen.nextHops.contains(where: { $0.interfaceIndex == link.index })
                && link.isOperational && !link.isLoopback && addressed.containsSorted(link.index)
            {
                lookupCounter?.increment()
                let bound = try RouteQuery.bound(
                    to: best.address, interfaceIndex: link.index, sources: sources, on: &requests, buffer: buffer)
                compare(bound, family)
                scopedRouteLookups[family, default: [:]][link.index] = bound.lookup
                noteExpiry(bound.expiresIn, family)
            }
        }
        var answers: [IPAddress: RouteLookup] = [:]
        var silent = self.silent
        silent.neighbours.subtract(asked)
        silent.hashPolicy.subtract(asked)
        for destination in destinations {
            if !asked.includes(destination.family), let known = destinationLookups[destination] {
                answers[destination] = known
                continue
            }
            lookupCounter?.increment()
            let answer = try RouteQuery.connected(to: destination, sources: sources, on: &requests, buffer: buffer)
            compare(answer, destination.family)
            answers[destination] = answer.lookup
            noteExpiry(answer.expiresIn, destination.family)
            if case .route(let route) = answer.lookup, !route.nextHops.isEmpty {
                silent.hashPolicy.insert(LookupFamilies(destination.family))
            }
        }
        destinationLookups = answers
        for family in [IPAddress.Family.ipv4, .ipv6] where asked.includes(family) {
            // Read with the answers it applies to; `nil` (not read, or unreadable) lists every leg.
            hashPolicies[family] = silent.hashPolicy.includes(family) ? multipathSysctls?.policy(for: family) : nil
        }
        var taken: [IPAddress: [RouteLookup.NextHop]] = [:]
        for (destination, answer) in answers {
            guard case .route(let route) = answer, !route.nextHops.isEmpty, let source = route.source else { continue }
            if !asked.includes(destination.family) {
                taken[destination] = legsTaken[destination]
            } else if hashPolicies[destination.family] == .ports {
                lookupCounter?.increment()
                taken[destination] = try RouteQuery.legsTaken(
                    to: destination, from: source, among: Self.namedFirst(route), transport: sources.transport,
                    port: sources.port, on: &requests, buffer: buffer)
            }
        }
        legsTaken = taken
        if asked.includes(.ipv4),
            [routeLookups[.ipv4]].compactMap({ $0 }).contains(where: {
                Self.dependsOnNeighbours($0, kernel: kernel, sources: sources)
            })
                || answers.contains(where: {
                    $0.key.family == .ipv4 && Self.dependsOnNeighbours($0.value, kernel: kernel, sources: sources)
                })
        {
            silent.neighbours.insert(.ipv4)
        }
        return Settlement(
            now: now, asked: asked, removals: removals, stillSeen: stillSeen, earliest: earliest,
            destinations: destinations, defaultRoutes: kernel.defaultRoutes, silent: silent)
    }

    /// A route's legs, the one it names first.
    private static func namedFirst(_ route: RouteLookup.KernelRoute) -> [RouteLookup.NextHop] {
        let named = route.nextHops.filter { ($0.interfaceIndex, $0.gateway) == (route.interfaceIndex, route.gateway) }
        return named
            + route.nextHops.filter { ($0.interfaceIndex, $0.gateway) != (route.interfaceIndex, route.gateway) }
    }

    /// Whether an IPv4 answer may change with a neighbour state the kernel does not announce
    /// (``SilentDependencies``): a multipath route under `fib_multipath_use_neigh`, or a default
    /// route of the main table beside another with a gateway and the same metric (the kernel keeps
    /// the others of a table only for the main table: ``SnapshotStore``).
    private static func dependsOnNeighbours(
        _ answer: RouteLookup, kernel: SystemSnapshot, sources: borrowing SourceQuery
    ) -> Bool {
        guard case .route(let route) = answer, !route.isLocal else { return false }
        if !route.nextHops.isEmpty { return sources.multipathUsesNeighbours(for: .ipv4) }
        guard let gateway = route.gateway else { return false }
        // The chosen default's metric, then any other default of that table and metric.
        guard
            let chosen = kernel.defaultRoutes.first(where: {
                $0.family == .ipv4 && $0.table == route.table && $0.interfaceIndex == route.interfaceIndex
                    && $0.gateway == gateway
            })
        else { return false }
        return kernel.defaultRoutes.contains {
            $0.family == .ipv4 && $0.table == chosen.table && $0.metric == chosen.metric && $0.gateway != nil
                && $0 != chosen
        }
    }

    /// What a refresh learnt that only later wake-ups need: the rechecks its removals and answers
    /// call for, when the routes they chose expire, what a message must touch to change them. The
    /// engine settles it after publishing, so none of it is between the kernel's last answer and
    /// the snapshot's subscribers; nothing reads it before the next wake-up.
    struct Settlement {
        var now: ContinuousClock.Instant
        var asked: LookupFamilies
        var removals: AnnouncedRemovals
        /// The families where some answer may still show a removal unfinished.
        var stillSeen: LookupFamilies
        /// The earliest expiry of a route the answers chose, per family.
        var earliest: [IPAddress.Family: ContinuousClock.Instant]
        var destinations: Set<IPAddress>
        var defaultRoutes: Set<SystemSnapshot.DefaultRoute>
        var silent: SilentDependencies
    }

    /// Brings in what a refresh learnt for later (``Settlement``): the rechecks, ``wakeAt`` and
    /// ``watch``. The engine calls it after publishing, before it reads or waits again. A refresh
    /// that threw part-way returns nothing to settle, as it left the rechecks and the watch as
    /// they were before.
    mutating func settle(_ settlement: Settlement?) {
        guard let refresh = settlement else { return }
        let now = refresh.now
        // `rta_expires` counts whole ticks, rounded down: asked in the last tick before a route
        // expires, the kernel says 0, which reads as "never" (`RouteQuery`). An expiry learnt
        // earlier and still ahead is kept, so that answer cannot cancel the wake-up; once it has
        // passed, it goes. A family not asked keeps its expiry, with a new destination's added.
        // With none learnt or kept (most hosts: no route from a router advertisement), nothing.
        var earliest = refresh.earliest
        if !earliest.isEmpty || !expiries.isEmpty {
            for family in [IPAddress.Family.ipv4, .ipv6] where refresh.asked.includes(family) || earliest[family] != nil
            {
                if let known = expiries[family], known > now {
                    earliest[family] = min(earliest[family] ?? known, known)
                }
                expiries[family] = earliest[family]
            }
        }
        rechecks.lookupsMade(at: now, asked: refresh.asked, removals: refresh.removals, stillSeen: refresh.stillSeen)
        silent = refresh.silent
        silentCheckAt = silent.isEmpty ? nil : (silentCheckAt ?? now + Self.silentCheckInterval)
        wakeAt = nextWake()
        let gateways = Self.gateways(
            defaultRoutes: refresh.defaultRoutes, lookups: routeLookups, scoped: scopedRouteLookups,
            destinations: destinationLookups)
        let addresses = refresh.destinations.isEmpty ? lookupAddresses : lookupAddresses + refresh.destinations
        watch = SnapshotStore.LookupWatch(addresses: addresses, gateways: gateways)
    }

    /// Every gateway the snapshot names: of default routes, of the lookups and their legs.
    private static func gateways(
        defaultRoutes: Set<SystemSnapshot.DefaultRoute>, lookups: [IPAddress.Family: RouteLookup],
        scoped: [IPAddress.Family: [Int: RouteLookup]],
        destinations: [IPAddress: RouteLookup]
    ) -> Set<IPAddress> {
        var gateways = Set<IPAddress>()
        for route in defaultRoutes {
            if let gateway = route.gateway { gateways.insert(gateway) }
        }
        func add(_ answer: RouteLookup) {
            guard case .route(let route) = answer else { return }
            if let gateway = route.gateway { gateways.insert(gateway) }
            for leg in route.nextHops {
                if let gateway = leg.gateway { gateways.insert(gateway) }
            }
        }
        for answer in lookups.values { add(answer) }
        for answers in scoped.values {
            for answer in answers.values { add(answer) }
        }
        for answer in destinations.values { add(answer) }
        return gateways
    }
}
#endif
