import NetReach
import Testing

// Fixtures: links and addresses as `ip link`/`ip addr` show them, and the kernel's answer to
// `ip route get 8.8.8.8` / `ip -6 route get 2001:4860:4860::8888` as a RouteLookup.
private typealias Link = SystemSnapshot.Link
private typealias Address = SystemSnapshot.Address
private func ip(_ text: String) -> IPAddress { IPAddress(text)! }
private func address(_ text: String, on index: Int, scope: UInt8 = Address.globalScope) -> Address {
    let address = ip(text)
    return Address(
        interfaceIndex: index, address: address, prefixLength: address.family == .ipv4 ? 24 : 64, scope: scope)
}
private func via(_ index: Int, gateway: String? = nil, source: String?, table: UInt32 = 254) -> RouteLookup {
    .route(.init(interfaceIndex: index, gateway: gateway.map(ip), source: source.map(ip), table: table))
}

private let rawIP: UInt16 = 65534
private let lo = Link(index: 1, name: "lo", isLoopback: true, hardwareType: Link.loopbackHardwareType)
private let eth0 = Link(index: 2, name: "eth0")
private let wlan0 = Link(index: 3, name: "wlan0", isWireless: true)
private let wwan0 = Link(index: 4, name: "wwan0", deviceType: "wwan")
private let wg0 = Link(index: 5, name: "wg0", hardwareType: rawIP, kind: "tun")

/// eth0 with 192.0.2.10/24 and `default via 192.0.2.1` in main, plus whatever lookups a test sets.
private func wired(_ lookups: [IPAddress.Family: RouteLookup]) -> SystemSnapshot {
    SystemSnapshot(
        links: [lo, eth0, wg0], addresses: [address("192.0.2.10", on: 2), address("10.9.0.2", on: 5)],
        defaultRoutes: [.init(interfaceIndex: 2, gateway: ip("192.0.2.1"))],
        nameservers: [ip("192.0.2.53")], routeLookups: lookups)
}

@Suite("PathEvaluator: the kernel's route lookup decides")
struct RouteLookupEvaluationTests {
    @Test func aTunnelInAnotherTableIsWhatTrafficUses() {
        // wg-quick: `default dev wg0 table 51820` behind `not fwmark 51820 table 51820`.
        let path = PathEvaluator.evaluate(wired([.ipv4: via(5, source: "10.9.0.2", table: 51820), .ipv6: .noRoute]))
        #expect(path.status == .satisfied)
        #expect(path.primaryInterface == NetworkInterface(name: "wg0", index: 5, type: .other))
        #expect(path.supportsIPv4 && !path.supportsIPv6)
        // eth0 still has its own default route: a standby interface, after the one in use.
        #expect(path.availableInterfaces.map(\.name) == ["wg0", "eth0"])
    }

    @Test func aMultipathRouteListsEveryLiveLegItsLookupPickedFirst() {
        // `default nexthop via 192.0.2.1 dev eth0 nexthop via 198.51.100.1 dev wlan0 nexthop via
        // 203.0.113.1 dev wwan0 dead`; this flow hashed to the wlan0 leg.
        let legs: [RouteLookup.NextHop] = [
            .init(interfaceIndex: 2, gateway: ip("192.0.2.1")),
            .init(interfaceIndex: 3, gateway: ip("198.51.100.1")),
            .init(interfaceIndex: 4, gateway: ip("203.0.113.1"), isDead: true),
        ]
        var snapshot = wired([
            .ipv4: .route(
                .init(
                    interfaceIndex: 3, gateway: ip("198.51.100.1"), source: ip("198.51.100.10"),
                    nextHops: legs))
        ])
        snapshot.links[3] = wlan0
        snapshot.links[4] = wwan0
        let path = PathEvaluator.evaluate(snapshot)
        #expect(path.isMultipath)
        #expect(path.availableInterfaces.map(\.name) == ["wlan0", "eth0"], "the dead leg is no leg")
        #expect(path.gateways == [ip("198.51.100.1"), ip("192.0.2.1")])
        #expect(path.description.hasSuffix("multipath"), "\(path)")
        // A leg through an interface the requirements exclude carries none of this monitor's traffic.
        let noWired = PathEvaluator.evaluate(snapshot, requirements: .init(prohibitedInterfaceTypes: [.wiredEthernet]))
        #expect(!noWired.isMultipath && noWired.availableInterfaces.map(\.name) == ["wlan0"], "\(noWired)")
        // One leg is no multipath.
        let single = PathEvaluator.evaluate(wired([.ipv4: via(2, gateway: "192.0.2.1", source: "192.0.2.10")]))
        #expect(!single.isMultipath)
    }

    @Test func aFlowHashedOntoALinkdownLegLeavesTheInternetToTheLiveLegsButNotItsOwnDestination() {
        // Linux 6.18, `ignore_routes_with_linkdown` 0: wlan0 lost carrier, and the kernel still
        // hashes some flows onto its leg (`linkdown`), the address asked about among them.
        let legs: [RouteLookup.NextHop] = [
            .init(interfaceIndex: 2, gateway: ip("192.0.2.1")),
            .init(interfaceIndex: 3, gateway: ip("198.51.100.1"), isDead: true),
        ]
        let lookup = RouteLookup.route(
            .init(interfaceIndex: 3, gateway: ip("198.51.100.1"), source: ip("198.51.100.10"), nextHops: legs))
        var snapshot = SystemSnapshot(
            links: [lo, eth0, Link(index: 3, name: "wlan0", hasCarrier: false, isWireless: true)],
            addresses: [address("192.0.2.10", on: 2), address("198.51.100.10", on: 3)],
            defaultRoutes: [.init(interfaceIndex: 2, gateway: ip("192.0.2.1"))],
            nameservers: [ip("192.0.2.53")], routeLookups: [.ipv4: lookup])
        // The internet is many flows: those on the live leg get through.
        let path = PathEvaluator.evaluate(snapshot)
        #expect(path.status == .satisfied, "\(path)")
        #expect(path.primaryInterface?.name == "eth0" && !path.isMultipath, "\(path)")
        #expect(path.gateways == [ip("192.0.2.1")])
        // One destination is one flow: the kernel sends it where it is lost.
        let destination = ip("203.0.113.7")
        snapshot.destinationLookups[destination] = lookup
        #expect(PathEvaluator.evaluate(snapshot, destinations: [destination]) == .unsatisfied(.linkDown))
        // With no live leg left, the internet has none either.
        snapshot.links[2] = Link(index: 2, name: "eth0", hasCarrier: false)
        #expect(PathEvaluator.evaluate(snapshot) == .unsatisfied(.linkDown))
    }

    @Test(arguments: [RouteLookup.Refusal.unreachable, .blackhole, .prohibit])
    func aRefusingRouteOrRuleIsUnsatisfied(_ refusal: RouteLookup.Refusal) {
        let path = PathEvaluator.evaluate(wired([.ipv4: .refused(refusal), .ipv6: .noRoute]))
        #expect(path == .unsatisfied(.routeRefused))
    }

    @Test func aRefusalSaysMoreThanTheOtherFamilysMissingRoute() {
        let path = PathEvaluator.evaluate(wired([.ipv4: .noRoute, .ipv6: .refused(.prohibit)]))
        #expect(path.unsatisfiedReason == .routeRefused)
    }

    @Test func aLinkdownRouteTheKernelStillUsesIsLinkDown() {
        var snapshot = wired([.ipv4: via(2, gateway: "192.0.2.1", source: "192.0.2.10"), .ipv6: .noRoute])
        snapshot.links[2]?.hasCarrier = false
        #expect(PathEvaluator.evaluate(snapshot) == .unsatisfied(.linkDown))
    }

    @Test func aSourceFromAnotherInterfaceIsUsable() {
        // Unnumbered: eth0 has no address; 192.0.2.77/32 sits on lo; `default via 10.0.0.1 dev eth0 onlink`.
        let snapshot = SystemSnapshot(
            links: [lo, eth0], addresses: [address("192.0.2.77", on: 1, scope: 0)],
            routeLookups: [.ipv4: via(2, gateway: "10.0.0.1", source: "192.0.2.77"), .ipv6: .noRoute])
        let path = PathEvaluator.evaluate(snapshot)
        #expect(path.status == .satisfied && path.primaryInterface?.name == "eth0")
        #expect(path.gateways == [ip("10.0.0.1")])
    }

    @Test func anIPv4RouteViaAnIPv6GatewayIsUsable() {
        // RFC 5549: `default via inet6 fe80::1 dev eth0`.
        let snapshot = SystemSnapshot(
            links: [lo, eth0], addresses: [address("192.0.2.77", on: 1, scope: 0)],
            routeLookups: [.ipv4: via(2, gateway: "fe80::1", source: "192.0.2.77"), .ipv6: .noRoute])
        let path = PathEvaluator.evaluate(snapshot)
        #expect(path.supportsIPv4 && path.gateways == [ip("fe80::1")])
    }

    @Test func aLinkLocalOrMissingSourceIsNoAddress() {
        for source in ["fe80::2", nil] {
            let snapshot = SystemSnapshot(
                links: [lo, eth0], routeLookups: [.ipv4: .noRoute, .ipv6: via(2, gateway: "fe80::1", source: source)])
            #expect(PathEvaluator.evaluate(snapshot) == .unsatisfied(.noAddress), "source \(source ?? "none")")
        }
    }

    @Test func theKernelsChoiceAmongEqualMetricsDecidesExpensive() {
        // Both default routes have metric 1024 (systemd-networkd); the kernel uses the first
        // inserted, wwan0's, not the one with the lower interface index.
        let snapshot = SystemSnapshot(
            links: [wlan0, wwan0], addresses: [address("192.0.2.10", on: 3), address("198.51.100.10", on: 4)],
            defaultRoutes: [
                .init(interfaceIndex: 3, gateway: ip("192.0.2.1"), metric: 1024),
                .init(interfaceIndex: 4, gateway: ip("198.51.100.1"), metric: 1024),
            ],
            routeLookups: [.ipv4: via(4, gateway: "198.51.100.1", source: "198.51.100.10"), .ipv6: .noRoute])
        let path = PathEvaluator.evaluate(snapshot)
        #expect(path.primaryInterfaceType == .cellular)
        #expect(path.isExpensive)
        #expect(path.availableInterfaces.map(\.name) == ["wwan0", "wlan0"])
        #expect(path.gateways == [ip("198.51.100.1"), ip("192.0.2.1")])
    }

    @Test func withoutARouteTheLinksTellWhy() {
        var snapshot = wired([.ipv4: .noRoute, .ipv6: .noRoute])
        #expect(PathEvaluator.evaluate(snapshot) == .unsatisfied(.noDefaultRoute))
        snapshot.links[2]?.isUp = false
        snapshot.links[5]?.isUp = false
        #expect(PathEvaluator.evaluate(snapshot) == .unsatisfied(.linkDown))
    }

    @Test func aProhibitedKernelChoiceIsJudgedByTheBoundLookupOfAnAllowedInterface() {
        var snapshot = SystemSnapshot(
            links: [wlan0, wwan0], addresses: [address("192.0.2.10", on: 3), address("198.51.100.10", on: 4)],
            routeLookups: [.ipv4: via(4, gateway: "198.51.100.1", source: "198.51.100.10"), .ipv6: .noRoute],
            scopedRouteLookups: [.ipv4: [3: via(3, gateway: "192.0.2.1", source: "192.0.2.10")]])
        let noCellular = PathRequirements(prohibitedInterfaceTypes: [.cellular])
        let path = PathEvaluator.evaluate(snapshot, requirements: noCellular)
        #expect(path.primaryInterface?.name == "wlan0" && !path.isExpensive)
        #expect(
            PathEvaluator.evaluate(snapshot, requirements: .init(requiredInterfaceType: .cellular)).primaryInterface?
                .name == "wwan0")

        // Bound to wlan0 the kernel has no route: wlan0 is up and addressed, so "no default route".
        snapshot.scopedRouteLookups = [.ipv4: [3: .noRoute]]
        #expect(PathEvaluator.evaluate(snapshot, requirements: noCellular) == .unsatisfied(.noDefaultRoute))
        // Bound to wlan0 a kill switch refuses: that, not "no default route", is why.
        snapshot.scopedRouteLookups = [.ipv4: [3: .refused(.prohibit)]]
        #expect(PathEvaluator.evaluate(snapshot, requirements: noCellular) == .unsatisfied(.routeRefused))
        // No allowed interface at all: the kernel's route is excluded.
        snapshot.links[3] = nil
        #expect(PathEvaluator.evaluate(snapshot, requirements: noCellular) == .unsatisfied(.excludedByRequirements))
    }

    @Test func aLookupErrorMeansWhatTheKernelMeans() {
        #expect(RouteLookup(errno: 101) == .noRoute) // ENETUNREACH
        #expect(RouteLookup(errno: 113) == .refused(.unreachable)) // EHOSTUNREACH
        #expect(RouteLookup(errno: 22) == .refused(.blackhole)) // EINVAL
        #expect(RouteLookup(errno: 13) == .refused(.prohibit)) // EACCES
        #expect(RouteLookup(errno: 19) == .failed(errno: 19)) // ENODEV: an unknown oif
    }

    @Test func aSnapshotWithoutLookupsUsesTheMainTablesAnswer() {
        let snapshot = SystemSnapshot(
            links: [eth0], addresses: [address("192.0.2.10", on: 2)],
            defaultRoutes: [.init(interfaceIndex: 2, gateway: ip("192.0.2.1"))])
        #expect(snapshot.routeLookup(for: .ipv4) == via(2, gateway: "192.0.2.1", source: "192.0.2.10"))
        #expect(snapshot.routeLookup(for: .ipv6) == .noRoute)
    }
}
