import Foundation
import NetReach
import NetReachConnectivity
import NetReachServe
import NetReachTestSupport
import NetReachTesting
import Prometheus
import Testing

/// What `/metrics` says about the paths: Prometheus's conventions (one-hot enums, `_info` = 1,
/// `_total` counters) and no stale series once what a series describes is gone.
@Suite("serve metrics")
struct ServeMetricsTests {
    private let key = PathKey(namespace: "lab1", destination: "")
    private let eth0 = NetworkInterface(name: "eth0", index: 2, type: .wiredEthernet)
    private let wlan0 = NetworkInterface(name: "wlan0", index: 3, type: .wifi)

    private func satisfied(over interface: NetworkInterface, gateway: String) -> NetworkPath {
        NetworkPath(
            status: .satisfied, availableInterfaces: [interface], supportsIPv4: true, supportsDNS: true,
            gateways: [IPAddress(gateway)!])
    }

    private func makeState() -> ServeState {
        ServeState(keys: [key], version: "9.9.9", hub: EventHub(replayCapacity: 8, clientBuffer: 8))
    }

    /// What a scrape reads now.
    private func lines(_ state: ServeState) -> Set<String> { Set(state.seriesLines) }

    @Test func anUnsatisfiedPathIsZeroWithExactlyOneReasonSet() {
        let state = makeState()
        state.record(.of(.unsatisfied(.noDefaultRoute), at: Date(timeIntervalSince1970: 100)), for: key)
        let lines = lines(state)
        #expect(lines.contains(#"netreach_path_satisfied{namespace="lab1",destination=""} 0.0"#))
        let reasons = lines.filter { $0.hasPrefix("netreach_path_unsatisfied_reason") }
        #expect(reasons.count == UnsatisfiedReason.allCases.count)
        #expect(
            reasons.filter { $0.hasSuffix(" 1.0") } == [
                #"netreach_path_unsatisfied_reason{namespace="lab1",destination="",reason="noDefaultRoute"} 1.0"#
            ])
        #expect(!lines.contains { $0.hasPrefix("netreach_path_route_info") })
        #expect(lines.contains(#"netreach_build_info{version="9.9.9"} 1.0"#))
    }

    @Test func aRouteThroughAnotherInterfaceReplacesTheOldRouteInfoSeries() {
        let state = makeState()
        state.record(.of(satisfied(over: eth0, gateway: "10.0.0.1"), routes: [(eth0, "10.0.0.1")]), for: key)
        state.record(.of(satisfied(over: wlan0, gateway: "10.1.0.1"), routes: [(wlan0, "10.1.0.1")]), for: key)
        let info = lines(state).filter { $0.hasPrefix("netreach_path_route_info") }
        #expect(
            info == [
                #"netreach_path_route_info{namespace="lab1",destination="",family="ipv4",interface="wlan0",interface_type="wifi",gateway="10.1.0.1"} 1.0"#
            ])
    }

    @Test func changesAreCountedAfterTheFirstPathAndRepeatsAreNot() {
        let state = makeState()
        let up = satisfied(over: eth0, gateway: "10.0.0.1")
        state.record(.of(up, at: Date(timeIntervalSince1970: 100)), for: key)
        state.record(.of(up, at: Date(timeIntervalSince1970: 150)), for: key)
        state.record(.of(.unsatisfied(.linkDown), at: Date(timeIntervalSince1970: 200)), for: key)
        state.record(.of(up, at: Date(timeIntervalSince1970: 300)), for: key)
        let lines = lines(state)
        #expect(lines.contains(#"netreach_path_changes_total{namespace="lab1",destination=""} 2"#))
        #expect(lines.contains(#"netreach_path_last_change_timestamp_seconds{namespace="lab1",destination=""} 300.0"#))
        // Three path events (the first and two changes), and the namespace's, which the internet's
        // first update says is observable.
        #expect(state.hub.lastID == 4)
    }

    @Test func aVanishedInterfaceAndAnUnavailableNamespaceLeaveNoStaleSeries() {
        let state = makeState()
        // The internet's monitor speaks for its namespace's interfaces: every link of its update.
        let down = NetworkPath.unsatisfied(.noDefaultRoute)
        state.record(.of(down, links: [PathUpdate.link(eth0), PathUpdate.link(wlan0, isUp: false)]), for: key)
        state.record(.of(down, links: [PathUpdate.link(eth0)]), for: key)
        var lines = lines(state)
        #expect(
            lines.filter { $0.hasPrefix("netreach_interface_up") } == [
                #"netreach_interface_up{namespace="lab1",interface="eth0",type="wiredEthernet"} 1.0"#
            ])
        state.record(.of(.unsatisfied(.monitorUnavailable)), for: key)
        lines = self.lines(state)
        #expect(!lines.contains { $0.hasPrefix("netreach_interface_up") })
        #expect(lines.contains(#"netreach_namespace_available{namespace="lab1"} 0.0"#))
    }

    @Test func theDefaultNamespaceIsTheFirstWatchedNotTheFirstInOrder() {
        let keys = [PathKey(namespace: "zeta", destination: ""), PathKey(namespace: "alpha", destination: "")]
        let state = ServeState(
            keys: keys, version: "1", hub: EventHub(replayCapacity: 8, clientBuffer: 8))
        #expect(state.defaultNamespace == "zeta")
        #expect(state.keys.first?.namespace == "alpha")
    }

    @Test func labelValuesAreEscapedAndEventsAreJSON() {
        let odd = PathKey(namespace: "ns\"1", destination: "a\\b")
        let state = ServeState(keys: [odd], version: "1", hub: EventHub(replayCapacity: 8, clientBuffer: 8))
        state.record(.of(.unsatisfied(.noInterface), at: Date()), for: odd)
        #expect(state.exposition().contains(#"netreach_path_satisfied{namespace="ns\"1",destination="a\\b"} 0.0"#))
        let event = state.pathEvent(.unsatisfied(.noInterface), key: odd)
        let object = try? JSONSerialization.jsonObject(with: Data(event.utf8)) as? [String: Any]
        #expect(object?["namespace"] as? String == "ns\"1")
        #expect(object?["destination"] as? String == "a\\b")
    }

    @Test func theExpositionHasHelpBeforeEachOfOurFamiliesAndTheProcessSeries() {
        let state = makeState()
        state.record(.of(.unsatisfied(.noInterface), at: Date()), for: key)
        let text = state.exposition(process: ProcessMetrics.read())
        let lines = text.split(separator: "\n").map(String.init)
        for (index, line) in lines.enumerated() where line.hasPrefix("# TYPE netreach_") {
            let name = line.split(separator: " ")[2]
            #expect(index > 0 && lines[index - 1].hasPrefix("# HELP \(name) "), "no help for \(name)")
        }
        let resident = lines.first { $0.hasPrefix("process_resident_memory_bytes ") }
        #expect((resident?.split(separator: " ").last).flatMap { Double($0) }.map { $0 > 0 } == true)
        #expect(lines.contains { $0.hasPrefix("process_cpu_seconds_total ") })
        #expect(lines.contains { $0.hasPrefix("process_open_fds ") })
    }

    /// Every family the exposition writes, serve's and the library's (a monitor counting through
    /// serve's factory), passes Prometheus's own linter, help and types included.
    @Test(.enabled(if: ExternalServer.available("promtool")))
    func theExpositionPassesPromtoolsChecks() async throws {
        let registry = PrometheusCollectorRegistry()
        let state = ServeState(
            keys: [key], version: "9.9.9", hub: EventHub(replayCapacity: 8, clientBuffer: 8), registry: registry,
            judgesConnectivity: true, judgedFamilies: [.ipv4])
        let network = SimulatedNetwork.connected()
        let monitor = PathMonitor(source: network, metricsFactory: ServeMetricsFactory(registry: registry))
        monitor.updateObserver = { state.record($0, for: PathKey(namespace: "lab1", destination: "")) }
        monitor.start(queue: DispatchQueue(label: "serve.metrics.test"))
        network.setLinkUp("eth0", false)
        let passed = ProbeResult(
            probe: ConnectivityProbe(URL(string: "http://192.0.2.10/generate_204")!), family: .ipv4, status: 204,
            latency: .milliseconds(12), verdict: .passed)
        state.record(
            Connectivity(
                ipv4: .init(level: .full, evidence: [passed]), ipv6: .init(level: .none),
                path: .unsatisfied(.noDefaultRoute)),
            namespace: "lab1")
        let text = state.exposition(process: ProcessMetrics.read())
        monitor.cancel()
        #expect(text.contains("# HELP netreach_path_updates_total Paths delivered"))
        #expect(text.contains("# TYPE netreach_probe_duration_seconds histogram"))
        // Serve's families and the registry's, each once, in the table's order.
        let types = text.split(separator: "\n").filter { $0.hasPrefix("# TYPE netreach_") }.map {
            String($0.split(separator: " ")[2])
        }
        #expect(types.contains("netreach_netlink_messages_total") || types.contains("netreach_path_updates_total"))
        #expect(types == MetricFamilies.all.map(\.name).filter(types.contains), "\(types)")
        #expect(text.contains(#"netreach_interface_up{namespace="lab1",interface="eth0",type="wiredEthernet"} 0.0"#))
        let checked = try await ChildProcess.run(
            try ExternalServer.require("promtool"), ["check", "metrics"], input: .data(Data(text.utf8)))
        #expect(checked.status == 0, "\(checked.standardOutput)\(checked.standardError)\n\(text)")
    }
}
