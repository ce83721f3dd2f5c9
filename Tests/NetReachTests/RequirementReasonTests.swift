import Foundation
import NetReach
import Testing

/// Which reason an unsatisfied path gives when requirements are involved, and loopback's rule.
@Suite("Reasons under requirements")
struct RequirementReasonTests {
    static let loopback = SystemSnapshot.Link(
        index: 1, name: "lo", isLoopback: true, hardwareType: SystemSnapshot.Link.loopbackHardwareType)
    static let loopbackAddress = SystemSnapshot.Address(
        interfaceIndex: 1, address: IPAddress("127.0.0.1")!, prefixLength: 8, scope: 254)
    static let ethernet = SystemSnapshot.Link(index: 2, name: "eth0")
    static let ethernetAddress = SystemSnapshot.Address(
        interfaceIndex: 2, address: IPAddress("192.0.2.10")!, prefixLength: 24)
    static let ethernetRoute = SystemSnapshot.DefaultRoute(interfaceIndex: 2, gateway: IPAddress("192.0.2.1")!)

    @Test func requiredLoopbackIsSatisfiedByItsHostScopedAddress() {
        let snapshot = SystemSnapshot(links: [Self.loopback], addresses: [Self.loopbackAddress])
        let path = PathEvaluator.evaluate(snapshot, requirements: .init(requiredInterfaceType: .loopback))
        #expect(path.status == .satisfied)
        #expect(path.availableInterfaces.map(\.name) == ["lo"])
        #expect(path.supportsIPv4)
    }

    @Test func loopbackDoesNotCountUnlessRequired() {
        let snapshot = SystemSnapshot(links: [Self.loopback], addresses: [Self.loopbackAddress])
        #expect(PathEvaluator.evaluate(snapshot).unsatisfiedReason == .noInterface)
    }

    @Test func anAllowedInterfacesTroubleWinsOverExclusion() {
        let wifiDown = SystemSnapshot.Link(index: 3, name: "wlan0", isUp: false, isWireless: true)
        let snapshot = SystemSnapshot(
            links: [Self.ethernet, wifiDown], addresses: [Self.ethernetAddress],
            defaultRoutes: [Self.ethernetRoute])
        let path = PathEvaluator.evaluate(snapshot, requirements: .init(requiredInterfaceType: .wifi))
        #expect(path.unsatisfiedReason == .linkDown)
    }

    @Test func exclusionIsTheReasonWhenNoAllowedInterfaceExists() {
        let snapshot = SystemSnapshot(
            links: [Self.ethernet], addresses: [Self.ethernetAddress],
            defaultRoutes: [Self.ethernetRoute])
        let path = PathEvaluator.evaluate(snapshot, requirements: .init(requiredInterfaceType: .wifi))
        #expect(path.unsatisfiedReason == .excludedByRequirements)
    }

    @Test func jsonAlwaysCarriesTheReasonKey() throws {
        let satisfied = PathEvaluator.evaluate(
            SystemSnapshot(
                links: [Self.ethernet], addresses: [Self.ethernetAddress], defaultRoutes: [Self.ethernetRoute]))
        let json = String(decoding: try JSONEncoder().encode(satisfied), as: UTF8.self)
        #expect(json.contains("\"unsatisfiedReason\":null"))
        #expect(try JSONDecoder().decode(NetworkPath.self, from: Data(json.utf8)) == satisfied)
    }
}
