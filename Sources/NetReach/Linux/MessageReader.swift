#if os(Linux)
import CNetReachLinux
import NetReachSystem
import Foundation
import Glibc

/// Turns received bytes into store updates: dumps, notifications, overruns and sysfs facts.
struct MessageReader {
    var store = SnapshotStore()
    let sysfs: SysfsReader?
    /// Global addresses whose routes stand for "the internet", per family in order of preference
    /// (never contacted: see ``refreshRouteLookups(requests:probe:buffer:)``).
    let lookupAddresses: [IPAddress]
    /// The destinations of per-destination monitors, asked for at each refresh.
    let destinations: @Sendable () -> Set<IPAddress>
    /// Set by every message that can change the kernel's answers (a link that changed, any address,
    /// a route of any table that covers a looked-up address, rules, nexthops): the lookups are
    /// asked again, once, before the next publish. A batch of routes elsewhere asks nothing.
    var lookupsStale = true
    /// The internet lookup addresses and the destinations, as of the last refresh: a change of
    /// destinations always asks for a refresh (``NetlinkEngine/requestRefresh()``), so this is never
    /// behind when a message is read, and a wake-up takes no lock to know it.
    private var lookedUp: [IPAddress] = []
    /// The next hops the last lookups named and the default routes' gateways: a change in one's
    /// neighbour entry (a router that stopped answering) changes the kernel's choice with no route
    /// message, so these are the neighbours worth asking again for.
    private var watchedGateways: Set<IPAddress> = []
    /// When a route the last lookups chose expires (an IPv6 route from a router advertisement):
    /// the kernel then stops using it without sending any message.
    private(set) var nextExpiry: ContinuousClock.Instant?
    /// When to ask again after a removal. The kernel announces some removals before it has made
    /// them: IPv4's `fib_table_delete` sends RTM_DELROUTE before unlinking the route, a nexthop is
    /// announced deleted before its routes go, an address before the routes through it; a lookup
    /// made on the notification can still find the old route, and nothing more will be sent. So a
    /// batch with a removal (or a link change) is asked about again shortly after, twice.
    private(set) var recheckAt: ContinuousClock.Instant?
    /// Set by a message whose effect the kernel may complete after announcing it (the first dump's
    /// messages are not: `run()` clears it).
    var removalSeen = false
    /// How far along the rechecks after the last removal are (an index into `recheckDelays`; at
    /// its end, none is due).
    private var recheckStage = MessageReader.recheckDelays.count
    static let recheckDelays: [Duration] = [.milliseconds(20), .milliseconds(200)]
    static let dumpTimeout: Duration = .seconds(5)

    /// Waits up to ``dumpTimeout`` for `descriptor` to be readable; false when the time ran out.
    private static func waitReadable(_ descriptor: Int32) throws(PathMonitorError) -> Bool {
        do throws(SystemError) {
            return try SystemCall.poll(descriptor, events: Int16(POLLIN), timeout: dumpTimeout) != 0
        } catch {
            throw .netlinkFailed(operation: "poll", errno: error.code)
        }
    }
    static let resyncAttempts = 5
    /// `rta_expires` counts clock ticks (USER_HZ).
    private static let ticksPerSecond = Double(max(1, sysconf(Int32(_SC_CLK_TCK))))

    init(
        sysfs: SysfsReader?, lookupAddresses: [IPAddress] = SystemPathSource.Configuration.defaultRouteLookupAddresses,
        destinations: @escaping @Sendable () -> Set<IPAddress> = { [] }
    ) {
        self.sysfs = sysfs
        self.lookupAddresses = lookupAddresses
        self.destinations = destinations
        lookedUp = lookupAddresses
    }

    /// Reads every pending notification. Returns whether the snapshot changed. An overrun (ENOBUFS),
    /// a message stream that cannot be trusted, or `forceResync` rebuilds the state with a full dump.
    /// The kernel's route lookups are asked again afterwards when anything read could change them.
    mutating func drain(
        events: inout NetlinkSocket, requests: inout NetlinkSocket, probe: borrowing ConnectProbe,
        buffer: UnsafeMutableRawBufferPointer, forceResync: Bool
    ) throws(PathMonitorError) -> Bool {
        var needsResync = forceResync
        var changed = false
        readLoop: while true {
            switch try events.receive(into: buffer) {
            case .wouldBlock: break readLoop
            case .overrun: needsResync = true
            case .bytes(let count):
                let outcome = apply(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
                changed = outcome.changed || changed
                needsResync = needsResync || outcome.untrusted
            }
        }
        if needsResync {
            NetReachDiagnostics.log(
                "netlink messages were lost (overrun or malformed stream); re-reading the kernel state")
            let before = store.snapshot
            try resync(events: &events, requests: &requests, buffer: buffer)
            changed = changed || store.snapshot != before
        }
        if lookupsStale {
            changed = try refreshRouteLookups(requests: &requests, probe: probe, buffer: buffer) || changed
        }
        return changed
    }

    /// Asks the kernel where traffic to the internet goes, per family, the way a program's socket
    /// gets its route (``ConnectProbe``: the kernel picks the source, then routes with it), bound to
    /// each other interface that could carry it (up with carrier and an address of the family), and
    /// to each monitored destination, and stores the answers. Returns whether they changed.
    ///
    /// "The internet" is not one address: a VPN's host route to its DNS server, or a network's
    /// `blackhole 8.8.8.8/32`, covers one destination and must not decide for all of them. Each
    /// family's candidates are asked in order until one is routed by a default route (prefix 0);
    /// otherwise the one whose route is broadest (shortest prefix, the table entry the kernel
    /// matched: `ip route get fibmatch`) stands for the internet. A destination no route matches
    /// at all counts as broadest: that is where "the internet" has no route either. A refused one
    /// counts as narrowest (the kernel tells no refusing route's prefix, even to `fibmatch`), so a
    /// refusal decides only when every candidate is refused (a kill switch, a `blackhole default`).
    mutating func refreshRouteLookups(
        requests: inout NetlinkSocket, probe: borrowing ConnectProbe, buffer: UnsafeMutableRawBufferPointer
    ) throws(PathMonitorError) -> Bool {
        lookupsStale = false
        let now = ContinuousClock.now
        var lookups: [IPAddress.Family: RouteLookup] = [:]
        var scoped: [IPAddress.Family: [Int: RouteLookup]] = [:]
        var earliest: ContinuousClock.Instant?
        func noteExpiry(_ seconds: Double?) {
            // A few milliseconds late, so the kernel already treats the route as expired.
            guard let seconds else { return }
            let expiry = now + .milliseconds(Int((seconds * 1000).rounded(.up)) + 5)
            earliest = min(earliest ?? expiry, expiry)
        }
        for family in [IPAddress.Family.ipv4, .ipv6] {
            var best: (address: IPAddress, answer: RouteQuery.Answer, breadth: Int)?
            for candidate in lookupAddresses where candidate.family == family {
                let answer = try connectLookUp(candidate, probe: probe, requests: &requests, buffer: buffer)
                let breadth: Int = if case .refused = answer.lookup { 256 } else { Int(answer.prefixLength ?? 0) }
                if breadth < best?.breadth ?? .max { best = (candidate, answer, breadth) }
                if breadth == 0 { break }
            }
            guard let best else { continue }
            lookups[family] = best.answer.lookup
            noteExpiry(best.answer.expiresIn)
            guard case .route(let chosen) = best.answer.lookup else { continue }
            var addressed = Set<Int>()
            for entry in store.snapshot.addressTable.values where entry.address.family == family && entry.isUsable {
                addressed.insert(entry.interfaceIndex)
            }
            let legs = Set(chosen.nextHops.map(\.interfaceIndex) + [chosen.interfaceIndex])
            for link in store.snapshot.links.values
            where !legs.contains(link.index) && link.isOperational && !link.isLoopback && addressed.contains(link.index)
            {
                let bound = try boundLookUp(
                    best.address, interfaceIndex: link.index, requests: &requests, buffer: buffer)
                scoped[family, default: [:]][link.index] = bound.lookup
                noteExpiry(bound.expiresIn)
            }
        }
        var destinationLookups: [IPAddress: RouteLookup] = [:]
        let destinations = destinations()
        lookedUp = lookupAddresses + destinations
        for destination in destinations {
            let answer = try connectLookUp(destination, probe: probe, requests: &requests, buffer: buffer)
            destinationLookups[destination] = answer.lookup
            noteExpiry(answer.expiresIn)
        }
        nextExpiry = earliest
        if removalSeen {
            removalSeen = false
            recheckStage = 0
        } else if let due = recheckAt, now >= due {
            recheckStage += 1
        }
        recheckAt = recheckStage < Self.recheckDelays.count ? now + Self.recheckDelays[recheckStage] : nil
        let changed = store.setRouteLookups(lookups, scoped: scoped, destinations: destinationLookups)
        watchedGateways = Self.gateways(of: store.snapshot)
        return changed
    }

    /// Where a connected socket to `destination` goes: the source the kernel picks for it
    /// (``ConnectProbe``), then `ip route get DESTINATION from SOURCE` for the route and the same
    /// with `fibmatch` for the table entry (its prefix, its legs, its lifetime). A refused connect
    /// is the kernel's verdict as it stands (its errno).
    private func connectLookUp(
        _ destination: IPAddress, probe: borrowing ConnectProbe, requests: inout NetlinkSocket,
        buffer: UnsafeMutableRawBufferPointer
    ) throws(PathMonitorError) -> RouteQuery.Answer {
        // A link-local destination names no link without a scope, and a socket cannot connect to
        // one without it (EINVAL): the kernel's lookup answers for it, as before.
        if destination.isLinkLocal { return try lookUp(destination, requests: &requests, buffer: buffer) }
        switch probe.source(for: destination) {
        case .failure(let failure):
            return RouteQuery.Answer(lookup: RouteLookup(errno: failure.errno))
        case .success(let source):
            let answer = try lookUp(destination, source: source, requests: &requests, buffer: buffer)
            guard case .route(var route) = answer.lookup else { return answer }
            let entry = try lookUp(destination, source: source, fibMatch: true, requests: &requests, buffer: buffer)
            route.source = source
            if case .route(let matched) = entry.lookup { route.nextHops = matched.nextHops }
            // With `fib_multipath_use_neigh` the kernel leaves out a leg whose gateway's neighbour
            // entry is not valid (FAILED, INCOMPLETE): no route message says so, its neighbour does.
            if destination.family == .ipv4, route.nextHops.count > 1, probe.multipathUsesNeighbours {
                route.nextHops = try withNeighbourVerdicts(route.nextHops, requests: &requests, buffer: buffer)
            }
            return RouteQuery.Answer(
                lookup: .route(route), expiresIn: entry.expiresIn ?? answer.expiresIn,
                prefixLength: entry.prefixLength)
        }
    }

    /// Where a socket bound to `interfaceIndex` (`SO_BINDTODEVICE`) would send traffic to
    /// `destination`: in two stages too, the source the kernel picks for that interface first.
    private func boundLookUp(
        _ destination: IPAddress, interfaceIndex: Int, requests: inout NetlinkSocket,
        buffer: UnsafeMutableRawBufferPointer
    ) throws(PathMonitorError) -> RouteQuery.Answer {
        let first = try lookUp(destination, interfaceIndex: interfaceIndex, requests: &requests, buffer: buffer)
        guard case .route(let route) = first.lookup, let source = route.source else { return first }
        let answer = try lookUp(
            destination, source: source, interfaceIndex: interfaceIndex, requests: &requests, buffer: buffer)
        guard case .route(var sourced) = answer.lookup else { return answer }
        sourced.source = sourced.source ?? source
        guard destination.family == .ipv6 else { return RouteQuery.Answer(lookup: .route(sourced)) }
        // Only IPv6 routes expire (router advertisements), and only the table entry says when.
        let entry = try lookUp(
            destination, source: source, interfaceIndex: interfaceIndex, fibMatch: true,
            requests: &requests, buffer: buffer)
        return RouteQuery.Answer(lookup: .route(sourced), expiresIn: entry.expiresIn)
    }

    /// Every gateway the snapshot names: of default routes, of the lookups and their legs.
    private static func gateways(of snapshot: SystemSnapshot) -> Set<IPAddress> {
        var gateways = Set(snapshot.defaultRoutes.compactMap(\.gateway))
        let lookups =
            Array(snapshot.routeLookups.values) + snapshot.scopedRouteLookups.values.flatMap(\.values)
            + Array(snapshot.destinationLookups.values)
        for case .route(let route) in lookups {
            if let gateway = route.gateway { gateways.insert(gateway) }
            gateways.formUnion(route.nextHops.compactMap(\.gateway))
        }
        return gateways
    }

    /// `legs`, each whose gateway's neighbour entry the kernel does not count as valid marked dead
    /// (`fib_good_nh`: no entry counts as reachable).
    private func withNeighbourVerdicts(
        _ legs: [RouteLookup.NextHop], requests: inout NetlinkSocket, buffer: UnsafeMutableRawBufferPointer
    ) throws(PathMonitorError) -> [RouteLookup.NextHop] {
        var judged = legs
        for index in judged.indices where !judged[index].isDead {
            guard let gateway = judged[index].gateway else { continue }
            let sequence = try requests.requestNeighbour(gateway, interfaceIndex: judged[index].interfaceIndex)
            let answer = try awaitAnswer(on: &requests, buffer: buffer, what: "a neighbour lookup") { bytes in
                RouteQuery.neighbourAnswer(in: bytes, sequence: sequence)
            }
            if case .state(let state) = answer, state & RouteQuery.validNeighbourStates == 0 {
                judged[index].isDead = true
            }
        }
        return judged
    }

    /// Reads the requests socket until `answer` finds the reply it waits for.
    private func awaitAnswer<Answer>(
        on requests: inout NetlinkSocket, buffer: UnsafeMutableRawBufferPointer, what: String,
        _ answer: (UnsafeRawBufferPointer) -> Answer?
    ) throws(PathMonitorError) -> Answer {
        while true {
            switch try requests.receive(into: buffer) {
            case .bytes(let count):
                if let found = answer(UnsafeRawBufferPointer(rebasing: buffer[0..<count])) { return found }
            case .overrun:
                continue
            case .wouldBlock:
                // The kernel answers inside `send`; waiting is only for the unexpected.
                guard try Self.waitReadable(requests.fd) else {
                    throw .dumpFailed("no answer to \(what) within \(Self.dumpTimeout)")
                }
            }
        }
    }

    /// One route lookup on the requests socket; replies to earlier requests are skipped.
    private func lookUp(
        _ address: IPAddress, source: IPAddress? = nil, interfaceIndex: Int? = nil, fibMatch: Bool = false,
        requests: inout NetlinkSocket, buffer: UnsafeMutableRawBufferPointer
    ) throws(PathMonitorError) -> RouteQuery.Answer {
        let sequence = try requests.requestRoute(
            to: address, source: source, interfaceIndex: interfaceIndex, fibMatch: fibMatch)
        return try awaitAnswer(on: &requests, buffer: buffer, what: "a route lookup") { bytes in
            RouteQuery.answer(in: bytes, sequence: sequence, ticksPerSecond: Self.ticksPerSecond)
        }
    }

    /// Rebuilds the store from dumps of links, addresses and routes, on the requests socket.
    ///
    /// Why this is exact: every notification carries the whole new state of its object, so a dump
    /// taken after the events socket was emptied, followed by every notification queued since, in
    /// order, ends in the kernel's state, whatever the dump saw of changes made meanwhile. The dumps
    /// run on a socket joined to no group, so a flood of notifications cannot stall them; it was
    /// opened with the events socket and lives as long, so a resync reads the same namespace as the
    /// events, never whatever a namespace's path names by then.
    mutating func resync(
        events: inout NetlinkSocket, requests dumps: inout NetlinkSocket, buffer: UnsafeMutableRawBufferPointer
    ) throws(PathMonitorError) {
        // Whatever is queued predates the dump and may miss its own deletions (lost in the overrun):
        // drop it all, past any further overrun, until the socket is empty.
        try discardPending(events, buffer: buffer)
        for _ in 0..<Self.resyncAttempts {
            // Replies to a dump that an earlier attempt gave up on must not be read as this one's.
            try discardPending(dumps, buffer: buffer)
            store.resetKernelState()
            var consistent = true
            for dump in NetlinkSocket.Dump.allCases {
                consistent = try self.dump(dump, socket: &dumps, buffer: buffer) && consistent
            }
            if consistent { return }
        }
        throw .dumpFailed("the kernel state kept changing during \(Self.resyncAttempts) dumps")
    }

    private func discardPending(
        _ socket: borrowing NetlinkSocket, buffer: UnsafeMutableRawBufferPointer
    ) throws(PathMonitorError) {
        while true {
            if case .wouldBlock = try socket.receive(into: buffer) { return }
        }
    }

    /// Runs one dump to its end; returns `false` if the kernel flagged it inconsistent or aborted it.
    private mutating func dump(
        _ dump: NetlinkSocket.Dump, socket: inout NetlinkSocket, buffer: UnsafeMutableRawBufferPointer
    ) throws(PathMonitorError) -> Bool {
        let sequence = try socket.requestDump(dump)
        var consistent = true
        while true {
            guard try Self.waitReadable(socket.fd) else {
                throw .dumpFailed("no answer from the kernel within \(Self.dumpTimeout)")
            }
            switch try socket.receive(into: buffer) {
            case .wouldBlock: continue
            case .overrun: consistent = false // keep reading: a new dump cannot start before this one ends
            case .bytes(let count):
                let outcome = apply(
                    UnsafeRawBufferPointer(rebasing: buffer[0..<count]), dump: (sequence, socket.portID))
                if outcome.untrusted { consistent = false }
                if let error = outcome.dumpError {
                    // The kernel aborts a dump with ENOBUFS when the socket's buffer overflows while
                    // it is being read (and EBUSY/EINTR are as passing): try the whole dump again.
                    if [ENOBUFS, EBUSY, EINTR].contains(error) { return false }
                    throw .dumpFailed("kernel refused the \(dump) dump: \(errnoDescription(error))")
                }
                if let interrupted = outcome.dumpDone { return consistent && !interrupted }
            }
        }
    }

    struct Outcome {
        var changed = false
        /// The buffer's framing was broken, so messages may have been lost.
        var untrusted = false
        /// Set when the dump with the requested sequence ended (value: flagged interrupted).
        var dumpDone: Bool?
        var dumpError: Int32?
    }

    /// Applies one received buffer.
    /// `dump` names the sequence and port of a dump under way, to recognize its replies.
    mutating func apply(_ bytes: UnsafeRawBufferPointer, dump: (sequence: UInt32, portID: UInt32)? = nil) -> Outcome {
        var outcome = Outcome()
        for result in RtnetlinkParser.parse(bytes) {
            switch result {
            case .failure(let error):
                NetReachDiagnostics.log("skipped a malformed netlink message: \(error)")
                if case .truncatedHeader = error { outcome.untrusted = true }
                if case .badLength = error { outcome.untrusted = true }
            case .success(let envelope):
                let ours = dump.map { envelope.sequence == $0.sequence && envelope.portID == $0.portID } ?? false
                // On the dumps socket only the current dump's replies count.
                if dump != nil && !ours { continue }
                // The kernel flags any part of a dump that raced with a change, not only NLMSG_DONE.
                if ours && envelope.flags & RtnetlinkParser.flagDumpInterrupted != 0 { outcome.untrusted = true }
                switch envelope.message {
                case .done(let interrupted) where ours:
                    outcome.dumpDone = interrupted || envelope.flags & RtnetlinkParser.flagDumpInterrupted != 0
                case .error(let code) where ours && code != 0:
                    outcome.dumpError = code
                case .done, .error, .other:
                    break
                case .newLink(var link):
                    if let sysfs, store.snapshot.links[link.index]?.name != link.name {
                        (link.deviceType, link.isWireless) = sysfs.facts(forInterface: link.name)
                    }
                    // A link message that changes nothing kept (statistics, an MTU) changes no route.
                    if store.apply(.newLink(link)) {
                        outcome.changed = true
                        lookupsStale = true
                        removalSeen = true
                    }
                case .ignoredRoute(let coverage):
                    if lookedUp.contains(where: coverage.covers) {
                        lookupsStale = true
                        removalSeen = true
                    }
                case .neighbour(let address):
                    // Only a gateway's reachability moves the kernel's choice; every other
                    // neighbour (the LAN's hosts, refreshed all the time) costs a set lookup.
                    if watchedGateways.contains(address) { lookupsStale = true }
                case .networkConfiguration:
                    lookupsStale = true
                case .newAddress, .newDefaultRoute:
                    // Announced after the kernel made them: no recheck needed.
                    lookupsStale = true
                    outcome.changed = store.apply(envelope.message) || outcome.changed
                default:
                    removalSeen = true
                    // Addresses count even unchanged: a flag the store does not keep (deprecated,
                    // optimistic) changes which source the kernel picks.
                    lookupsStale = true
                    outcome.changed = store.apply(envelope.message) || outcome.changed
                }
            }
        }
        return outcome
    }
}
#endif
