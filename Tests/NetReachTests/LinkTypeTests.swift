import Foundation
import Testing

@testable import NetReach

/// A link's automatic type is worked out where the link is made (and again when a fact it rests on
/// changes), not on every evaluation: it must always be what the rules give the link as it is now.
@Suite("Link types worked out once")
struct LinkTypeTests {
    @Test func theTypeFollowsEveryFactItRestsOn() {
        var link = SystemSnapshot.Link(index: 2, name: "eth0")
        #expect(link.automaticType == .wiredEthernet)
        link.deviceType = "wwan"
        #expect(link.automaticType == .cellular)
        link.deviceType = nil
        link.isWireless = true
        #expect(link.automaticType == .wifi)
        link.isWireless = false
        link.kind = "wireguard"
        #expect(link.automaticType == .other)
        link.kind = nil
        link.name = "wlan0"
        #expect(link.automaticType == .wifi)
        link.hardwareType = SystemSnapshot.Link.loopbackHardwareType
        #expect(link.automaticType == .loopback)
        link.hardwareType = 0xFFFE // ARPHRD_NONE
        link.name = "wwan1"
        #expect(link.automaticType == .cellular)
        // Carrier and state are not facts of the type.
        link.isUp = false
        link.hasCarrier = false
        #expect(link.automaticType == .cellular)
    }

    /// Overrides by name apply over the automatic type, the longest matching prefix winning.
    @Test func overridesWinOverTheAutomaticType() {
        let link = SystemSnapshot.Link(index: 3, name: "wg-office0", kind: "wireguard")
        #expect(InterfaceClassification.automatic.type(of: link) == .other)
        let classification = InterfaceClassification(typeOverrides: ["wg*": .wiredEthernet, "wg-office*": .cellular])
        #expect(classification.type(of: link) == .cellular)
        #expect(classification.type(of: SystemSnapshot.Link(index: 4, name: "wg0")) == .wiredEthernet)
    }

    /// A link replaced under the same index (a modem where Ethernet was) is judged as what it is now.
    @Test func aLinkReplacedUnderItsIndexIsJudgedAsItIsNow() {
        var snapshot = SystemSnapshot(
            links: [.init(index: 2, name: "eth0")],
            addresses: [.init(interfaceIndex: 2, address: IPAddress("192.0.2.10")!, prefixLength: 24)],
            defaultRoutes: [.init(interfaceIndex: 2, gateway: IPAddress("192.0.2.1")!)])
        #expect(PathEvaluator.evaluate(snapshot).availableInterfaces.map(\.type) == [.wiredEthernet])
        snapshot.links[2] = .init(index: 2, name: "wwan0", deviceType: "wwan")
        let path = PathEvaluator.evaluate(snapshot)
        #expect(path.availableInterfaces.map(\.type) == [.cellular])
        #expect(path.isExpensive)
    }
}
