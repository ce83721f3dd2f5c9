import Foundation
import NetReach
import Testing

// Fixture vocabulary: snapshots read like `ip link` / `ip addr` / `ip route` output.
private typealias Link = SystemSnapshot.Link
private typealias Address = SystemSnapshot.Address
private typealias Route = SystemSnapshot.DefaultRoute

private func ip(_ text: String) -> IPAddress { IPAddress(text)! }
private func address(
    _ text: String, on index: Int, prefix: UInt8? = nil, scope: UInt8 = Address.globalScope,
    tentative: Bool = false, dadFailed: Bool = false
) -> Address {
    let address = ip(text)
    return Address(
        interfaceIndex: index, address: address, prefixLength: prefix ?? (address.family == .ipv4 ? 24 : 64),
        scope: scope, isTentative: tentative, isDADFailed: dadFailed)
}
private func defaultRoute(via gateway: String, dev index: Int, metric: UInt32 = 0) -> Route {
    Route(interfaceIndex: index, gateway: ip(gateway), metric: metric)
}
private func evaluate(
    _ snapshot: SystemSnapshot, _ requirements: PathRequirements = PathRequirements(),
    _ classification: InterfaceClassification = .automatic
) -> NetworkPath {
    PathEvaluator.evaluate(snapshot, requirements: requirements, classification: classification)
}

/// ARPHRD_NONE: tun, WireGuard, raw-IP modems.
private let rawIP: UInt16 = 65534
private let lo = Link(index: 1, name: "lo", isLoopback: true, hardwareType: Link.loopbackHardwareType)
/// What the kernel reports for lo: host scope (254) on both families.
private let loAddresses = [
    address("127.0.0.1", on: 1, prefix: 8, scope: 254), address("::1", on: 1, prefix: 128, scope: 254),
]
private let eth0 = Link(index: 2, name: "eth0")
private let wlan0 = Link(index: 3, name: "wlan0", isWireless: true)
private let wwan0 = Link(index: 4, name: "wwan0", deviceType: "wwan")
private let eth0Interface = NetworkInterface(name: "eth0", index: 2, type: .wiredEthernet)
private let wlan0Interface = NetworkInterface(name: "wlan0", index: 3, type: .wifi)
private let wwan0Interface = NetworkInterface(name: "wwan0", index: 4, type: .cellular)

/// eth0 with 192.0.2.10/24 and `default via 192.0.2.1`: the plainest satisfied host.
private let wiredIPv4 = SystemSnapshot(
    links: [lo, eth0], addresses: loAddresses + [address("192.0.2.10", on: 2)],
    defaultRoutes: [defaultRoute(via: "192.0.2.1", dev: 2)])

/// wlan0 (metric 600) and wwan0 (metric 700), each addressed and routed.
private let wifiAndCellular = SystemSnapshot(
    links: [wlan0, wwan0], addresses: [address("192.0.2.10", on: 3), address("198.51.100.10", on: 4)],
    defaultRoutes: [
        defaultRoute(via: "192.0.2.1", dev: 3, metric: 600), defaultRoute(via: "198.51.100.1", dev: 4, metric: 700),
    ])

@Suite("PathEvaluator: satisfied and unsatisfied")
struct PathEvaluatorStatusTests {
    @Test func satisfiedWithAddressDefaultRouteAndCarrier() {
        var snapshot = wiredIPv4
        snapshot.nameservers = [ip("192.0.2.53")]
        #expect(
            evaluate(snapshot)
                == NetworkPath(
                    status: .satisfied, availableInterfaces: [eth0Interface], supportsIPv4: true, supportsDNS: true,
                    gateways: [ip("192.0.2.1")]))
    }

    @Test func noInterfaceWithoutLinks() {
        #expect(evaluate(SystemSnapshot()) == .unsatisfied(.noInterface))
    }

    @Test func noInterfaceWithOnlyLoopback() {
        #expect(evaluate(SystemSnapshot(links: [lo], addresses: loAddresses)) == .unsatisfied(.noInterface))
    }

    @Test func linkDownWhenAdministrativelyDown() {
        var snapshot = wiredIPv4
        snapshot.links[2]?.isUp = false
        #expect(evaluate(snapshot) == .unsatisfied(.linkDown))
    }

    @Test func linkDownWithoutCarrier() {
        var snapshot = wiredIPv4
        snapshot.links[2]?.hasCarrier = false
        #expect(evaluate(snapshot) == .unsatisfied(.linkDown))
    }

    @Test func noAddressWithoutAnyAddress() {
        let snapshot = SystemSnapshot(links: [eth0], defaultRoutes: [defaultRoute(via: "192.0.2.1", dev: 2)])
        #expect(evaluate(snapshot) == .unsatisfied(.noAddress))
    }

    @Test func tentativeIPv6AddressIsNoAddress() {
        let snapshot = SystemSnapshot(
            links: [eth0], addresses: [address("2001:db8::10", on: 2, tentative: true)],
            defaultRoutes: [defaultRoute(via: "2001:db8::1", dev: 2)])
        #expect(evaluate(snapshot) == .unsatisfied(.noAddress))
    }

    @Test func dadFailedIPv6AddressIsNoAddress() {
        let snapshot = SystemSnapshot(
            links: [eth0], addresses: [address("2001:db8::10", on: 2, dadFailed: true)],
            defaultRoutes: [defaultRoute(via: "2001:db8::1", dev: 2)])
        #expect(evaluate(snapshot) == .unsatisfied(.noAddress))
    }

    @Test func linkLocalIPv6AddressIsNoAddress() {
        // Every up IPv6 link has fe80::/64 (scope link); it cannot reach beyond the link.
        let snapshot = SystemSnapshot(
            links: [eth0], addresses: [address("fe80::1", on: 2, scope: 253)],
            defaultRoutes: [Route(interfaceIndex: 2, gateway: ip("fe80::ff"))])
        #expect(evaluate(snapshot) == .unsatisfied(.noAddress))
    }

    @Test func noDefaultRouteWithAddressButNoRoute() {
        let snapshot = SystemSnapshot(links: [eth0], addresses: [address("192.0.2.10", on: 2)])
        #expect(evaluate(snapshot) == .unsatisfied(.noDefaultRoute))
    }

    @Test func routeOfAFamilyWithoutAddressIsNoDefaultRoute() {
        // An IPv6 address and an IPv4 default route do not make a path.
        let snapshot = SystemSnapshot(
            links: [eth0], addresses: [address("2001:db8::10", on: 2)],
            defaultRoutes: [defaultRoute(via: "192.0.2.1", dev: 2)])
        #expect(evaluate(snapshot) == .unsatisfied(.noDefaultRoute))
    }

    @Test func excludedByRequirementsWhenOnlyAnExcludedInterfaceWorks() {
        #expect(
            evaluate(wiredIPv4, PathRequirements(requiredInterfaceType: .wifi)) == .unsatisfied(.excludedByRequirements)
        )
    }

    @Test func furthestReasonAmongInterfacesWins() {
        // eth0 down, wlan0 up without an address, wwan0 addressed without a route.
        let snapshot = SystemSnapshot(
            links: [Link(index: 2, name: "eth0", isUp: false), wlan0, wwan0],
            addresses: [address("198.51.100.10", on: 4)])
        #expect(evaluate(snapshot) == .unsatisfied(.noDefaultRoute))
    }

    @Test func routeThroughAnIndexWithNoLinkIsIgnored() {
        let snapshot = SystemSnapshot(
            links: [eth0], addresses: [address("192.0.2.10", on: 2)],
            defaultRoutes: [defaultRoute(via: "203.0.113.1", dev: 9)])
        #expect(evaluate(snapshot) == .unsatisfied(.noDefaultRoute))
    }

    @Test func orphanRouteAddsNoGateway() {
        var snapshot = wiredIPv4
        snapshot.defaultRoutes.insert(defaultRoute(via: "203.0.113.1", dev: 9, metric: 0))
        let path = evaluate(snapshot)
        #expect(path.availableInterfaces == [eth0Interface])
        #expect(path.gateways == [ip("192.0.2.1")])
    }

    @Test func deviceRouteWithoutGatewaySatisfiesWithNoGateways() {
        // ip route add default dev tun0
        let tun0 = Link(index: 5, name: "tun0", hardwareType: 65534, kind: "tun")
        let snapshot = SystemSnapshot(
            links: [tun0], addresses: [address("203.0.113.7", on: 5, prefix: 32)],
            defaultRoutes: [Route(interfaceIndex: 5)])
        #expect(
            evaluate(snapshot)
                == NetworkPath(
                    status: .satisfied, availableInterfaces: [NetworkInterface(name: "tun0", index: 5, type: .other)],
                    supportsIPv4: true, gateways: []))
    }
}

@Suite("PathEvaluator: address families and DNS")
struct PathEvaluatorFamilyTests {
    @Test func ipv4Only() {
        let path = evaluate(wiredIPv4)
        #expect(path.supportsIPv4 && !path.supportsIPv6)
    }

    @Test func ipv6Only() {
        let snapshot = SystemSnapshot(
            links: [eth0], addresses: [address("2001:db8::10", on: 2), address("fe80::10", on: 2, scope: 253)],
            defaultRoutes: [defaultRoute(via: "2001:db8::1", dev: 2, metric: 1024)])
        #expect(
            evaluate(snapshot)
                == NetworkPath(
                    status: .satisfied, availableInterfaces: [eth0Interface], supportsIPv6: true,
                    gateways: [ip("2001:db8::1")]))
    }

    @Test func dualStack() {
        var snapshot = wiredIPv4
        snapshot.upsertAddress(address("2001:db8::10", on: 2))
        snapshot.defaultRoutes.insert(defaultRoute(via: "2001:db8::1", dev: 2, metric: 1024))
        let path = evaluate(snapshot)
        #expect(path.supportsIPv4 && path.supportsIPv6)
        #expect(path.gateways == [ip("192.0.2.1"), ip("2001:db8::1")])
    }

    @Test func familyWithAddressButNoRouteIsNotSupported() {
        var snapshot = wiredIPv4
        snapshot.upsertAddress(address("2001:db8::10", on: 2))
        #expect(!evaluate(snapshot).supportsIPv6)
    }

    @Test func noDNSWithoutNameservers() {
        let path = evaluate(wiredIPv4)
        #expect(path.status == .satisfied && !path.supportsDNS)
    }

    @Test func noDNSWhenUnsatisfiedEvenWithNameservers() {
        let snapshot = SystemSnapshot(links: [eth0], nameservers: [ip("192.0.2.53")])
        #expect(!evaluate(snapshot).supportsDNS)
    }
}

@Suite("PathEvaluator: interface types")
struct PathEvaluatorInterfaceTypeTests {
    /// One case: a link as the kernel and sysfs describe it, and the type it must get.
    struct ClassificationCase: Sendable, CustomTestStringConvertible {
        var link: SystemSnapshot.Link
        var expected: InterfaceType
        var why: String
        var testDescription: String { "\(why) → \(expected)" }
    }

    @Test(arguments: [
        ClassificationCase(
            link: Link(index: 3, name: "radio0", isWireless: true), expected: .wifi, why: "sysfs wireless"),
        ClassificationCase(
            link: Link(index: 3, name: "radio0", deviceType: "wlan"), expected: .wifi, why: "DEVTYPE=wlan"),
        ClassificationCase(
            link: Link(index: 4, name: "modem0", deviceType: "wwan"), expected: .cellular, why: "DEVTYPE=wwan"),
        ClassificationCase(link: Link(index: 2, name: "eth0"), expected: .wiredEthernet, why: "ARPHRD_ETHER"),
        ClassificationCase(link: Link(index: 2, name: "eth0", kind: "veth"), expected: .wiredEthernet, why: "veth"),
        ClassificationCase(
            link: Link(index: 5, name: "tun0", hardwareType: rawIP, kind: "tun"), expected: .other, why: "tun"),
        ClassificationCase(
            link: Link(index: 6, name: "wg0", hardwareType: rawIP, kind: "wireguard"), expected: .other,
            why: "wireguard"),
        // ifb is Ethernet-framed (ARPHRD_ETHER) but carries no traffic of its own: tc redirects into it.
        ClassificationCase(link: Link(index: 7, name: "ifb0", kind: "ifb"), expected: .other, why: "ifb"),
        ClassificationCase(link: Link(index: 8, name: "vx0", kind: "vxlan"), expected: .other, why: "vxlan"),
        ClassificationCase(
            link: Link(index: 1, name: "lo", isLoopback: true, hardwareType: Link.loopbackHardwareType),
            expected: .loopback, why: "IFF_LOOPBACK"),
    ])
    func typeFromKernelAndSysfsFacts(_ test: ClassificationCase) {
        #expect(InterfaceClassification.automatic.type(of: test.link) == test.expected)
    }

    @Test(arguments: [
        ClassificationCase(link: Link(index: 3, name: "wlan0"), expected: .wifi, why: "wlan0 without sysfs"),
        ClassificationCase(link: Link(index: 3, name: "wlp2s0"), expected: .wifi, why: "wlp2s0 without sysfs"),
        ClassificationCase(link: Link(index: 4, name: "wwan0"), expected: .cellular, why: "wwan0 without sysfs"),
        ClassificationCase(
            link: Link(index: 4, name: "wwan0", hardwareType: rawIP), expected: .cellular, why: "raw-IP wwan0"),
    ])
    func nameFallbackWhenSysfsFactsAreAbsent(_ test: ClassificationCase) {
        #expect(InterfaceClassification.automatic.type(of: test.link) == test.expected)
    }

    /// A host with hundreds of links (a container host's veths, down and unaddressed here) is
    /// judged as the same host without them.
    @Test func aHostWithHundredsOfLinksIsJudgedAsWithout() {
        let extras = (100..<300).map { Link(index: $0, name: "veth\($0)", isUp: $0 % 3 == 0, kind: "veth") }
        func withExtras(_ snapshot: SystemSnapshot) -> SystemSnapshot {
            var snapshot = snapshot
            for link in extras { snapshot.links[link.index] = link }
            return snapshot
        }
        let noRoute = SystemSnapshot(links: [lo, eth0], addresses: loAddresses + [address("192.0.2.10", on: 2)])
        let cases: [(SystemSnapshot, PathRequirements)] = [
            (wifiAndCellular, PathRequirements()),
            (wifiAndCellular, PathRequirements(requiredInterfaceType: .cellular)),
            (wifiAndCellular, PathRequirements(prohibitedInterfaceTypes: [.wifi])),
            (wiredIPv4, PathRequirements()),
            (noRoute, PathRequirements()),
            (wifiAndCellular, PathRequirements(requiredInterfaceType: .wifi)),
        ]
        for (snapshot, requirements) in cases {
            #expect(evaluate(withExtras(snapshot), requirements) == evaluate(snapshot, requirements))
        }
        #expect(evaluate(withExtras(noRoute)) == .unsatisfied(.noDefaultRoute))
    }

    /// The kinds and name prefixes are compared as bytes: each listed one whole, nothing that only
    /// resembles one (a prefix of it, a longer word, another case).
    @Test func kindsAndNamePrefixesMatchWholeAndNothingElse() {
        let classify = { (link: Link) in InterfaceClassification.automatic.type(of: link) }
        let virtual = [
            "tun", "tap", "wireguard", "ipip", "gre", "sit", "ip6tnl", "vti", "vxlan", "ppp", "ifb", "dummy", "geneve",
            "gretap",
        ]
        for kind in virtual { #expect(classify(Link(index: 9, name: "x0", kind: kind)) == .other, "\(kind)") }
        for kind in ["wwan", "qmi_wwan", "cdc_mbim", "mhi_net"] {
            #expect(classify(Link(index: 9, name: "x0", kind: kind)) == .cellular, "\(kind)")
        }
        for kind in ["", "tu", "tunx", "gre0", "vxla", "veth", "bridge", "TUN", "wireguard ", "qmi", "wwan0"] {
            #expect(classify(Link(index: 9, name: "x0", kind: kind)) == .wiredEthernet, "\(kind)")
        }
        for name in ["wlan", "wlan0", "wlp2s0", "wlx00c0ca000001"] {
            #expect(classify(Link(index: 9, name: name)) == .wifi)
        }
        for name in ["wwan", "wwan0"] { #expect(classify(Link(index: 9, name: name)) == .cellular) }
        for name in ["", "wl0", "wla", "xwlan0", "WLAN0", "wwa0", "eth0"] {
            #expect(classify(Link(index: 9, name: name)) == .wiredEthernet, "\(name)")
        }
    }

    @Test func typePropagatesToTheAvailableInterface() {
        #expect(evaluate(wifiAndCellular).availableInterfaces == [wlan0Interface, wwan0Interface])
    }

    @Test func exactOverrideWins() {
        let classification = InterfaceClassification(typeOverrides: ["eth0": .cellular])
        #expect(classification.type(of: eth0) == .cellular)
        #expect(classification.type(of: Link(index: 7, name: "eth01")) == .wiredEthernet)
    }

    @Test func prefixOverrideMatchesEveryNameWithThePrefix() {
        let classification = InterfaceClassification(typeOverrides: ["wg*": .wiredEthernet])
        #expect(
            classification.type(of: Link(index: 6, name: "wg0", hardwareType: rawIP, kind: "wireguard"))
                == .wiredEthernet)
        #expect(
            classification.type(of: Link(index: 7, name: "wg-office", hardwareType: rawIP, kind: "wireguard"))
                == .wiredEthernet)
    }

    @Test func longestPrefixOverrideWins() {
        let classification = InterfaceClassification(typeOverrides: ["wg*": .other, "wg-office*": .wiredEthernet])
        #expect(classification.type(of: Link(index: 7, name: "wg-office1", hardwareType: rawIP)) == .wiredEthernet)
        #expect(classification.type(of: Link(index: 8, name: "wg-home", hardwareType: rawIP)) == .other)
    }

    @Test func exactOverrideBeatsPrefix() {
        let classification = InterfaceClassification(typeOverrides: ["wg*": .other, "wg0": .cellular])
        #expect(classification.type(of: Link(index: 6, name: "wg0", hardwareType: rawIP)) == .cellular)
    }

    @Test func overrideReachesThePath() {
        let path = evaluate(wiredIPv4, PathRequirements(), InterfaceClassification(typeOverrides: ["eth*": .cellular]))
        #expect(path.availableInterfaces == [NetworkInterface(name: "eth0", index: 2, type: .cellular)])
        #expect(path.isExpensive)
    }
}

@Suite("PathEvaluator: requirements")
struct PathEvaluatorRequirementTests {
    @Test func requiredTypeKeepsOnlyThatType() {
        let path = evaluate(wifiAndCellular, PathRequirements(requiredInterfaceType: .cellular))
        #expect(path.status == .satisfied)
        #expect(path.availableInterfaces == [wwan0Interface])
        #expect(path.gateways == [ip("198.51.100.1")])
    }

    @Test func prohibitedTypesAreLeftOut() {
        let path = evaluate(wifiAndCellular, PathRequirements(prohibitedInterfaceTypes: [.wifi]))
        #expect(path.availableInterfaces == [wwan0Interface])
    }

    @Test func prohibitingEveryAvailableTypeIsExcludedByRequirements() {
        #expect(
            evaluate(wifiAndCellular, PathRequirements(prohibitedInterfaceTypes: [.wifi, .cellular]))
                == .unsatisfied(.excludedByRequirements))
    }

    @Test func loopbackDoesNotCountByDefault() {
        let path = evaluate(wiredIPv4)
        #expect(!path.usesInterfaceType(.loopback))
    }

    @Test func loopbackCountsWhenRequiredWithTheKernelsHostScopedAddresses() {
        let path = evaluate(wiredIPv4, PathRequirements(requiredInterfaceType: .loopback))
        #expect(
            path
                == NetworkPath(
                    status: .satisfied, availableInterfaces: [NetworkInterface(name: "lo", index: 1, type: .loopback)],
                    supportsIPv4: true, supportsIPv6: true))
    }

    @Test func loopbackDownIsNotAvailableEvenWhenRequired() {
        var snapshot = wiredIPv4
        snapshot.links[1]?.isUp = false
        #expect(evaluate(snapshot, PathRequirements(requiredInterfaceType: .loopback)) == .unsatisfied(.linkDown))
    }
}

@Suite("PathEvaluator: expensive and constrained")
struct PathEvaluatorCostTests {
    @Test func cellularPrimaryIsExpensive() {
        let path = evaluate(wifiAndCellular, PathRequirements(requiredInterfaceType: .cellular))
        #expect(path.isExpensive)
    }

    @Test func wifiPrimaryWithCellularSecondaryIsNotExpensive() {
        let path = evaluate(wifiAndCellular)
        #expect(path.availableInterfaces == [wlan0Interface, wwan0Interface])
        #expect(!path.isExpensive)
    }

    @Test func expensiveByName() {
        #expect(
            evaluate(wiredIPv4, PathRequirements(), InterfaceClassification(expensiveInterfaces: ["eth0"])).isExpensive)
    }

    @Test func expensiveByNamePrefix() {
        #expect(
            evaluate(wiredIPv4, PathRequirements(), InterfaceClassification(expensiveInterfaces: ["eth*"])).isExpensive)
    }

    @Test func wiredIsNeitherExpensiveNorConstrainedByDefault() {
        let path = evaluate(wiredIPv4)
        #expect(!path.isExpensive && !path.isConstrained)
    }

    @Test func constrainedByName() {
        let path = evaluate(wiredIPv4, PathRequirements(), InterfaceClassification(constrainedInterfaces: ["eth0"]))
        #expect(path.isConstrained && !path.isExpensive)
    }
}

@Suite("PathEvaluator: ordering")
struct PathEvaluatorOrderingTests {
    @Test func availableInterfacesAreOrderedByMetricNotIndex() {
        let snapshot = SystemSnapshot(
            links: [eth0, wlan0], addresses: [address("192.0.2.10", on: 2), address("198.51.100.10", on: 3)],
            defaultRoutes: [
                defaultRoute(via: "192.0.2.1", dev: 2, metric: 600),
                defaultRoute(via: "198.51.100.1", dev: 3, metric: 100),
            ])
        #expect(evaluate(snapshot).availableInterfaces == [wlan0Interface, eth0Interface])
    }

    @Test func interfacesInUseComeInFamilyOrderIPv4First() {
        // IPv4 leaves through wlan0 (metric 100 beats eth0's 600), IPv6 through eth0 (its only
        // IPv6 route): both are in use, IPv4's first, whatever the metrics across families.
        let snapshot = SystemSnapshot(
            links: [eth0, wlan0],
            addresses: [address("192.0.2.10", on: 2), address("2001:db8::10", on: 2), address("198.51.100.10", on: 3)],
            defaultRoutes: [
                defaultRoute(via: "192.0.2.1", dev: 2, metric: 600),
                defaultRoute(via: "2001:db8::1", dev: 2, metric: 50),
                defaultRoute(via: "198.51.100.1", dev: 3, metric: 100),
            ])
        #expect(evaluate(snapshot).availableInterfaces == [wlan0Interface, eth0Interface])
    }

    @Test func gatewaysInUseComeFirstThenStandbyByMetric() {
        // In use: 192.0.2.1 (IPv4) and 2001:db8::1 (IPv6, eth0's only route of its family);
        // wlan0's 198.51.100.1 is a standby route (metric 600).
        let snapshot = SystemSnapshot(
            links: [eth0, wlan0],
            addresses: [address("192.0.2.10", on: 2), address("2001:db8::10", on: 2), address("198.51.100.10", on: 3)],
            defaultRoutes: [
                defaultRoute(via: "2001:db8::1", dev: 2, metric: 1024),
                defaultRoute(via: "192.0.2.1", dev: 2, metric: 100),
                defaultRoute(via: "198.51.100.1", dev: 3, metric: 600),
            ])
        #expect(evaluate(snapshot).gateways == [ip("192.0.2.1"), ip("2001:db8::1"), ip("198.51.100.1")])
    }

    @Test func gatewaysAreDeduplicated() {
        // Two links into the same LAN, both through 192.0.2.1.
        let eth1 = Link(index: 5, name: "eth1")
        let snapshot = SystemSnapshot(
            links: [eth0, eth1], addresses: [address("192.0.2.10", on: 2), address("192.0.2.11", on: 5)],
            defaultRoutes: [
                defaultRoute(via: "192.0.2.1", dev: 2, metric: 100),
                defaultRoute(via: "192.0.2.1", dev: 5, metric: 101),
            ])
        let path = evaluate(snapshot)
        #expect(path.availableInterfaces.count == 2)
        #expect(path.gateways == [ip("192.0.2.1")])
    }

    @Test func gatewaysOfEqualMetricDoNotDependOnHowTheSnapshotWasBuilt() {
        // NetworkManager gives a wired link's IPv4 and IPv6 default routes the same metric (100).
        // Equal snapshots must evaluate to equal paths, or the monitor emits a "change" that is
        // only a reordering. Tried over many gateway pairs so that some pair's hash order differs.
        var differing: [String] = []
        for host in 1...64 {
            let v4 = defaultRoute(via: "192.0.2.\(host)", dev: 2, metric: 100)
            let v6 = defaultRoute(via: "2001:db8::\(host)", dev: 2, metric: 100)
            let addresses = [address("192.0.2.200", on: 2), address("2001:db8::200", on: 2)]
            let built = SystemSnapshot(links: [eth0], addresses: addresses, defaultRoutes: [v4, v6])
            let builtReversed = SystemSnapshot(links: [eth0], addresses: addresses, defaultRoutes: [v6, v4])
            #expect(built == builtReversed)
            let (one, other) = (evaluate(built).gateways, evaluate(builtReversed).gateways)
            if one != other { differing.append("\(one) vs \(other)") }
        }
        #expect(differing.isEmpty)
    }
}

@Suite("IPAddress")
struct IPAddressTests {
    @Test func parsesAndFormatsIPv4() throws {
        let address = try #require(IPAddress("192.0.2.1"))
        #expect(address.family == .ipv4)
        #expect(address.bytes == [192, 0, 2, 1])
        #expect(address.description == "192.0.2.1")
    }

    @Test func parsesAndFormatsIPv6Canonically() throws {
        let address = try #require(IPAddress("2001:0DB8:0000:0000:0000:0000:0000:0001"))
        #expect(address.family == .ipv6)
        #expect(address.bytes == [0x20, 0x01, 0x0d, 0xb8] + [UInt8](repeating: 0, count: 11) + [1])
        #expect(address.description == "2001:db8::1")
    }

    @Test func zoneIsDropped() {
        #expect(IPAddress("fe80::1%eth0") == IPAddress("fe80::1"))
        #expect(IPAddress("fe80::1%eth0")?.description == "fe80::1")
    }

    @Test(arguments: [
        "", "192.0.2", "192.0.2.256", "192.0.2.1.5", " 192.0.2.1", "192.0.2.1 ", "2001:db8:::1", "2001:db8::g",
        "example.com", "%eth0", "::ffff:192.0.2", String(repeating: "1", count: 200),
    ])
    func garbageIsNil(_ text: String) {
        #expect(IPAddress(text) == nil)
    }

    @Test func textAfterAnEmbeddedNULIsNotIgnored() {
        // inet_pton reads a C string and would never look past a NUL.
        #expect(IPAddress("192.0.2.1\u{0}garbage") == nil)
    }

    @Test func bytesOfOtherLengthsAreNil() {
        #expect(IPAddress(bytes: [192, 0, 2]) == nil)
        #expect(IPAddress(bytes: [192, 0, 2, 1, 0]) == nil)
        #expect(IPAddress(bytes: [192, 0, 2, 1]) == IPAddress("192.0.2.1"))
    }

    @Test func codableRoundTripUsesTheTextualForm() throws {
        let addresses = [ip("192.0.2.1"), ip("2001:db8::1")]
        let json = try JSONEncoder().encode(addresses)
        #expect(String(decoding: json, as: UTF8.self) == #"["192.0.2.1","2001:db8::1"]"#)
        #expect(try JSONDecoder().decode([IPAddress].self, from: json) == addresses)
    }

    @Test func decodingGarbageThrows() {
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode([IPAddress].self, from: Data(#"["not an address"]"#.utf8))
        }
    }
}

@Suite("NetworkPath")
struct NetworkPathTests {
    @Test func satisfiedPathSurvivesAJSONRoundTrip() throws {
        let path = NetworkPath(
            status: .satisfied, availableInterfaces: [wlan0Interface, wwan0Interface], isExpensive: true,
            isConstrained: true,
            supportsIPv4: true, supportsIPv6: true, supportsDNS: true, gateways: [ip("192.0.2.1"), ip("2001:db8::1")])
        #expect(try JSONDecoder().decode(NetworkPath.self, from: JSONEncoder().encode(path)) == path)
    }

    @Test func unsatisfiedPathSurvivesAJSONRoundTrip() throws {
        let path = NetworkPath.unsatisfied(.noDefaultRoute)
        #expect(try JSONDecoder().decode(NetworkPath.self, from: JSONEncoder().encode(path)) == path)
    }
}
