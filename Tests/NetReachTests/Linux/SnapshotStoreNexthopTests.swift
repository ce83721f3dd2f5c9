#if os(Linux)
@testable import NetReach
import Testing

/// Default routes through nexthop objects, and routes the kernel updates in place: the messages
/// as the kernel sends them (checked with `ip monitor` on 6.18), the stored routes as a fresh dump
/// would give them.
@Suite("SnapshotStore: nexthop objects and in-place updates")
struct SnapshotStoreNexthopTests {
    static let eth0 = SystemSnapshot.Link(index: 2, name: "eth0")
    static let eth1 = SystemSnapshot.Link(index: 3, name: "eth1")
    static let gatewayA = IPAddress("192.0.2.1")!
    static let gatewayB = IPAddress("198.51.100.1")!
    static let legA = SystemSnapshot.DefaultRoute(interfaceIndex: 2, gateway: gatewayA)
    static let legB = SystemSnapshot.DefaultRoute(interfaceIndex: 3, gateway: gatewayB)
    static let group = NexthopRoute(family: .ipv4, metric: 0, table: 254, nexthopID: 10)

    /// eth0 and eth1 up; `ip nexthop add id 1 via A dev eth0`, `id 2 via B dev eth1`,
    /// `id 10 group 1/2`, `ip route add default nhid 10`.
    func groupStore() -> SnapshotStore {
        var store = SnapshotStore()
        _ = store.apply(.newLink(Self.eth0))
        _ = store.apply(.newLink(Self.eth1))
        _ = store.apply(.newNexthop(NexthopObject(id: 1, kind: .leg(interfaceIndex: 2, gateway: Self.gatewayA))))
        _ = store.apply(.newNexthop(NexthopObject(id: 2, kind: .leg(interfaceIndex: 3, gateway: Self.gatewayB))))
        _ = store.apply(.newNexthop(NexthopObject(id: 10, kind: .group([1, 2]))))
        _ = store.apply(.newNexthopRoute(Self.group, replaces: false))
        return store
    }

    @Test func aRouteThroughAGroupHasTheMembersLegs() {
        #expect(groupStore().snapshot.defaultRoutes == [Self.legA, Self.legB])
    }

    @Test func replacingTheGroupWithOneMemberLeavesOneLeg() {
        // `ip nexthop replace id 10 group 1`: RTM_NEWNEXTHOP, then (compat mode) the route again.
        var store = groupStore()
        let result1 = store.apply(.newNexthop(NexthopObject(id: 10, kind: .group([1]))))
        #expect(result1)
        #expect(store.snapshot.defaultRoutes == [Self.legA])
        let result2 = store.apply(.newNexthopRoute(Self.group, replaces: true))
        #expect(!result2, "the compat notice changes nothing")
        #expect(store.snapshot.defaultRoutes == [Self.legA])
    }

    @Test func deletingAMemberTakesItOutOfTheGroupWithNoRouteMessage() {
        // `ip nexthop del id 2`: RTM_DELNEXTHOP 2, RTM_NEWNEXTHOP 10 group 1, no route message.
        var store = groupStore()
        let result3 = store.apply(.deleteNexthop(id: 2))
        #expect(result3)
        #expect(store.snapshot.defaultRoutes == [Self.legA])
        // The group's own notice after it agrees.
        let result4 = store.apply(.newNexthop(NexthopObject(id: 10, kind: .group([1]))))
        #expect(!result4)
        // The last member: the group goes, and the route with it.
        let result5 = store.apply(.deleteNexthop(id: 1))
        #expect(result5)
        #expect(store.snapshot.defaultRoutes.isEmpty)
        let result6 = store.apply(
            .newNexthop(NexthopObject(id: 2, kind: .leg(interfaceIndex: 3, gateway: Self.gatewayB))))
        #expect(!result6)
        #expect(store.snapshot.defaultRoutes.isEmpty, "a new object with the old id names no route")
    }

    @Test func carrierLossFlushesTheNexthopsThroughTheLink() {
        // `nexthop_flush_dev`: the kernel deletes nexthop 2 and takes it out of group 10, silently.
        var store = groupStore()
        let noCarrier = SystemSnapshot.Link(index: 3, name: "eth1", isUp: true, hasCarrier: false)
        let result7 = store.apply(.newLink(noCarrier))
        #expect(result7)
        #expect(store.snapshot.defaultRoutes == [Self.legA])
        // Carrier back: the kernel does not bring the nexthop back either.
        let result8 = store.apply(.newLink(Self.eth1))
        #expect(result8)
        #expect(store.snapshot.defaultRoutes == [Self.legA])
    }

    @Test func deletingTheRouteRemovesItsLegsAndKeepsAPlainRouteBesideIt() {
        var store = groupStore()
        let plain = SystemSnapshot.DefaultRoute(interfaceIndex: 3, gateway: IPAddress("198.51.100.2")!, metric: 100)
        _ = store.apply(.newDefaultRoute([plain], replaces: false))
        let result9 = store.apply(.deleteNexthopRoute(Self.group))
        #expect(result9)
        #expect(store.snapshot.defaultRoutes == [plain])
        let result10 = store.apply(.deleteNexthopRoute(Self.group))
        #expect(!result10)
    }

    @Test func aSingleNexthopAndABlackholeResolve() {
        var store = SnapshotStore()
        _ = store.apply(.newLink(Self.eth0))
        _ = store.apply(.newNexthop(NexthopObject(id: 7, kind: .leg(interfaceIndex: 2, gateway: Self.gatewayA))))
        _ = store.apply(.newNexthop(NexthopObject(id: 8, kind: .noLeg)))
        _ = store.apply(
            .newNexthopRoute(NexthopRoute(family: .ipv4, metric: 0, table: 254, nexthopID: 7), replaces: false))
        _ = store.apply(
            .newNexthopRoute(NexthopRoute(family: .ipv4, metric: 5, table: 254, nexthopID: 8), replaces: false))
        #expect(store.snapshot.defaultRoutes == [Self.legA])
    }

    @Test func aRouterAdvertisementChangingOnePreferenceKeepsTheOtherRouters() {
        // Two routers' RA defaults, both metric 1024; r2's preference changes: the kernel updates
        // its route in place and announces it with NLM_F_REPLACE (6.18, `ip monitor`).
        let r1 = SystemSnapshot.DefaultRoute(interfaceIndex: 2, gateway: IPAddress("fe80::1")!, metric: 1024)
        let r2 = SystemSnapshot.DefaultRoute(interfaceIndex: 3, gateway: IPAddress("fe80::2")!, metric: 1024)
        var store = SnapshotStore()
        _ = store.apply(.newLink(Self.eth0))
        _ = store.apply(.newLink(Self.eth1))
        _ = store.apply(.newDefaultRoute([r1], replaces: false))
        _ = store.apply(.newDefaultRoute([r2], replaces: false))
        let result11 = store.apply(.newDefaultRoute([r2], replaces: true))
        #expect(!result11)
        #expect(store.snapshot.defaultRoutes == [r1, r2])
        // A replace by a route not there replaced one of that metric, which no message says: the
        // routes of that metric go (the lookups say where traffic goes).
        let r3 = SystemSnapshot.DefaultRoute(interfaceIndex: 2, gateway: IPAddress("fe80::3")!, metric: 1024)
        let result12 = store.apply(.newDefaultRoute([r3], replaces: true))
        #expect(result12)
        #expect(store.snapshot.defaultRoutes == [r3])
    }

    @Test func aNexthopMessageAsksBothFamiliesAndCountsAsARemoval() {
        var store = groupStore()
        let watch = SnapshotStore.LookupWatch(addresses: [IPAddress("8.8.8.8")!])
        let memberDeleted = store.absorb(.deleteNexthop(id: 2), watching: watch)
        #expect(memberDeleted == SnapshotStore.Absorbed(changed: true, asksLookups: .both, announcesRemoval: true))
        let deleted = store.absorb(.deleteNexthopRoute(Self.group), watching: watch)
        #expect(deleted.changed && deleted.announcesRemoval && deleted.asksLookups == .ipv4)
        #expect(deleted.removedRoutes == [RemovedRoute([Self.legA])])
    }

    @Test func resetForgetsNexthopObjects() {
        var store = groupStore()
        store.resetKernelState()
        _ = store.apply(.newNexthopRoute(Self.group, replaces: false))
        #expect(store.snapshot.defaultRoutes.isEmpty)
    }
}

@Suite("MultipathHashPolicy")
struct MultipathHashPolicyTests {
    @Test(
        arguments: [
            (0, nil, MultipathHashPolicy.addresses), (1, nil, .ports), (2, nil, .addresses),
            (3, 0x37, .ports), (3, 0x10, .ports), (3, 0x20, .ports), (3, 0x07, .addresses),
            (3, 0xc00, .addresses), (3, nil, .ports), (9, nil, .ports),
        ] as [(Int, UInt32?, MultipathHashPolicy)])
    func policiesAndFields(_ policy: Int, _ fields: UInt32?, _ expected: MultipathHashPolicy) {
        #expect(MultipathHashPolicy(policy: policy, fields: fields) == expected)
    }

    @Test func theSysctlTextReads() {
        #expect(MultipathHashPolicy.number("1\n") == 1)
        #expect(MultipathHashPolicy.number("0x0037\n") == 0x37)
        #expect(MultipathHashPolicy.number("") == nil)
        #expect(MultipathHashPolicy.number("x\n") == nil)
    }
}
#endif
