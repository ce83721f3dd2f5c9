#if os(Linux)
import Glibc
@testable import NetReach
import Testing

/// When the lookups are asked again after a removal: a deleted route is rechecked only while an
/// answer may still be it; other removals get both rechecks.
@Suite struct RecheckScheduleTests {
    static let gateway = IPAddress("192.0.2.1")!
    static let defaultVia2 = SystemSnapshot.DefaultRoute(interfaceIndex: 2, gateway: gateway)

    static func route(
        interface: Int = 2, gateway: IPAddress? = gateway, table: UInt32 = 254, prefixLength: UInt8? = 0,
        legs: [RouteLookup.NextHop] = []
    ) -> RouteQuery.Answer {
        RouteQuery.Answer(
            lookup: .route(
                RouteLookup.KernelRoute(
                    interfaceIndex: interface, gateway: gateway, table: table, nextHops: legs)),
            prefixLength: prefixLength)
    }

    @Test func aDeletedDefaultRouteMayBeOnlyAnAnswerThroughOneOfItsLegsInItsTable() {
        let removed = RemovedRoute([Self.defaultVia2])
        #expect(removed.mayBe(Self.route()), "the same route, still linked")
        #expect(!removed.mayBe(RouteQuery.Answer(lookup: .noRoute)), "linked, it would have matched")
        #expect(!removed.mayBe(Self.route(interface: 3)), "another interface")
        #expect(!removed.mayBe(Self.route(gateway: IPAddress("192.0.2.9")!)), "another gateway")
        #expect(!removed.mayBe(Self.route(table: 100)), "another table")
        #expect(!removed.mayBe(Self.route(prefixLength: 8)), "a /8, not a default route")
        #expect(removed.mayBe(Self.route(prefixLength: nil)), "no table entry read: unknown")
        #expect(!removed.mayBe(RouteQuery.Answer(lookup: .refused(.unreachable))), "a unicast route refuses nothing")
        #expect(removed.mayBe(RouteQuery.Answer(lookup: .failed(errno: EINVAL))), "a failed lookup: unknown")
        // One leg of a multipath answer is the removed route's.
        let other = IPAddress("192.0.2.7")!
        let multipath = Self.route(
            interface: 3, gateway: other,
            legs: [.init(interfaceIndex: 3, gateway: other), .init(interfaceIndex: 2, gateway: Self.gateway)])
        #expect(removed.mayBe(multipath))
        #expect(
            !removed.mayBe(Self.route(interface: 3, gateway: other, legs: [.init(interfaceIndex: 3, gateway: other)])))
    }

    @Test func aDeletedRouteTheStoreDoesNotKeepIsComparedByPrefixLengthOnly() {
        let removed = RemovedRoute(family: .ipv4, prefixLength: 8)
        #expect(removed.mayBe(Self.route(interface: 9, table: 100, prefixLength: 8)))
        #expect(!removed.mayBe(Self.route(prefixLength: 0)))
        #expect(removed.mayBe(RouteQuery.Answer(lookup: .refused(.blackhole))), "it may have been a blackhole")
    }

    @Test func aLostLinkMayBeUsedOnlyByAnAnswerThroughItOrFromItsAddresses() {
        let lost = LostLink(family: .ipv4, index: 2, addresses: [IPAddress("10.0.0.2")!])
        #expect(lost.mayUse(Self.route()), "through it, still")
        #expect(!lost.mayUse(Self.route(interface: 3)), "through another link")
        #expect(lost.mayUse(Self.route(interface: 3, legs: [.init(interfaceIndex: 3), .init(interfaceIndex: 2)])))
        let fromItsAddress = RouteQuery.Answer(
            lookup: .route(.init(interfaceIndex: 3, source: IPAddress("10.0.0.2")!)), prefixLength: 0)
        #expect(lost.mayUse(fromItsAddress), "another link, but the source is one of its addresses")
        #expect(!lost.mayUse(RouteQuery.Answer(lookup: .noRoute)))
        #expect(!lost.mayUse(RouteQuery.Answer(lookup: .refused(.prohibit))))
        #expect(lost.mayUse(RouteQuery.Answer(lookup: .failed(errno: EINVAL))))
    }

    @Test func aLinkGoingDownNamesItselfAndItsAddressesComingUpNamesNothing() {
        var store = SnapshotStore()
        let watch = KernelQueries().watch
        let eth0 = SystemSnapshot.Link(index: 2, name: "eth0")
        _ = store.absorb(.newLink(eth0), watching: watch)
        let address = IPAddress("10.0.0.2")!
        _ = store.absorb(.newAddress(.init(interfaceIndex: 2, address: address, prefixLength: 24)), watching: watch)
        var down = eth0
        down.isUp = false
        let wentDown = store.absorb(.newLink(down), watching: watch)
        #expect(wentDown.announcesRemoval && wentDown.asksLookups == .both)
        #expect(
            wentDown.lostLinks == [
                LostLink(family: .ipv4, index: 2, addresses: [address]),
                LostLink(family: .ipv6, index: 2, addresses: [address]),
            ])
        // Coming up: routes and addresses come after the message; no answer can show them done.
        let cameUp = store.absorb(.newLink(eth0), watching: watch)
        #expect(cameUp.announcesRemoval && cameUp.lostLinks.isEmpty && cameUp.removedRoutes.isEmpty)
        var removals = AnnouncedRemovals()
        removals.add(cameUp)
        #expect(removals == AnnouncedRemovals(opaque: .both), "rechecked whatever the answers")
        // Carrier lost while admin up is going down too; deleted, the link is lost as well.
        var noCarrier = eth0
        noCarrier.hasCarrier = false
        #expect(store.absorb(.newLink(noCarrier), watching: watch).lostLinks.count == 2)
        // Unchanged: nothing at all.
        #expect(store.absorb(.newLink(noCarrier), watching: watch) == SnapshotStore.Absorbed())
        #expect(store.absorb(.deleteLink(index: 2), watching: watch).lostLinks.map(\.index) == [2, 2])
        // A link that appears only adds.
        #expect(store.absorb(.newLink(eth0), watching: watch).lostLinks.isEmpty)
    }

    @Test func aLostLinkNoAnswerUsesIsNotRecheckedOneStillUsedIs() {
        var schedule = RecheckSchedule()
        let now = ContinuousClock.now
        let links = [IPAddress.Family.ipv4, .ipv6].map { LostLink(family: $0, index: 2, addresses: []) }
        schedule.lookupsMade(at: now, asked: .both, removals: AnnouncedRemovals(links: links), stillSeen: [])
        #expect(schedule.dueAt == nil)
        schedule.lookupsMade(at: now, asked: .both, removals: AnnouncedRemovals(links: links), stillSeen: .ipv6)
        #expect(schedule.families == .ipv6 && schedule.toCompare(with: AnnouncedRemovals()).links == [links[1]])
    }

    @Test func aRouteDeletionNoAnswerCanStillBeIsNotRechecked() {
        var schedule = RecheckSchedule()
        let now = ContinuousClock.now
        let removals = AnnouncedRemovals(routes: [RemovedRoute([Self.defaultVia2])])
        schedule.lookupsMade(at: now, asked: .ipv4, removals: removals, stillSeen: [])
        #expect(schedule.dueAt == nil && schedule.families.isEmpty)
    }

    @Test func aRouteDeletionStillSeenIsRecheckedUntilARecheckNoLongerSeesIt() {
        var schedule = RecheckSchedule()
        let start = ContinuousClock.now
        let removals = AnnouncedRemovals(routes: [RemovedRoute([Self.defaultVia2])])
        schedule.lookupsMade(at: start, asked: .ipv4, removals: removals, stillSeen: .ipv4)
        #expect(schedule.dueAt == start + .milliseconds(20) && schedule.families == .ipv4)
        #expect(schedule.toCompare(with: AnnouncedRemovals()).routes == removals.routes)
        // The first recheck still finds it: the second is due 200 ms later.
        let first = start + .milliseconds(21)
        schedule.lookupsMade(at: first, asked: .ipv4, removals: AnnouncedRemovals(), stillSeen: .ipv4)
        #expect(schedule.dueAt == first + .milliseconds(200) && schedule.families == .ipv4)
        // The second does not: nothing more is due.
        let second = first + .milliseconds(201)
        schedule.lookupsMade(at: second, asked: .ipv4, removals: AnnouncedRemovals(), stillSeen: [])
        #expect(schedule.dueAt == nil && schedule.families.isEmpty)
        #expect(schedule.toCompare(with: AnnouncedRemovals()).routes.isEmpty)
    }

    @Test func aRouteStillSeenAtTheLastRecheckIsNotAskedAboutForever() {
        var schedule = RecheckSchedule()
        let start = ContinuousClock.now
        let removals = AnnouncedRemovals(routes: [RemovedRoute([Self.defaultVia2])])
        schedule.lookupsMade(at: start, asked: .ipv4, removals: removals, stillSeen: .ipv4)
        var now = start
        for delay in RecheckSchedule.delays {
            now = now + delay
            schedule.lookupsMade(at: now, asked: .ipv4, removals: AnnouncedRemovals(), stillSeen: .ipv4)
        }
        #expect(schedule.dueAt == nil, "two rechecks, as for any removal")
    }

    @Test func anOpaqueRemovalGetsBothRechecksWhateverTheAnswers() {
        var schedule = RecheckSchedule()
        let start = ContinuousClock.now
        schedule.lookupsMade(at: start, asked: .both, removals: AnnouncedRemovals(opaque: .both), stillSeen: [])
        #expect(schedule.dueAt == start + .milliseconds(20) && schedule.families == .both)
        let first = start + .milliseconds(20)
        schedule.lookupsMade(at: first, asked: .both, removals: AnnouncedRemovals(), stillSeen: [])
        #expect(schedule.dueAt == first + .milliseconds(200) && schedule.families == .both)
        schedule.lookupsMade(at: first + .milliseconds(200), asked: .both, removals: AnnouncedRemovals(), stillSeen: [])
        #expect(schedule.dueAt == nil)
    }

    @Test func aRemovalDuringTheRechecksStartsThemAgainAndKeepsWhatWasPending() {
        var schedule = RecheckSchedule()
        let start = ContinuousClock.now
        schedule.lookupsMade(at: start, asked: .ipv6, removals: AnnouncedRemovals(opaque: .ipv6), stillSeen: [])
        // An IPv4 route deleted 50 ms later and still seen: IPv6's rechecks go on with it, from the start.
        let later = start + .milliseconds(50)
        let removed = RemovedRoute([Self.defaultVia2])
        schedule.lookupsMade(
            at: later, asked: .ipv4, removals: AnnouncedRemovals(routes: [removed]), stillSeen: .ipv4)
        #expect(schedule.dueAt == later + .milliseconds(20) && schedule.families == .both)
        // At the recheck the route is gone: IPv6's opaque removal is still rechecked once more.
        let first = later + .milliseconds(20)
        schedule.lookupsMade(at: first, asked: .both, removals: AnnouncedRemovals(), stillSeen: [])
        #expect(schedule.dueAt == first + .milliseconds(200) && schedule.families == .ipv6)
    }

    @Test func lookupsBeforeARecheckIsDuePutItOff() {
        var schedule = RecheckSchedule()
        let start = ContinuousClock.now
        schedule.lookupsMade(at: start, asked: .both, removals: AnnouncedRemovals(opaque: .both), stillSeen: [])
        // A change 15 ms later: the recheck comes 20 ms after its lookups, not between the two.
        schedule.lookupsMade(at: start + .milliseconds(15), asked: .ipv4, removals: AnnouncedRemovals(), stillSeen: [])
        #expect(schedule.dueAt == start + .milliseconds(35) && schedule.families == .both)
    }

    @Test func aDeletedRouteOfAFamilyNotAskedStaysPending() {
        var schedule = RecheckSchedule()
        let start = ContinuousClock.now
        let removed = RemovedRoute([Self.defaultVia2])
        schedule.lookupsMade(at: start, asked: .ipv4, removals: AnnouncedRemovals(routes: [removed]), stillSeen: .ipv4)
        // An IPv6 change asks IPv6 only before the recheck: says nothing of the IPv4 route.
        schedule.lookupsMade(
            at: start + .milliseconds(5), asked: .ipv6, removals: AnnouncedRemovals(), stillSeen: [])
        #expect(schedule.families == .ipv4 && schedule.dueAt == start + .milliseconds(25))
    }
    @Test func aFlappingLinkOrRouteIsKeptOnceHoweverOftenItGoes() {
        // A link or route that goes every 15 ms while the answers still use it (it came back) kept
        // one more entry per flap, copied and compared at every change: thousands after a minute.
        var schedule = RecheckSchedule()
        var now = ContinuousClock.now
        let otherGateway = IPAddress("192.0.2.9")!
        for flap in 0..<500 {
            let address = IPAddress("10.0.\(flap % 3).2")!
            let gateway = flap.isMultiple(of: 2) ? Self.gateway : otherGateway
            var removals = AnnouncedRemovals()
            removals.add(
                SnapshotStore.Absorbed(
                    changed: true, asksLookups: .ipv4, announcesRemoval: true,
                    lostLinks: [LostLink(family: .ipv4, index: 2, addresses: [address])]))
            removals.add(
                SnapshotStore.Absorbed(
                    changed: true, asksLookups: .ipv4, announcesRemoval: true,
                    removedRoutes: [RemovedRoute([.init(interfaceIndex: 2, gateway: gateway)])]))
            now = now + .milliseconds(15)
            schedule.lookupsMade(at: now, asked: .ipv4, removals: removals, stillSeen: .ipv4)
        }
        let pending = schedule.toCompare(with: AnnouncedRemovals())
        let addresses: Set<IPAddress> = [IPAddress("10.0.0.2")!, IPAddress("10.0.1.2")!, IPAddress("10.0.2.2")!]
        #expect(pending.links.count == 1 && pending.routes.count == 1)
        #expect(pending.links.first == LostLink(family: .ipv4, index: 2, addresses: addresses))
        // The one kept answers as any of the flaps would: both gateways' routes may be it.
        #expect(pending.routes.first?.mayBe(Self.route()) == true)
        #expect(pending.routes.first?.mayBe(Self.route(gateway: otherGateway)) == true)
        #expect(pending.routes.first?.mayBe(Self.route(gateway: IPAddress("192.0.2.77")!)) == false)
        #expect(schedule.families == .ipv4 && schedule.dueAt == now + .milliseconds(20))
    }

    @Test func routesOfOtherTablesPrefixesOrFamiliesAreKeptApart() {
        var removals = AnnouncedRemovals()
        let routes = [
            RemovedRoute([Self.defaultVia2]),
            RemovedRoute([SystemSnapshot.DefaultRoute(interfaceIndex: 2, gateway: Self.gateway, table: 100)]),
            RemovedRoute(family: .ipv4, prefixLength: 8),
            RemovedRoute(family: .ipv6, prefixLength: 8),
        ]
        for route in routes + routes {
            removals.add(
                SnapshotStore.Absorbed(
                    changed: true, asksLookups: .both, announcesRemoval: true, removedRoutes: [route]))
        }
        #expect(removals.routes == routes)
        // A route whose legs are unknown, deleted with known ones: unknown (any legs may be it).
        var merged = AnnouncedRemovals(routes: [RemovedRoute([Self.defaultVia2])])
        var unknown = RemovedRoute([Self.defaultVia2])
        unknown.legs = nil
        merged = merged.withRoutesAndLinks(of: AnnouncedRemovals(routes: [unknown]))
        #expect(merged.routes == [unknown])
    }
}
#endif
