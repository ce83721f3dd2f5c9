import NetReach
import NetReachNetwork
import Testing

@Suite("NWPath from NetReach's paths")
struct NWPathTests {
    static let eth0 = NetworkInterface(name: "eth0", index: 2, type: .wiredEthernet)
    static let wlan0 = NetworkInterface(name: "wlan0", index: 3, type: .wifi)
    static let wg0 = NetworkInterface(name: "wg0", index: 9, type: .other)

    static func satisfied(_ interfaces: [NetworkInterface], gateways: [String] = ["192.0.2.1"]) -> NWPath {
        NWPath(
            NetworkPath(
                status: .satisfied, availableInterfaces: interfaces, supportsIPv4: true, supportsDNS: true,
                gateways: gateways.map { NetReach.IPAddress($0)! }))
    }

    @Test("Every field carries over; gateways are hostPort endpoints with port 0")
    func fields() {
        let path = NWPath(
            NetworkPath(
                status: .satisfied, availableInterfaces: [Self.wlan0, Self.eth0], isExpensive: true,
                isConstrained: true, supportsIPv4: true, supportsIPv6: true, supportsDNS: true,
                gateways: [NetReach.IPAddress("192.0.2.1")!, NetReach.IPAddress("2001:db8::1")!]))
        #expect(path.status == .satisfied)
        #expect(path.unsatisfiedReason == .notAvailable)
        #expect(path.linuxUnsatisfiedReason == nil)
        #expect(path.availableInterfaces.map(\.name) == ["wlan0", "eth0"])
        #expect(path.availableInterfaces.map(\.type) == [.wifi, .wiredEthernet])
        #expect(path.availableInterfaces.map(\.index) == [3, 2])
        #expect(path.isExpensive && path.isConstrained && path.supportsIPv4 && path.supportsIPv6 && path.supportsDNS)
        #expect(
            path.gateways == [
                .hostPort(host: .ipv4(IPv4Address("192.0.2.1")!), port: 0),
                .hostPort(host: .ipv6(IPv6Address("2001:db8::1")!), port: .any),
            ])
        #expect(path.gateways.map { "\($0)" } == ["192.0.2.1:0", "2001:db8::1.0"])
        #expect(path.localEndpoint == nil && path.remoteEndpoint == nil)
        #expect(
            path.debugDescription
                == "satisfied (interface: wlan0, eth0, gateways: 192.0.2.1:0, 2001:db8::1.0, ipv4, ipv6, dns, expensive, constrained)"
        )
    }

    @Test("An unsatisfied path says notAvailable, as Apple's does without a reason; the Linux reason is kept beside it")
    func unsatisfied() {
        for reason in [
            UnsatisfiedReason.noInterface, .linkDown, .noAddress, .noDefaultRoute, .routeRefused,
            .excludedByRequirements, .destinationUnresolved, .monitorUnavailable,
        ] {
            let path = NWPath(.unsatisfied(reason))
            #expect(path.status == .unsatisfied)
            #expect(path.unsatisfiedReason == .notAvailable)
            #expect(path.linuxUnsatisfiedReason == reason)
            #expect(path.availableInterfaces.isEmpty && path.gateways.isEmpty && !path.supportsDNS)
            #expect(path.debugDescription == "unsatisfied (\(reason))")
        }
        let onDemand = NWPath(NetworkPath(status: .requiresConnection))
        #expect(onDemand.status == .requiresConnection)
    }

    @Test(
        "usesInterfaceType is the interface the kernel chose, not a standby one",
        arguments: [
            ([wlan0, eth0], NWInterface.InterfaceType.wifi, true),
            ([wlan0, eth0], .wiredEthernet, false), // standby: available, not used
            ([eth0, wlan0], .wiredEthernet, true),
            ([eth0, wlan0], .wifi, false),
            ([wg0, wlan0, eth0], .other, true), // a tunnel first: the tunnel...
            ([wg0, wlan0, eth0], .wifi, true), // ...and the link under it
            ([wg0, wlan0, eth0], .wiredEthernet, false),
            ([wg0], .other, true),
            ([wg0], .wifi, false),
        ])
    func usesInterfaceType(_ interfaces: [NetworkInterface], _ type: NWInterface.InterfaceType, _ expected: Bool) {
        #expect(Self.satisfied(interfaces).usesInterfaceType(type) == expected)
    }

    @Test("An unsatisfied path uses no interface type")
    func unsatisfiedUsesNothing() {
        let path = NWPath(
            status: .unsatisfied, availableInterfaces: [NWInterface(name: "eth0", index: 2, type: .wiredEthernet)])
        #expect(!path.usesInterfaceType(.wiredEthernet))
    }

    @Test("Paths built in tests compare by value, as paths from a monitor do")
    func builtInTests() {
        let wifi = NWInterface(name: "wlan0", index: 3, type: .wifi)
        let built = NWPath(
            status: .satisfied, availableInterfaces: [wifi], supportsIPv4: true, supportsDNS: true,
            gateways: [.hostPort(host: "192.0.2.1", port: 0)])
        #expect(built == Self.satisfied([Self.wlan0]))
        #expect(built != NWPath(status: .satisfied, availableInterfaces: [wifi]))
        #expect(built.usesInterfaceType(.wifi))
    }

    @Test("Interfaces are equal by name and index, as on Apple platforms; the type is not compared")
    func interfaceEquality() {
        let a = NWInterface(name: "eth0", index: 2, type: .wiredEthernet)
        #expect(a == NWInterface(name: "eth0", index: 2, type: .other))
        #expect(a != NWInterface(name: "eth0", index: 3, type: .wiredEthernet))
        #expect(Set([a, NWInterface(name: "eth0", index: 2, type: .wifi)]).count == 1)
        #expect(a.debugDescription == "eth0")
        #expect(NWInterface(Self.wg0).type == .other)
    }

    @Test(
        "Every NetReach interface type has its Network.framework case, and back",
        arguments: NetReach.InterfaceType.allCases)
    func interfaceTypes(_ type: NetReach.InterfaceType) {
        #expect(NWInterface.InterfaceType(type).netReachType == type)
    }
}
