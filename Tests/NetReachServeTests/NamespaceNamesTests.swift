import Foundation
import NetReach
import NetReachServe
import NetReachSystem
import NetReachTestSupport
import NetReachTesting
import Testing

/// A destination's host name in a watched namespace is resolved inside that namespace, as a
/// program there would resolve it, also when the watch's monitors read a simulated network
/// (`PathSources.each`): never by this process's resolver.
@Suite("serve's watch resolves a namespace's names inside it")
struct NamespaceNamesTests {
    /// The path to the address `app.test` has in each namespace: the resolver is asked for the
    /// monitor's own namespace.
    @Test func eachNamespacesMonitorAsksTheResolverOfItsNamespace() async {
        let networks = NetworkWatchTests.Networks()
        let asked = Locked<Set<String>>([])
        let resolve: PathSources.Resolver = { host, _, namespace in
            asked.withLock { _ = $0.insert("\(host) in \(namespace?.path ?? "this namespace")") }
            // Loopback here, an address the default route carries in the lab.
            return .success([IPAddress(namespace == nil ? "127.0.0.1" : "192.0.2.20")!])
        }
        let sources = PathSources.each({ networks.network($0) }, resolve: resolve)
        var targets = ServeTargets()
        targets.namespaces = [.own, NetworkNamespaceLabel(label: "lab", namespace: .named("lab"))]
        targets.destinations = [NamedDestination(name: "app", destination: "app.test")]
        let hub = EventHub(replayCapacity: 64, clientBuffer: 64)
        let state = ServeState(keys: NetworkWatch.keys(of: targets), version: "1", hub: hub)
        let watch = NetworkWatch(targets: targets, state: state, sources: sources)
        await watch.apply(targets)
        #expect(
            asked.withLock { $0 } == [
                "app.test in this namespace", "app.test in \(NetworkNamespace.named("lab").path)",
            ])
        let here = state.path(for: PathKey(namespace: "", destination: "app"))
        let lab = state.path(for: PathKey(namespace: "lab", destination: "app"))
        #expect(here?.usesInterfaceType(.loopback) == true, "\(String(describing: here))")
        #expect(
            lab?.status == .satisfied && lab?.usesInterfaceType(.wiredEthernet) == true, "\(String(describing: lab))")
        #expect(lab?.usesInterfaceType(.loopback) == false)
        await watch.cancel()
    }

    /// `localhost` is 127.0.0.1 in this machine's `/etc/hosts` and 127.0.0.99 in the lab's
    /// `/etc/netns/NAME/hosts` (no DNS asked on either side). The lab's simulated network routes
    /// 127.0.0.99 through its Ethernet, 127.0.0.1 through loopback: the path says which answer
    /// the monitor got. The reference is getaddrinfo inside the namespace and here.
    @Test(.needsNamespaceRoot) func aLabsHostsFileAnswersItsMonitorsNames() async throws {
        try await NetnsLab.withLab(NetnsLab.Setup(defaultRoutes: false)) { lab in
            try EtcNetns.writeResolvConf("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n", for: lab)
            defer { EtcNetns.remove(for: lab) }
            try "127.0.0.99 localhost\n".write(
                toFile: EtcNetns.directory(for: lab) + "/hosts", atomically: true, encoding: .utf8)
            let inLab = HostResolver.resolve("localhost", timeout: .seconds(10), in: .named(lab.name))
            let here = HostResolver.resolve("localhost", timeout: .seconds(10))
            #expect(try inLab.get() == [IPAddress("127.0.0.99")!])
            #expect(try here.get().contains(IPAddress("127.0.0.1")!))

            let network = SimulatedNetwork.connected()
            // 127.0.0.99 goes the way the internet goes, through eth0 (the simulated kernel's answer).
            let internet = network.snapshot.emulatedRouteLookup(for: .ipv4)
            guard case .route(let route) = internet, network.snapshot.links[route.interfaceIndex]?.name == "eth0" else {
                Issue.record("the simulated network routes the internet \(internet)")
                return
            }
            network.update { $0.destinationLookups[IPAddress("127.0.0.99")!] = internet }
            var targets = ServeTargets()
            targets.namespaces = [NetworkNamespaceLabel(label: lab.name, namespace: .named(lab.name))]
            targets.destinations = [NamedDestination(name: "local", destination: "localhost")]
            let hub = EventHub(replayCapacity: 64, clientBuffer: 64)
            let state = ServeState(keys: NetworkWatch.keys(of: targets), version: "1", hub: hub)
            let watch = NetworkWatch(targets: targets, state: state, sources: .each { _ in network })
            await watch.apply(targets)
            let path = state.path(for: PathKey(namespace: lab.name, destination: "local"))
            #expect(
                path?.status == .satisfied, "\(String(describing: path)) \(String(describing: path?.unsatisfiedReason))"
            )
            #expect(path?.availableInterfaces.map(\.name) == ["eth0"], "\(String(describing: path))")
            await watch.cancel()
        }
    }
}
