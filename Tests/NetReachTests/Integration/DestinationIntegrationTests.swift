import Dispatch
import Foundation
import NetReachSystem
import NetReachTestSupport
import Testing

@testable import NetReach

#if canImport(Glibc)
import Glibc
#endif

/// `PathMonitor(destination:)` in a namespace, against `ip route get DESTINATION`. Destinations
/// are documentation addresses, only looked up. (`status --to` and `get` judged by their own
/// destination: DestinationCommandTests.)
@Suite("Per-destination paths in a network namespace (integration)", .offPool, .needsNamespaceRoot)
struct DestinationIntegrationTests {
    private static let destination = "198.51.100.7"

    @Test func aMoreSpecificRouteMovesTheDestinationToItsInterfaceAndBack() async throws {
        try await NetnsLab.withLab { lab in
            try await lab.addUplink()
            let monitor = PathMonitor(destination: PathDestination(Self.destination), namespace: lab.namespace)
            monitor.start(queue: DispatchQueue(label: "destination"))
            defer { monitor.cancel() }
            let log = PathLog.consuming(monitor.paths)
            let internet = PathMonitor.started(in: lab)
            defer { internet.cancel() }

            #expect(
                try await lab.routeGet(to: Self.destination)
                    == .route(
                        device: "veth0", gateway: IPAddress(NetnsLab.ipv4Gateway), source: IPAddress("10.123.0.2"),
                        linkdown: false))
            #expect(monitor.currentPath.primaryInterface?.name == "veth0")

            // A split tunnel for one network: only that destination moves.
            try await lab.ip("-4", "route", "add", "198.51.100.0/24", "via", "10.124.0.1", "dev", "veth2")
            #expect(
                try await lab.routeGet(to: Self.destination)
                    == .route(
                        device: "veth2", gateway: IPAddress("10.124.0.1"), source: IPAddress("10.124.0.2"),
                        linkdown: false))
            await LabPoll.until("the destination's path uses veth2") {
                monitor.currentPath.primaryInterface?.name == "veth2"
            }
            #expect(monitor.currentPath.gateways == [IPAddress("10.124.0.1")!])
            #expect(internet.currentPath.primaryInterface?.name == "veth0")

            try await lab.ip("-4", "route", "del", "198.51.100.0/24", "via", "10.124.0.1", "dev", "veth2")
            await LabPoll.until("the destination's path is back on veth0") {
                monitor.currentPath.primaryInterface?.name == "veth0"
            }
            // The stream delivers after `currentPath` changed, on its consumer's task: wait for it too.
            await LabPoll.until("the stream delivered the change back") { log.paths.count >= 3 }
            #expect(log.paths.map { $0.primaryInterface?.name ?? "-" } == ["veth0", "veth2", "veth0"])
        }
    }

    @Test func loopbackAndOnLinkDestinationsNeedNoDefaultRoute() async throws {
        try await NetnsLab.withLab(NetnsLab.Setup(defaultRoutes: false)) { lab in
            let loopback = PathMonitor(destination: "127.0.0.1", namespace: lab.namespace)
            let gateway = PathMonitor(destination: PathDestination(NetnsLab.ipv4Gateway), namespace: lab.namespace)
            let remote = PathMonitor(destination: PathDestination(Self.destination), namespace: lab.namespace)
            for monitor in [loopback, gateway, remote] { monitor.start(queue: DispatchQueue(label: "destinations")) }
            defer { for monitor in [loopback, gateway, remote] { monitor.cancel() } }

            #expect(loopback.currentPath.status == .satisfied && loopback.currentPath.primaryInterfaceType == .loopback)
            #expect(gateway.currentPath.status == .satisfied && gateway.currentPath.primaryInterface?.name == "veth0")
            #expect(gateway.currentPath.gateways.isEmpty)
            #expect(remote.currentPath.unsatisfiedReason == .noDefaultRoute)
            if case .error = try await lab.routeGet(to: Self.destination) {
            } else {
                Issue.record("ip route get found a route")
            }
        }
    }

    /// Many destinations on one engine: each gets what a program's `connect()` there gets,
    /// whatever the others get (a route, another uplink, a rule's table, a refusal, nothing), so
    /// no answer is handed to another destination. The reference is the lab's own connected
    /// socket and `ip route get ADDRESS from SOURCE`, asked one at a time.
    @Test(.offPool) func manyDestinationsEachGetWhatConnectGets() async throws {
        try await NetnsLab.withLab(NetnsLab.Setup(ipv4: true, ipv6: true)) { lab in
            try await lab.addUplink()
            try await lab.ip("-4", "route", "add", "198.51.100.8/29", "via", "10.124.0.1", "dev", "veth2")
            try await lab.ip("-4", "route", "add", "blackhole", "198.51.100.20/32")
            try await lab.ip("-4", "route", "add", "unreachable", "198.51.100.21/32")
            try await lab.ip("-4", "route", "add", "prohibit", "198.51.100.22/32")
            try await lab.ip("-4", "route", "add", "default", "via", "10.124.0.1", "dev", "veth2", "table", "100")
            try await lab.ip("-4", "rule", "add", "to", "198.51.100.30/32", "table", "100")
            try await lab.ip("-6", "route", "add", "2001:db8:77::/48", "dev", "veth2")
            try await lab.ip("-6", "route", "add", "unreachable", "2001:db8:78::/48")
            var destinations = (1...6).map { "198.51.100.\($0)" } + (8...15).map { "198.51.100.\($0)" }
            destinations += ["198.51.100.20", "198.51.100.21", "198.51.100.22", "198.51.100.30", "127.0.0.1"]
            destinations += ["2001:db8:ffff::9", "2001:db8:77::1", "2001:db8:78::1", "::1"]
            let addresses = destinations.map { IPAddress($0)! }

            let source = SystemPathSource(configuration: .init(namespace: lab.namespace))
            let latest = Locked(SystemSnapshot())
            let subscription = try source.subscribe { snapshot in latest.withLock { $0 = snapshot } }
            defer { subscription.cancel() }
            // Returns once the source's snapshot has every destination's answer (at most 5 s); the
            // subscriber may be handed it a moment later.
            let routes = source.lookUpRoutes(to: addresses)
            defer { routes.cancel() }
            await LabPoll.until("every destination's answer reached the subscriber") {
                latest.withLock { snapshot in addresses.allSatisfy { snapshot.destinationLookups[$0] != nil } }
            }
            let snapshot = latest.withLock { $0 }
            for (name, address) in zip(destinations, addresses) {
                let truth = try await lab.routeGet(to: name)
                let answer = try #require(snapshot.destinationLookups[address], "\(name): not asked")
                switch (truth, answer) {
                case (.route(let device, let gateway, let truthSource, _), .route(let route)):
                    #expect(snapshot.links[route.interfaceIndex]?.name == device, "\(name): \(answer) vs \(truth)")
                    #expect(route.gateway == gateway, "\(name): \(answer) vs \(truth)")
                    #expect(route.source == truthSource, "\(name): \(answer) vs \(truth)")
                case (.error, .route), (.route, _):
                    Issue.record("\(name): the monitor says \(answer), a program gets \(truth)")
                case (.error, _):
                    break
                }
            }
            // The refusals are told apart as connect() tells them.
            #expect(snapshot.destinationLookups[IPAddress("198.51.100.20")!] == .refused(.blackhole))
            #expect(snapshot.destinationLookups[IPAddress("198.51.100.21")!] == .refused(.unreachable))
            #expect(snapshot.destinationLookups[IPAddress("198.51.100.22")!] == .refused(.prohibit))
        }
    }
}
