#if os(Linux)
@testable import NetReach
import NetReachTestSupport
import Testing

// Fixtures, as `ip link` / `ip addr` / `ip route` would show them.
private func ip(_ text: String) -> IPAddress { IPAddress(text)! }
private typealias Link = SystemSnapshot.Link
private typealias Address = SystemSnapshot.Address
private typealias Route = SystemSnapshot.DefaultRoute

private let eth0 = Link(index: 2, name: "eth0") // UP, carrier
private let eth0AdminDown = Link(index: 2, name: "eth0", isUp: false, hasCarrier: false)
private let eth0NoCarrier = Link(index: 2, name: "eth0", isUp: true, hasCarrier: false)
private let eth1 = Link(index: 3, name: "eth1")
private let eth0v4 = Address(interfaceIndex: 2, address: ip("192.0.2.10"), prefixLength: 24)
private let eth0v6 = Address(interfaceIndex: 2, address: ip("2001:db8::10"), prefixLength: 64)
private let eth1v4 = Address(interfaceIndex: 3, address: ip("198.51.100.10"), prefixLength: 24)
private let eth0DefaultV4 = Route(interfaceIndex: 2, gateway: ip("192.0.2.1")) // metric 0
private let eth0DefaultV6 = Route(interfaceIndex: 2, gateway: ip("2001:db8::1"), metric: 1024)
private let eth1DefaultV4 = Route(interfaceIndex: 3, gateway: ip("198.51.100.1"), metric: 100)

/// eth0 dual-stack with both default routes, eth1 IPv4 with a backup default route.
private let twoLinks = SystemSnapshot(
    links: [eth0, eth1], addresses: [eth0v4, eth0v6, eth1v4],
    defaultRoutes: [eth0DefaultV4, eth0DefaultV6, eth1DefaultV4])

/// One row of a table: a message, whether the store must report a change, and the snapshot after it.
private struct Step: CustomTestStringConvertible {
    var message: RtnetlinkMessage
    var changed: Bool
    var snapshot: SystemSnapshot
    var testDescription: String { "\(message) → changed \(changed)" }
}

/// A store already holding `snapshot`, built through messages as the kernel would send them.
private func store(holding snapshot: SystemSnapshot) -> SnapshotStore {
    var store = SnapshotStore()
    for link in snapshot.links.values { _ = store.apply(.newLink(link)) }
    for address in snapshot.addresses { _ = store.apply(.newAddress(address)) }
    for route in snapshot.defaultRoutes { _ = store.apply(.newDefaultRoute([route], replaces: false)) }
    return store
}

/// Applies each step in order and checks its `changed` and resulting snapshot.
private func play(
    _ steps: [Step], from initial: SystemSnapshot = SystemSnapshot(), sourceLocation: SourceLocation = #_sourceLocation
) {
    var store = store(holding: initial)
    #expect(store.snapshot == initial, "fixture", sourceLocation: sourceLocation)
    for (number, step) in steps.enumerated() {
        let changed = store.apply(step.message)
        #expect(changed == step.changed, "step \(number + 1): \(step.message)", sourceLocation: sourceLocation)
        #expect(store.snapshot == step.snapshot, "step \(number + 1): \(step.message)", sourceLocation: sourceLocation)
    }
}

@Suite("SnapshotStore")
struct SnapshotStoreTests {
    @Test func bringingUpAnInterfaceChangesTheSnapshotAtEachStep() {
        play([
            Step(
                message: .newLink(eth0), changed: true,
                snapshot: SystemSnapshot(links: [eth0])),
            Step(
                message: .newAddress(eth0v4), changed: true,
                snapshot: SystemSnapshot(links: [eth0], addresses: [eth0v4])),
            Step(
                message: .newAddress(eth0v6), changed: true,
                snapshot: SystemSnapshot(links: [eth0], addresses: [eth0v4, eth0v6])),
            Step(
                message: .newDefaultRoute([eth0DefaultV4], replaces: false), changed: true,
                snapshot: SystemSnapshot(links: [eth0], addresses: [eth0v4, eth0v6], defaultRoutes: [eth0DefaultV4])),
            Step(
                message: .newDefaultRoute([eth0DefaultV6], replaces: false), changed: true,
                snapshot: SystemSnapshot(
                    links: [eth0], addresses: [eth0v4, eth0v6], defaultRoutes: [eth0DefaultV4, eth0DefaultV6])),
        ])
    }

    @Test(arguments: [
        RtnetlinkMessage.newLink(eth0),
        .newAddress(eth0v4),
        .newDefaultRoute([eth0DefaultV4], replaces: false),
        .newDefaultRoute([eth0DefaultV4, eth1DefaultV4], replaces: false),
    ])
    func duplicateMessageChangesNothing(message: RtnetlinkMessage) {
        var store = SnapshotStore()
        let first = store.apply(message)
        let once = store.snapshot
        let second = store.apply(message)
        #expect(first && !second)
        #expect(store.snapshot == once)
    }

    @Test func duplicateReplaceMessageChangesNothing() {
        // `ip route replace` with the route that is already there: the kernel still notifies with
        // NLM_F_REPLACE, and nothing changed.
        var store = store(holding: twoLinks)
        let changed = store.apply(.newDefaultRoute([eth0DefaultV4], replaces: true))
        #expect(store.snapshot == twoLinks)
        #expect(!changed)
    }

    @Test func adminDownDropsTheLinksRoutesOfBothFamilies() {
        // The kernel flushes IPv4 routes of a downed link without RTM_DELROUTE.
        play(
            [
                Step(
                    message: .newLink(eth0AdminDown), changed: true,
                    snapshot: SystemSnapshot(
                        links: [eth0AdminDown, eth1], addresses: [eth0v4, eth0v6, eth1v4],
                        defaultRoutes: [eth1DefaultV4]))
            ], from: twoLinks)
    }

    @Test func linkUpAgainDoesNotBringRoutesBack() {
        play(
            [
                Step(
                    message: .newLink(eth0AdminDown), changed: true,
                    snapshot: SystemSnapshot(
                        links: [eth0AdminDown, eth1], addresses: [eth0v4, eth0v6, eth1v4],
                        defaultRoutes: [eth1DefaultV4])),
                Step(
                    message: .newLink(eth0), changed: true,
                    snapshot: SystemSnapshot(
                        links: [eth0, eth1], addresses: [eth0v4, eth0v6, eth1v4],
                        defaultRoutes: [eth1DefaultV4])),
            ], from: twoLinks)
    }

    @Test func carrierLossKeepsRoutes() {
        play(
            [
                Step(
                    message: .newLink(eth0NoCarrier), changed: true,
                    snapshot: SystemSnapshot(
                        links: [eth0NoCarrier, eth1], addresses: [eth0v4, eth0v6, eth1v4],
                        defaultRoutes: [eth0DefaultV4, eth0DefaultV6, eth1DefaultV4]))
            ], from: twoLinks)
    }

    @Test func deleteLinkDropsItsAddressesAndRoutes() {
        play(
            [
                Step(
                    message: .deleteLink(index: 2), changed: true,
                    snapshot: SystemSnapshot(links: [eth1], addresses: [eth1v4], defaultRoutes: [eth1DefaultV4])),
                Step(
                    message: .deleteLink(index: 2), changed: false,
                    snapshot: SystemSnapshot(links: [eth1], addresses: [eth1v4], defaultRoutes: [eth1DefaultV4])),
            ], from: twoLinks)
    }

    @Test func replaceSwapsTheRouteOfSameFamilyTableAndMetric() {
        let newGateway = Route(interfaceIndex: 2, gateway: ip("192.0.2.254")) // IPv4, main, metric 0
        play(
            [
                Step(
                    message: .newDefaultRoute([newGateway], replaces: true), changed: true,
                    snapshot: SystemSnapshot(
                        links: [eth0, eth1], addresses: [eth0v4, eth0v6, eth1v4],
                        defaultRoutes: [newGateway, eth0DefaultV6, eth1DefaultV4]))
            ], from: twoLinks)
    }

    @Test func replaceWithAnotherMetricAddsBesideTheExistingRoute() {
        let otherMetric = Route(interfaceIndex: 2, gateway: ip("192.0.2.254"), metric: 50)
        play(
            [
                Step(
                    message: .newDefaultRoute([otherMetric], replaces: true), changed: true,
                    snapshot: SystemSnapshot(
                        links: [eth0, eth1], addresses: [eth0v4, eth0v6, eth1v4],
                        defaultRoutes: [eth0DefaultV4, eth0DefaultV6, eth1DefaultV4, otherMetric]))
            ], from: twoLinks)
    }

    @Test func deleteOfARouteNotPresentChangesNothing() {
        play(
            [
                Step(
                    message: .deleteDefaultRoute([Route(interfaceIndex: 2, gateway: ip("192.0.2.99"))]), changed: false,
                    snapshot: twoLinks),
                Step(
                    message: .deleteDefaultRoute([Route(interfaceIndex: 2, gateway: ip("192.0.2.1"), metric: 7)]),
                    changed: false,
                    snapshot: twoLinks),
            ], from: twoLinks)
    }

    @Test func deleteOfAPresentRouteRemovesExactlyIt() {
        play(
            [
                Step(
                    message: .deleteDefaultRoute([eth0DefaultV6]), changed: true,
                    snapshot: SystemSnapshot(
                        links: [eth0, eth1], addresses: [eth0v4, eth0v6, eth1v4],
                        defaultRoutes: [eth0DefaultV4, eth1DefaultV4]))
            ], from: twoLinks)
    }

    @Test(arguments: [
        RtnetlinkMessage.ignoredRoute(.everything(.ipv4), removed: true), .done(interrupted: false),
        .done(interrupted: true),
        .error(errno: 16),
        .error(errno: 0), .other(type: 28),
    ])
    func messagesWithoutStateChangeNothing(message: RtnetlinkMessage) {
        play([Step(message: message, changed: false, snapshot: twoLinks)], from: twoLinks)
    }

    @Test func deleteAddressRemovesItOnce() {
        let afterDelete = SystemSnapshot(
            links: [eth0, eth1], addresses: [eth0v4, eth1v4],
            defaultRoutes: [eth0DefaultV4, eth0DefaultV6, eth1DefaultV4])
        play(
            [
                Step(message: .deleteAddress(eth0v6), changed: true, snapshot: afterDelete),
                Step(message: .deleteAddress(eth0v6), changed: false, snapshot: afterDelete),
            ], from: twoLinks)
    }

    @Test func addressFlagChangeReplacesTheAddress() {
        // DAD finishing: the same address comes again without IFA_F_TENTATIVE.
        let tentative = Address(interfaceIndex: 2, address: ip("2001:db8::10"), prefixLength: 64, isTentative: true)
        play([
            Step(message: .newAddress(tentative), changed: true, snapshot: SystemSnapshot(addresses: [tentative])),
            Step(message: .newAddress(eth0v6), changed: true, snapshot: SystemSnapshot(addresses: [eth0v6])),
        ])
    }

    @Test func sysfsFactsSurviveAFlagChangeOfTheSameLink() {
        // sysfs is read when a link first appears; later RTM_NEWLINKs carry kernel facts only.
        let wlan0 = Link(index: 4, name: "wlan0", deviceType: "wlan", isWireless: true)
        let wlan0NoCarrierFromKernel = Link(index: 4, name: "wlan0", isUp: true, hasCarrier: false)
        let wlan0NoCarrier = Link(
            index: 4, name: "wlan0", isUp: true, hasCarrier: false, deviceType: "wlan", isWireless: true)
        play([
            Step(message: .newLink(wlan0), changed: true, snapshot: SystemSnapshot(links: [wlan0])),
            Step(
                message: .newLink(wlan0NoCarrierFromKernel), changed: true,
                snapshot: SystemSnapshot(links: [wlan0NoCarrier])),
            Step(
                message: .newLink(wlan0NoCarrierFromKernel), changed: false,
                snapshot: SystemSnapshot(links: [wlan0NoCarrier])),
        ])
    }

    @Test func renamedLinkDropsTheOldNamesSysfsFacts() {
        let wlan0 = Link(index: 4, name: "wlan0", deviceType: "wlan", isWireless: true)
        let renamed = Link(index: 4, name: "uplink")
        play([
            Step(message: .newLink(wlan0), changed: true, snapshot: SystemSnapshot(links: [wlan0])),
            Step(message: .newLink(renamed), changed: true, snapshot: SystemSnapshot(links: [renamed])),
        ])
    }

    @Test func onlyWhatTheLookupsDependOnAsksTheKernelAgain() {
        var store = SnapshotStore()
        let watch = SnapshotStore.LookupWatch(addresses: [ip("8.8.8.8")], gateways: [ip("192.0.2.1")])
        // A LAN host's neighbour entry changes all the time and moves no route.
        #expect(store.absorb(.neighbour(ip("192.0.2.77")), watching: watch) == SnapshotStore.Absorbed())
        #expect(
            store.absorb(.neighbour(ip("192.0.2.1")), watching: watch)
                == SnapshotStore.Absorbed(asksLookups: .both), "the gateway's entry decides a multipath leg")
        let eth0 = SystemSnapshot.Link(index: 2, name: "eth0")
        #expect(
            store.absorb(.newLink(eth0), watching: watch)
                == SnapshotStore.Absorbed(changed: true, asksLookups: .both, announcesRemoval: true))
        #expect(store.absorb(.newLink(eth0), watching: watch) == SnapshotStore.Absorbed(), "nothing kept changed")
        #expect(
            store.absorb(.rule(.ipv6), watching: watch) == SnapshotStore.Absorbed(asksLookups: .ipv6),
            "a rule changes its family only, and is announced once the kernel uses it")
        #expect(
            store.absorb(.nexthop, watching: watch)
                == SnapshotStore.Absorbed(asksLookups: .both, announcesRemoval: true))
        let v6 = SystemSnapshot.Address(interfaceIndex: 2, address: ip("2001:db8::2"), prefixLength: 64)
        #expect(
            store.absorb(.newAddress(v6), watching: watch)
                == SnapshotStore.Absorbed(changed: true, asksLookups: .ipv6), "an IPv6 address moves no IPv4 route")
        #expect(
            store.absorb(.networkConfiguration(.ipv4), watching: watch) == SnapshotStore.Absorbed(asksLookups: .ipv4))
    }

    @Test func nameserversChangeOnlyWhenDifferent() {
        var store = SnapshotStore()
        let changes = [
            store.setNameservers([ip("192.0.2.53")]),
            store.setNameservers([ip("192.0.2.53")]),
            store.setNameservers([ip("192.0.2.53"), ip("2001:db8::53")]),
        ]
        #expect(changes == [true, false, true])
        #expect(store.snapshot.nameservers == [ip("192.0.2.53"), ip("2001:db8::53")])
    }

    @Test func resetKeepsNameserversAndForgetsKernelState() {
        var store = store(holding: twoLinks)
        _ = store.setNameservers([ip("192.0.2.53")])
        store.resetKernelState()
        #expect(store.snapshot == SystemSnapshot(nameservers: [ip("192.0.2.53")]))
    }
}
#endif

/// The kernel's silent IPv4 route flush when an interface loses its last IPv4 address.
@Suite("SnapshotStore: last IPv4 address")
struct SnapshotStoreLastAddressTests {
    static let eth0 = SystemSnapshot.Link(index: 2, name: "eth0")
    static let first = SystemSnapshot.Address(interfaceIndex: 2, address: IPAddress("192.0.2.10")!, prefixLength: 24)
    static let second = SystemSnapshot.Address(
        interfaceIndex: 2, address: IPAddress("198.51.100.10")!, prefixLength: 24)
    static let v6 = SystemSnapshot.Address(interfaceIndex: 2, address: IPAddress("2001:db8::10")!, prefixLength: 64)
    static let routeV4 = SystemSnapshot.DefaultRoute(interfaceIndex: 2, gateway: IPAddress("192.0.2.1")!)
    static let routeV6 = SystemSnapshot.DefaultRoute(
        interfaceIndex: 2, gateway: IPAddress("2001:db8::1")!, metric: 1024)

    func store(_ addresses: [SystemSnapshot.Address]) -> SnapshotStore {
        var store = SnapshotStore()
        _ = store.apply(.newLink(Self.eth0))
        for address in addresses { _ = store.apply(.newAddress(address)) }
        _ = store.apply(.newDefaultRoute([Self.routeV4, Self.routeV6], replaces: false))
        return store
    }

    @Test func removingTheLastIPv4AddressDropsTheIPv4DefaultRouteOnly() {
        var store = store([Self.first, Self.v6])
        let changed = store.apply(.deleteAddress(Self.first))
        #expect(changed)
        #expect(store.snapshot.defaultRoutes == [Self.routeV6])
    }

    @Test func removingOneOfSeveralIPv4AddressesKeepsTheRoute() {
        var store = store([Self.first, Self.second])
        let changed = store.apply(.deleteAddress(Self.second))
        #expect(changed)
        #expect(store.snapshot.defaultRoutes == [Self.routeV4, Self.routeV6])
    }

    @Test func removingAnUnknownAddressChangesNothing() {
        var store = store([Self.second])
        let changed = store.apply(.deleteAddress(Self.first))
        #expect(!changed)
        #expect(store.snapshot.defaultRoutes.count == 2)
    }
}
