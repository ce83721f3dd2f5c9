import NetReach
import Testing

// Fixtures: the kernel's answers as `ip route get` showed them in a namespace (see the DAD
// integration tests, which compare the same cases with a real `connect()`).
private typealias Link = SystemSnapshot.Link
private typealias Address = SystemSnapshot.Address
private func ip(_ text: String) -> IPAddress { IPAddress(text)! }

private let lo = Link(index: 1, name: "lo", isLoopback: true, hardwareType: Link.loopbackHardwareType)
private let eth0 = Link(index: 2, name: "eth0")
private let dummy = Link(index: 3, name: "spare0", isUp: false, hasCarrier: false)

/// An IPv6-only host: `2001:db8:1::2/64` on eth0 (with the given DAD state), `::1` on lo, a
/// default route via `2001:db8:1::1`, and the kernel's answer for the internet's address coming
/// from `source`.
private func ipv6Host(source: String, tentative: Bool = false, dadFailed: Bool = false) -> SystemSnapshot {
    SystemSnapshot(
        links: [lo, eth0],
        addresses: [
            Address(interfaceIndex: 1, address: ip("::1"), prefixLength: 128, scope: 254),
            Address(
                interfaceIndex: 2, address: ip("2001:db8:1::2"), prefixLength: 64, isTentative: tentative,
                isDADFailed: dadFailed),
        ],
        defaultRoutes: [.init(interfaceIndex: 2, gateway: ip("2001:db8:1::1"))],
        routeLookups: [
            .ipv4: .noRoute,
            .ipv6: .route(.init(interfaceIndex: 2, gateway: ip("2001:db8:1::1"), source: ip(source))),
        ])
}

@Suite("PathEvaluator: a source that cannot carry traffic is no path")
struct SourceUsabilityTests {
    @Test func aLoopbackSourceWhileDADRunsIsNoAddress() {
        // `2001:4860:4860::8888 from :: via 2001:db8:1::1 dev va src ::1`: every global address
        // tentative, the kernel hands connect() ::1, and that connection never completes.
        let path = PathEvaluator.evaluate(ipv6Host(source: "::1", tentative: true))
        #expect(path == .unsatisfied(.noAddress))
    }

    @Test func theSameRouteFromTheAddressOnceDADEndedIsSatisfied() {
        let path = PathEvaluator.evaluate(ipv6Host(source: "2001:db8:1::2"))
        #expect(path.status == .satisfied && path.supportsIPv6)
        #expect(path.primaryInterface?.name == "eth0")
    }

    @Test func aTentativeOrDADFailedSourceIsNoAddress() {
        #expect(PathEvaluator.evaluate(ipv6Host(source: "2001:db8:1::2", tentative: true)) == .unsatisfied(.noAddress))
        #expect(PathEvaluator.evaluate(ipv6Host(source: "2001:db8:1::2", dadFailed: true)) == .unsatisfied(.noAddress))
    }

    @Test func aLoopbackSourceForAnOwnAddressIsFine() {
        // A per-destination monitor of ::1 itself: `local ::1 dev lo src ::1`.
        var snapshot = ipv6Host(source: "2001:db8:1::2")
        snapshot.destinationLookups[ip("::1")] = .route(.init(interfaceIndex: 1, source: ip("::1"), isLocal: true))
        let path = PathEvaluator.evaluate(snapshot, destinations: [ip("::1")])
        #expect(path.status == .satisfied && path.primaryInterface?.name == "lo")
    }

    @Test func anUnspecifiedSourceIsNoAddress() {
        var snapshot = ipv6Host(source: "2001:db8:1::2")
        snapshot.routeLookups[.ipv6] = .route(.init(interfaceIndex: 2, gateway: ip("2001:db8:1::1"), source: ip("::")))
        #expect(PathEvaluator.evaluate(snapshot) == .unsatisfied(.noAddress))
    }

    @Test func anIPv4SourceHeldByADownInterfaceStillCarriesTraffic() {
        // `ip route add default via 192.0.2.1 dev eth0 src 198.51.100.7` with 198.51.100.7 on a
        // link that then went down: the kernel keeps its local route, and a real TCP connection
        // from it completes (the integration test of the same name).
        let snapshot = SystemSnapshot(
            links: [lo, eth0, dummy],
            addresses: [
                Address(interfaceIndex: 2, address: ip("192.0.2.10"), prefixLength: 24),
                Address(interfaceIndex: 3, address: ip("198.51.100.7"), prefixLength: 32),
            ],
            defaultRoutes: [.init(interfaceIndex: 2, gateway: ip("192.0.2.1"))],
            routeLookups: [
                .ipv4: .route(.init(interfaceIndex: 2, gateway: ip("192.0.2.1"), source: ip("198.51.100.7"))),
                .ipv6: .noRoute,
            ])
        #expect(PathEvaluator.evaluate(snapshot).status == .satisfied)
    }

    @Test func anUnspecifiedIPv4SourceIsNoAddress() {
        // `default dev eth0` with no IPv4 address anywhere: connect() gets 0.0.0.0.
        let snapshot = SystemSnapshot(
            links: [lo, eth0],
            routeLookups: [.ipv4: .route(.init(interfaceIndex: 2, source: ip("0.0.0.0"))), .ipv6: .noRoute])
        #expect(PathEvaluator.evaluate(snapshot) == .unsatisfied(.noAddress))
    }

    @Test func aSourceTheSnapshotDoesNotHoldIsTakenAtTheKernelsWord() {
        // A simulated network's lookup, or an unnumbered link's /32 the snapshot has not read yet.
        var snapshot = ipv6Host(source: "2001:db8:1::2")
        snapshot.routeLookups[.ipv6] = .route(
            .init(interfaceIndex: 2, gateway: ip("2001:db8:1::1"), source: ip("2001:db8:99::1")))
        #expect(PathEvaluator.evaluate(snapshot).status == .satisfied)
    }
}
