import Foundation
import Testing

@testable import NetReach

/// A monitor carries its link types from one evaluation to the next (`PathEvaluator.LinkTypes`):
/// every path must be the one a fresh evaluation gives, whatever changed in between.
@Suite("Link types carried between evaluations")
struct CarriedLinkTypesTests {
    private static let lo = SystemSnapshot.Link(
        index: 1, name: "lo", isLoopback: true, hardwareType: SystemSnapshot.Link.loopbackHardwareType)
    private static let wired = SystemSnapshot(
        links: [lo, .init(index: 2, name: "eth0")],
        addresses: [.init(interfaceIndex: 2, address: IPAddress("192.0.2.10")!, prefixLength: 24)],
        defaultRoutes: [.init(interfaceIndex: 2, gateway: IPAddress("192.0.2.1")!)])

    private static func fresh(_ snapshot: SystemSnapshot) -> NetworkPath {
        PathEvaluator.evaluate(snapshot)
    }

    private static func carried(_ snapshot: SystemSnapshot, _ linkTypes: inout PathEvaluator.LinkTypes) -> NetworkPath {
        PathEvaluator.evaluate(
            snapshot, requirements: PathRequirements(), classification: .automatic, linkTypes: &linkTypes)
    }

    @Test func aChangedLinkIsClassifiedAgainAndAnUnchangedOneIsNot() {
        var linkTypes = PathEvaluator.LinkTypes()
        let first = Self.carried(Self.wired, &linkTypes)
        #expect(first == Self.fresh(Self.wired))
        #expect(first.availableInterfaces.map(\.type) == [.wiredEthernet])
        #expect(linkTypes.types == [1: .loopback, 2: .wiredEthernet])

        // Another route, the same links (one dictionary): the types are the last ones.
        var rerouted = Self.wired
        rerouted.defaultRoutes = [.init(interfaceIndex: 2, gateway: IPAddress("192.0.2.254")!)]
        #expect(Self.carried(rerouted, &linkTypes) == Self.fresh(rerouted))
        #expect(linkTypes.types == [1: .loopback, 2: .wiredEthernet])
        // Carried, not made again: a type planted beside the same links is what the path shows.
        var planted = linkTypes
        planted.types[2] = .other
        #expect(Self.carried(rerouted, &planted).availableInterfaces.map(\.type) == [.other])

        // The same index, now a modem: classified again, never the carried type.
        var modem = rerouted
        modem.links[2] = .init(index: 2, name: "wwan0", deviceType: "wwan")
        let cellular = Self.carried(modem, &linkTypes)
        #expect(cellular == Self.fresh(modem))
        #expect(cellular.availableInterfaces.map(\.type) == [.cellular])
        #expect(cellular.isExpensive)

        // A link gone and another added under a new index.
        var replaced = modem
        replaced.removeLink(index: 2)
        replaced.links[3] = .init(index: 3, name: "wlan0", isWireless: true)
        replaced.upsertAddress(.init(interfaceIndex: 3, address: IPAddress("198.51.100.7")!, prefixLength: 24))
        replaced.defaultRoutes = [.init(interfaceIndex: 3, gateway: IPAddress("198.51.100.1")!)]
        #expect(Self.carried(replaced, &linkTypes) == Self.fresh(replaced))
        #expect(linkTypes.types == [1: .loopback, 3: .wifi])
    }

    @Test func aHostWithManyLinksIsJudgedTheSameWithCarriedTypes() {
        var many = Self.wired
        for index in 100..<200 { many.links[index] = .init(index: index, name: "veth\(index)", kind: "veth") }
        var linkTypes = PathEvaluator.LinkTypes()
        #expect(Self.carried(Self.wired, &linkTypes) == Self.fresh(Self.wired))
        #expect(Self.carried(many, &linkTypes) == Self.fresh(many))
        #expect(Self.carried(Self.wired, &linkTypes) == Self.fresh(Self.wired))
    }
}
