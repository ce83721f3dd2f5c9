import Foundation
import NetReach
import NetReachServe
import NetReachTesting
import Synchronization
import Testing

/// `NetworkWatch`'s reconcile, reload and namespace logic against simulated networks, one per
/// namespace: no root, no kernel. A simulated network delivers each change before the call that
/// made it returns, so what the state says right after is what a scrape or a client reads.
@Suite("serve's watch on simulated networks")
struct NetworkWatchTests {
    /// One simulated network per namespace label (`nil`: the server's own).
    final class Networks: Sendable {
        let own = SimulatedNetwork.connected()
        private let named = Mutex<[String: SimulatedNetwork]>([:])

        func network(_ namespace: NetworkNamespace?) -> SimulatedNetwork {
            guard let namespace else { return own }
            return named.withLock { networks in
                if let network = networks[namespace.path] { return network }
                let network = SimulatedNetwork.connected()
                network.addLoopback()
                networks[namespace.path] = network
                return network
            }
        }

        var sources: PathSources { .each { self.network($0) } }
    }

    private let db = NamedDestination(name: "db", destination: "192.0.2.10")
    private let dns = NamedDestination(
        name: "dns", destination: "127.0.0.53", traffic: PathTraffic(transportProtocol: .udp, port: 53))

    private func makeWatch(_ targets: ServeTargets, networks: Networks) -> (NetworkWatch, ServeState, EventHub) {
        let hub = EventHub(replayCapacity: 256, clientBuffer: 256)
        let state = ServeState(keys: NetworkWatch.keys(of: targets), version: "1", hub: hub)
        let watch = NetworkWatch(targets: targets, state: state, sources: networks.sources)
        return (watch, state, hub)
    }

    /// The `(event, data)` of every event kept, in order; ends the hub.
    private func events(_ hub: EventHub) async -> [(name: String, data: String)] {
        let subscription = hub.subscribe(lastEventID: 0, onDrop: {})
        defer { subscription.cancel() }
        hub.shutDown()
        var events: [(name: String, data: String)] = []
        for await chunk in subscription.chunks {
            var name = ""
            for line in chunk.split(separator: "\n") {
                if line.hasPrefix("event: ") { name = String(line.dropFirst(7)) }
                if line.hasPrefix("data: ") { events.append((name, String(line.dropFirst(6)))) }
            }
        }
        return events.filter { $0.name != "shutdown" }
    }

    private func json(_ text: String) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any]) ?? [:]
    }

    @Test func aReloadAddsAndRemovesDestinations() async {
        let networks = Networks()
        var targets = ServeTargets()
        targets.destinations = [db]
        let (watch, state, hub) = makeWatch(targets, networks: networks)
        await watch.apply(targets)
        #expect(state.hasReadAll)
        #expect(state.path(for: PathKey(namespace: "", destination: "db"))?.status == .satisfied)
        #expect(networks.own.subscriberCount == 2)

        targets.destinations = [dns]
        await watch.apply(targets)
        #expect(state.keys.map(\.destination) == ["", "dns"])
        #expect(state.path(for: PathKey(namespace: "", destination: "db")) == nil)
        #expect(state.path(for: PathKey(namespace: "", destination: "dns"))?.usesInterfaceType(.loopback) == true)
        // db's monitor stopped; the internet's was kept.
        #expect(networks.own.subscriberCount == 2)
        let lines = state.seriesLines
        #expect(!lines.contains { $0.contains(#"destination="db""#) }, "\(lines)")
        #expect(
            lines.contains(#"netreach_path_traffic_info{namespace="",destination="dns",protocol="udp",port="53"} 1.0"#))
        #expect(lines.contains(#"netreach_path_changes_total{namespace="",destination="dns"} 0"#))

        let paths = await events(hub).filter { $0.name == "path" }.map { json($0.data) }
        let withdrawn = paths.firstIndex { $0["destination"] as? String == "db" && $0["path"] is NSNull }
        let added = paths.firstIndex { $0["destination"] as? String == "dns" }
        #expect(withdrawn != nil && added != nil && withdrawn! < added!, "\(paths)")
        await watch.cancel()
        #expect(networks.own.subscriberCount == 0)
    }

    @Test func aNamespaceNoLongerNamedIsWithdrawnWithItsPaths() async {
        let networks = Networks()
        var targets = ServeTargets()
        targets.namespaces = [.own, NetworkNamespaceLabel(label: "lab", namespace: .named("lab"))]
        targets.destinations = [db]
        let (watch, state, hub) = makeWatch(targets, networks: networks)
        await watch.apply(targets)
        #expect(state.namespaces["lab"]?.isAvailable == true)
        #expect(state.seriesLines.contains(#"netreach_namespace_available{namespace="lab"} 1.0"#))
        #expect(state.seriesLines.contains { $0.hasPrefix(#"netreach_interface_up{namespace="lab",interface="eth0""#) })

        targets.namespaces = [.own]
        await watch.apply(targets)
        #expect(state.namespaces["lab"] == nil)
        #expect(!state.seriesLines.contains { $0.contains(#"namespace="lab""#) }, "\(state.seriesLines)")
        #expect(networks.network(.named("lab")).subscriberCount == 0)
        let all = await events(hub)
        let labPaths = all.filter { $0.name == "path" }.map { json($0.data) }.filter {
            $0["namespace"] as? String == "lab"
        }
        #expect(labPaths.count == 4) // read, then withdrawn: the internet and db
        #expect(labPaths.suffix(2).allSatisfy { $0["path"] is NSNull })
        #expect(all.last?.name == "namespace")
        #expect(all.last?.data == #"{"available":false,"namespace":"lab","watched":false}"#)
        await watch.cancel()
    }

    @Test func aNamespaceThatCannotBeObservedSaysSo() async {
        let networks = Networks()
        networks.network(.named("gone")).failSubscriptions(
            with: .namespaceUnavailable(path: "/run/netns/gone", errno: ENOENT))
        var targets = ServeTargets()
        targets.namespaces = [NetworkNamespaceLabel(label: "gone", namespace: .named("gone"))]
        let (watch, state, hub) = makeWatch(targets, networks: networks)
        await watch.apply(targets)
        #expect(state.path(for: PathKey(namespace: "gone", destination: ""))?.unsatisfiedReason == .monitorUnavailable)
        #expect(state.namespaces["gone"]?.isAvailable == false)
        #expect(state.seriesLines.contains(#"netreach_namespace_available{namespace="gone"} 0.0"#))
        #expect(!state.seriesLines.contains { $0.hasPrefix("netreach_interface_up") })
        let namespaces = await events(hub).filter { $0.name == "namespace" }.map(\.data)
        #expect(namespaces == [#"{"available":false,"namespace":"gone","watched":true}"#])
        await watch.cancel()
    }

    /// An interface the path does not use changes: no path event, but the next scrape says so.
    @Test func anInterfaceOnlyChangeShowsAtTheNextScrape() async {
        let networks = Networks()
        networks.own.addInterface("eth1", ipv4: false)
        networks.own.setLinkUp("eth1", false)
        let (watch, state, hub) = makeWatch(ServeTargets(), networks: networks)
        await watch.apply(ServeTargets())
        let eth1 = #"netreach_interface_up{namespace="",interface="eth1",type="wiredEthernet"}"#
        #expect(state.seriesLines.contains("\(eth1) 0.0"))
        let before = state.path(for: PathKey(namespace: "", destination: ""))
        let lastID = hub.lastID

        networks.own.setLinkUp("eth1", true)
        #expect(state.seriesLines.contains("\(eth1) 1.0"), "\(state.seriesLines)")
        if state.path(for: PathKey(namespace: "", destination: "")) == before {
            #expect(hub.lastID == lastID, "an event for a path that did not change")
        }
        networks.own.removeInterface("eth1")
        #expect(!state.seriesLines.contains { $0.contains(#"interface="eth1""#) })
        await watch.cancel()
    }

    /// Events leave in the order the changes happened, each path's numbered in its own order.
    @Test func eventsFollowTheChangesInOrder() async {
        let networks = Networks()
        var targets = ServeTargets()
        targets.destinations = [db]
        let (watch, state, hub) = makeWatch(targets, networks: networks)
        await watch.apply(targets)
        let internet = PathKey(namespace: "", destination: "")
        // What the state holds after each change: the reference the events are held to.
        var held = [state.path(for: internet)]
        let changes: [() -> Void] = [
            { networks.own.setLinkUp("eth0", false) }, { networks.own.setLinkUp("eth0", true) },
            { networks.own.addDefaultRoute("eth0", gateway: IPAddress("192.0.2.1")!) },
            { networks.own.removeDefaultRoutes("eth0") },
        ]
        for change in changes {
            change()
            held.append(state.path(for: internet))
        }
        // A change that left the path as it was (the link up again, still without its route) is
        // no event.
        let expected = held.enumerated().filter { $0.offset == 0 || held[$0.offset - 1] != $0.element }.map {
            $0.element?.unsatisfiedReason?.rawValue ?? "satisfied"
        }
        #expect(expected.count >= 4, "\(held)")
        let reasons = await events(hub).filter { $0.name == "path" }.map { json($0.data) }.filter {
            $0["destination"] as? String == ""
        }.map { ($0["path"] as? [String: Any])?["unsatisfiedReason"] as? String ?? "satisfied" }
        #expect(reasons == expected, "\(held)")
        #expect(
            state.seriesLines.contains(
                #"netreach_path_changes_total{namespace="",destination=""} \#(expected.count - 1)"#))
        await watch.cancel()
    }
}
