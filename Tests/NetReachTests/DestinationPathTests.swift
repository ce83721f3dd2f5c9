import Dispatch
import Foundation
import NetReachSystem
import NetReachTesting
import Testing

@testable import NetReach

/// Per-destination monitors on a simulated network. Host names are answered by a stand-in
/// resolver: nothing here may ask a real DNS server.
@Suite("Per-destination paths")
struct DestinationPathTests {
    private static let lo = SystemSnapshot.Link(
        index: 1, name: "lo", isLoopback: true, hardwareType: SystemSnapshot.Link.loopbackHardwareType)
    private static let loAddress = SystemSnapshot.Address(
        interfaceIndex: 1, address: IPAddress("127.0.0.1")!, prefixLength: 8, scope: 254)
    private static let eth0 = SystemSnapshot.Link(index: 2, name: "eth0")
    private static let eth0Address = SystemSnapshot.Address(
        interfaceIndex: 2, address: IPAddress("192.0.2.10")!, prefixLength: 24)

    private func started(_ monitor: PathMonitor) -> (PathMonitor, Recorder, DispatchQueue) {
        let recorder = Recorder()
        let queue = DispatchQueue(label: "destination")
        monitor.pathUpdateHandler = { recorder.append($0) }
        monitor.start(queue: queue)
        return (monitor, recorder, queue)
    }

    @Test func loopbackIsSatisfiedWithOnlyLo() {
        let network = SimulatedNetwork(SystemSnapshot(links: [Self.lo], addresses: [Self.loAddress]))
        let (monitor, _, _) = started(PathMonitor(destination: "127.0.0.1", source: network))
        defer { monitor.cancel() }
        #expect(monitor.currentPath.status == .satisfied)
        #expect(monitor.currentPath.primaryInterfaceType == .loopback)
        #expect(PathMonitor(source: network).currentPath != monitor.currentPath)
    }

    @Test func anOnLinkDestinationNeedsNoDefaultRoute() {
        let network = SimulatedNetwork(
            SystemSnapshot(links: [Self.lo, Self.eth0], addresses: [Self.loAddress, Self.eth0Address]))
        let (monitor, _, _) = started(PathMonitor(destination: "192.0.2.99", source: network))
        defer { monitor.cancel() }
        #expect(monitor.currentPath.status == .satisfied && monitor.currentPath.primaryInterface?.name == "eth0")
        #expect(monitor.currentPath.gateways.isEmpty)
        // Off-link, with no default route: unsatisfied, as the internet path is.
        let (offLink, _, _) = started(PathMonitor(destination: "198.51.100.7", source: network))
        defer { offLink.cancel() }
        #expect(offLink.currentPath.unsatisfiedReason == .noDefaultRoute)
    }

    @Test func theKernelsAnswerForTheDestinationDecidesAndChangesEmit() {
        let wg0 = SystemSnapshot.Link(index: 5, name: "wg0", hardwareType: 65534, kind: "tun")
        var snapshot = SystemSnapshot(
            links: [Self.lo, Self.eth0, wg0], addresses: [Self.loAddress, Self.eth0Address],
            defaultRoutes: [.init(interfaceIndex: 2, gateway: IPAddress("192.0.2.1")!)])
        let database = IPAddress("10.20.0.5")!
        snapshot.destinationLookups[database] = .route(
            .init(interfaceIndex: 5, source: IPAddress("10.9.0.2"), table: 51820))
        let network = SimulatedNetwork(snapshot)
        let (monitor, recorder, queue) = started(PathMonitor(destination: .address(database), source: network))
        defer { monitor.cancel() }
        #expect(monitor.currentPath.primaryInterface?.name == "wg0")
        network.update { $0.destinationLookups[database] = .refused(.prohibit) }
        flush(queue)
        #expect(recorder.all.map(\.unsatisfiedReason) == [nil, .routeRefused])
    }

    @Test func aNameThatDoesNotResolveIsATypedStateThenResolvesAfterAChange() {
        let answers = Locked<Result<[IPAddress], HostResolutionError>>(.failure(.notFound(host: "db.internal")))
        let network = SimulatedNetwork.connected()
        let monitor = PathMonitor(destination: "db.internal", source: network) { _, _ in answers.withLock { $0 } }
        let (_, recorder, queue) = started(monitor)
        defer { monitor.cancel() }
        #expect(monitor.currentPath.unsatisfiedReason == .destinationUnresolved)
        #expect(monitor.resolutionFailure == .notFound(host: "db.internal"))
        #expect(monitor.destinationAddresses.isEmpty)

        // The network changes (new nameservers): the name is resolved again, on another thread.
        answers.withLock { $0 = .success([IPAddress("192.0.2.77")!]) }
        network.setNameservers([IPAddress("192.0.2.54")!])
        let deadline = ContinuousClock.now + .seconds(15)
        while monitor.currentPath.status != .satisfied && ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.01)
        }
        flush(queue)
        #expect(monitor.currentPath.status == .satisfied)
        #expect(monitor.resolutionFailure == nil)
        #expect(monitor.destinationAddresses == [IPAddress("192.0.2.77")!])
        #expect(recorder.all.first?.unsatisfiedReason == .destinationUnresolved)
    }

    @Test func aResolverThatNeverAnswersTimesOutInsteadOfHanging() {
        let monitor = PathMonitor(destination: "slow.internal", source: SimulatedNetwork.connected()) { host, timeout in
            HostResolverTimeoutProbe.resolve(host, timeout: timeout)
        }
        monitor.start(queue: DispatchQueue(label: "slow"))
        defer { monitor.cancel() }
        #expect(monitor.resolutionFailure == .timedOut(host: "slow.internal", seconds: 1))
        #expect(monitor.currentPath.unsatisfiedReason == .destinationUnresolved)
    }

    @Test func destinationsParseAsAddressesOrNames() {
        #expect(PathDestination("10.0.0.1") == .address(IPAddress("10.0.0.1")!))
        #expect(PathDestination("[2001:db8::1]") == .address(IPAddress("2001:db8::1")!))
        #expect(PathDestination("api.example.com") == .host("api.example.com"))
        #expect(PathDestination("300.1.1.1") == .host("300.1.1.1"))
    }
}

/// The real bounded resolver around a lookup that never answers in time (a stuck resolver).
private enum HostResolverTimeoutProbe {
    static func resolve(_ host: String, timeout: Duration) -> Result<[IPAddress], HostResolutionError> {
        HostResolver.resolve(
            host, timeout: .milliseconds(200),
            lookUp: { _ in
                Thread.sleep(forTimeInterval: 2)
                return .success([IPAddress("192.0.2.1")!])
            })
    }
}
