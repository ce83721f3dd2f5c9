import Dispatch
import Foundation
import NetReachSystem
import NetReachTesting
import Testing

@testable import NetReach

/// The one way out of a monitor with what its path was judged from: ``PathMonitor/updateObserver``
/// and its ``PathUpdate``s, on a simulated network.
@Suite("Path updates")
struct PathUpdateTests {
    /// Collects updates as the observer gets them.
    private final class Updates: Sendable {
        private let list = Locked([PathUpdate]())
        func append(_ update: PathUpdate) { list.withLock { $0.append(update) } }
        var all: [PathUpdate] { list.withLock { $0 } }
    }

    private let queue = DispatchQueue(label: "updates")

    private func observed(_ monitor: PathMonitor) -> Updates {
        let updates = Updates()
        monitor.updateObserver = { updates.append($0) }
        monitor.start(queue: queue)
        return updates
    }

    @Test func theFirstUpdateIsTheCurrentPathWithItsRoutesAndInterfaces() throws {
        let network = SimulatedNetwork.connected(.wifi, name: "wlan0")
        let monitor = PathMonitor(source: network)
        defer { monitor.cancel() }
        let before = Date()
        let updates = observed(monitor)
        let first = try #require(updates.all.first)
        #expect(updates.all.count == 1)
        #expect(first.sequence == 1)
        #expect(first.path == monitor.currentPath)
        #expect(first.time >= before && first.time <= Date())
        guard case .route(let route) = first.routes[.ipv4] else {
            Issue.record("no IPv4 route in \(first.routes)")
            return
        }
        #expect(route.gateway == IPAddress("192.0.2.1"))
        #expect(first.interface(at: route.interfaceIndex) == monitor.currentPath.primaryInterface)
        #expect(first.routes[.ipv6] == .noRoute)
        #expect(Set(first.links.values.map(\.name)) == ["lo", "wlan0"])
    }

    /// An interface the path does not use going down changes what the path was judged from, not
    /// the path: an update for the observer, nothing for `paths` or the handler.
    @Test func aChangeBesideThePathIsAnUpdateButNoPathChange() async throws {
        let network = SimulatedNetwork.connected(.wiredEthernet, name: "eth0")
        // An interface with no address: never part of the path.
        network.addInterface("eth1", ipv4: false)
        let monitor = PathMonitor(source: network)
        defer { monitor.cancel() }
        let handled = Locked(0)
        monitor.pathUpdateHandler = { _ in handled.withLock { $0 += 1 } }
        let updates = observed(monitor)
        let path = monitor.currentPath
        #expect(path.primaryInterface?.name == "eth0")
        network.setCarrier("eth1", false)
        #expect(monitor.currentPath == path)
        let all = updates.all
        #expect(all.map(\.sequence) == [1, 2])
        #expect(all.map(\.path) == [path, path])
        #expect(all[0].links.values.first { $0.name == "eth1" }?.hasCarrier == true)
        #expect(all[1].links.values.first { $0.name == "eth1" }?.hasCarrier == false)
        // The same state again is nothing at all.
        network.update { _ in }
        #expect(updates.all.count == 2)
        // The handler saw the first path only (its queue is drained by a round trip).
        await withCheckedContinuation { continuation in queue.async { continuation.resume() } }
        #expect(handled.withLock { $0 } == 1)
        network.setLinkUp("eth0", false)
        #expect(updates.all.count == 3)
        #expect(updates.all.last?.path.status == .unsatisfied)
        #expect(updates.all.last?.sequence == 3)
    }

    /// A per-destination monitor's routes are the kernel's answer for its address.
    @Test func aDestinationsRoutesAreThoseToItsAddress() throws {
        let network = SimulatedNetwork.connected(.wiredEthernet, name: "eth0")
        var snapshot = network.snapshot
        let eth0 = try #require(snapshot.links.values.first { $0.name == "eth0" })
        snapshot.destinationLookups[IPAddress("198.51.100.7")!] = .route(
            .init(interfaceIndex: eth0.index, gateway: IPAddress("192.0.2.254"), table: 100))
        network.update { $0 = snapshot }
        let monitor = PathMonitor(destination: "198.51.100.7", source: network)
        defer { monitor.cancel() }
        let updates = observed(monitor)
        let first = try #require(updates.all.first)
        #expect(
            first.routes == [
                .ipv4: .route(.init(interfaceIndex: eth0.index, gateway: IPAddress("192.0.2.254"), table: 100))
            ])
        #expect(first.path == monitor.currentPath)
    }

    /// A monitor that cannot observe the system still publishes its one update: the reason, and
    /// nothing it was judged from.
    @Test func aMonitorThatCannotObserveHasAnEmptyUpdate() throws {
        let network = SimulatedNetwork.connected()
        network.failSubscriptions(with: .namespaceGone(path: "/run/netns/gone"))
        let monitor = PathMonitor(source: network)
        defer { monitor.cancel() }
        let updates = observed(monitor)
        let first = try #require(updates.all.first)
        #expect(first.path.unsatisfiedReason == .monitorUnavailable)
        #expect(first.routes.isEmpty && first.links.isEmpty)
        #expect(first.sequence == 1)
    }

    /// Two monitors on one source, each with its own order: sequences count each monitor's own
    /// updates, and every update reaches the observer in the order computed.
    @Test func sequencesAreEachMonitorsOwnAndHaveNoGaps() {
        let network = SimulatedNetwork.connected(.wiredEthernet, name: "eth0")
        let plain = PathMonitor(source: network)
        let wifiOnly = PathMonitor(requirements: PathRequirements(requiredInterfaceType: .wifi), source: network)
        defer {
            plain.cancel()
            wifiOnly.cancel()
        }
        let first = observed(plain)
        let second = observed(wifiOnly)
        for round in 0..<20 { network.setCarrier("eth0", round % 2 == 1) }
        #expect(first.all.map(\.sequence) == Array(1...21))
        #expect(second.all.map(\.sequence) == Array(1...UInt64(second.all.count)))
        #expect(first.all.last?.path == plain.currentPath)
    }
}
