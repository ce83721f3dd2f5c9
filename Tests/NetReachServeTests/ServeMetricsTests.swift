import Foundation
import NetReach
import NetReachServe
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

    private func makeState() -> (ServeState, PrometheusCollectorRegistry) {
        let registry = PrometheusCollectorRegistry()
        let state = ServeState(
            keys: [key], version: "9.9.9", hub: EventHub(replayCapacity: 8, clientBuffer: 8), registry: registry)
        return (state, registry)
    }

    private func lines(_ registry: PrometheusCollectorRegistry) -> Set<String> {
        Set(registry.emitToString().split(separator: "\n").map(String.init).filter { !$0.hasPrefix("#") })
    }

    private func route(_ interface: NetworkInterface, gateway: String) -> PathSamples.Route {
        .init(family: .ipv4, interface: interface.name, interfaceType: interface.type, gateway: gateway)
    }

    @Test func anUnsatisfiedPathIsZeroWithExactlyOneReasonSet() {
        let (state, registry) = makeState()
        state.record(.unsatisfied(.noDefaultRoute), routes: [], for: key, at: Date(timeIntervalSince1970: 100))
        let lines = lines(registry)
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
        let (state, registry) = makeState()
        state.record(
            satisfied(over: eth0, gateway: "10.0.0.1"), routes: [route(eth0, gateway: "10.0.0.1")], for: key, at: Date()
        )
        state.record(
            satisfied(over: wlan0, gateway: "10.1.0.1"), routes: [route(wlan0, gateway: "10.1.0.1")], for: key,
            at: Date())
        let info = lines(registry).filter { $0.hasPrefix("netreach_path_route_info") }
        #expect(
            info == [
                #"netreach_path_route_info{namespace="lab1",destination="",family="ipv4",interface="wlan0",interface_type="wifi",gateway="10.1.0.1"} 1.0"#
            ])
    }

    @Test func changesAreCountedAfterTheFirstPathAndRepeatsAreNot() {
        let (state, registry) = makeState()
        let up = satisfied(over: eth0, gateway: "10.0.0.1")
        state.record(up, routes: [], for: key, at: Date(timeIntervalSince1970: 100))
        state.record(up, routes: [], for: key, at: Date(timeIntervalSince1970: 150))
        state.record(.unsatisfied(.linkDown), routes: [], for: key, at: Date(timeIntervalSince1970: 200))
        state.record(up, routes: [], for: key, at: Date(timeIntervalSince1970: 300))
        let lines = lines(registry)
        #expect(lines.contains(#"netreach_path_changes_total{namespace="lab1",destination=""} 2"#))
        #expect(lines.contains(#"netreach_path_last_change_timestamp_seconds{namespace="lab1",destination=""} 300.0"#))
        #expect(state.hub.lastID == 3) // three path events: the first and two changes
    }

    @Test func aVanishedInterfaceAndAnUnavailableNamespaceLeaveNoStaleSeries() {
        let (state, registry) = makeState()
        state.record(
            interfaces: ["eth0": .init(type: .wiredEthernet, isUp: true), "wlan0": .init(type: .wifi, isUp: false)],
            available: true, namespace: "lab1")
        state.record(interfaces: ["eth0": .init(type: .wiredEthernet, isUp: true)], available: true, namespace: "lab1")
        var lines = lines(registry)
        #expect(
            lines.filter { $0.hasPrefix("netreach_interface_up") } == [
                #"netreach_interface_up{namespace="lab1",interface="eth0",type="wiredEthernet"} 1.0"#
            ])
        state.record(interfaces: [:], available: false, namespace: "lab1")
        lines = self.lines(registry)
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
        let registry = PrometheusCollectorRegistry()
        let state = ServeState(
            keys: [odd], version: "1", hub: EventHub(replayCapacity: 8, clientBuffer: 8), registry: registry)
        state.record(.unsatisfied(.noInterface), routes: [], for: odd, at: Date())
        #expect(registry.emitToString().contains(#"netreach_path_satisfied{namespace="ns\"1",destination="a\\b"} 0.0"#))
        let event = state.pathEvent(.unsatisfied(.noInterface), key: odd)
        let object = try? JSONSerialization.jsonObject(with: Data(event.utf8)) as? [String: Any]
        #expect(object?["namespace"] as? String == "ns\"1")
        #expect(object?["destination"] as? String == "a\\b")
    }

    @Test func theExpositionHasHelpBeforeEachOfOurFamiliesAndTheProcessSeries() {
        let (state, registry) = makeState()
        state.record(.unsatisfied(.noInterface), routes: [], for: key, at: Date())
        let text = MetricsExposition.render(registry, process: ProcessMetrics.read())
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
}
