import Foundation
import NetReach
import NetReachConnectivity
import NetReachServe
import Testing

/// `ServeState`'s decisions as a value: inputs in, actions out, no lock, hub or clock.
@Suite("serve state machine")
struct ServeStateMachineTests {
    typealias Machine = ServeState.StateMachine
    private let internet = PathKey(namespace: "lab", destination: "")
    private let db = PathKey(namespace: "lab", destination: "db")
    private let down = NetworkPath.unsatisfied(.noDefaultRoute)
    private let moment = Date(timeIntervalSince1970: 1_800_000_000)
    private let eth0 = NetworkInterface(name: "eth0", index: 2, type: .wiredEthernet)

    @Test func theFirstUpdateIsAPathEventAndTheInternetsSaysItsNamespaceIsThere() {
        var machine = Machine(keys: [internet, db], version: "1")
        let token = machine.beginRecording(internet, traffic: .web)
        let action = machine.record(.of(down, at: moment), for: internet, recorder: token)
        #expect(
            action.events == [
                .path(internet, down, .web, at: moment), .namespace("lab", available: true, watched: true),
            ])
        #expect(action.isRecorded)
        #expect(!machine.hasReadAll)
        // A destination's update speaks for its path only.
        let second = machine.record(.of(down, at: moment), for: db)
        #expect(second.events == [.path(db, down, .web, at: moment)])
        #expect(machine.hasReadAll)
    }

    @Test func anUpdateWithTheSamePathIsNoEventButIsWhatTheScrapeReads() {
        var machine = Machine(keys: [internet], version: "1")
        _ = machine.record(.of(down, at: moment, links: [PathUpdate.link(eth0)]), for: internet)
        let again = machine.record(
            .of(down, at: moment + 5, links: [PathUpdate.link(eth0, isUp: false)]), for: internet)
        #expect(again.events.isEmpty)
        #expect(machine.paths[internet]?.changes == 0)
        #expect(machine.paths[internet]?.lastChange == moment.timeIntervalSince1970)
        let text = machine.exposition(eventClients: 0, droppedClients: 0).text()
        #expect(text.contains(#"netreach_interface_up{namespace="lab",interface="eth0",type="wiredEthernet"} 0.0"#))
    }

    @Test func anUpdateFromAReplacedRecorderIsIgnored() {
        var machine = Machine(keys: [db], version: "1")
        let old = machine.beginRecording(db, traffic: .web)
        _ = machine.beginRecording(db, traffic: PathTraffic(transportProtocol: .udp, port: 53))
        let action = machine.record(.of(down, at: moment), for: db, recorder: old)
        #expect(!action.isRecorded)
        #expect(action.events.isEmpty)
        #expect(machine.paths[db] == nil)
    }

    @Test func watchingFewerKeysWithdrawsTheRestInOrderAndCompletesTheSet() {
        var machine = Machine(keys: [internet, db], version: "1")
        _ = machine.record(.of(down, at: moment), for: db)
        let action = machine.watch(keys: [db], defaultNamespace: "lab", readyWhen: .satisfied)
        #expect(action.events.isEmpty) // the internet was never read: nothing to withdraw
        #expect(machine.hasReadAll)
        let withdrawn = machine.watch(keys: [], defaultNamespace: "", readyWhen: .started)
        #expect(withdrawn.events == [.withdrawn(db, .web), .forget(topic: db.topic)])
    }

    @Test func aNamespaceWithdrawnTakesItsPathsThenSaysItIsNoLongerWatched() {
        var machine = Machine(keys: [internet, db], version: "1")
        _ = machine.record(.of(down, at: moment), for: internet)
        _ = machine.record(.of(down, at: moment), for: db)
        let action = machine.unwatch(namespace: "lab")
        #expect(
            action.events == [
                .withdrawn(internet, .web), .forget(topic: internet.topic), .withdrawn(db, .web),
                .forget(topic: db.topic), .namespace("lab", available: false, watched: false),
                .forget(topic: "namespace/lab"), .forget(topic: "connectivity/lab"),
            ])
        let text = machine.exposition(eventClients: 0, droppedClients: 0).text()
        #expect(!text.contains(#"namespace="lab""#), "\(text)")
    }

    @Test func aMonitorThatCannotObserveMakesItsNamespaceUnavailable() {
        var machine = Machine(keys: [internet, db], version: "1")
        _ = machine.record(.of(down, at: moment, links: [PathUpdate.link(eth0)]), for: internet)
        let action = machine.record(.of(.unsatisfied(.monitorUnavailable), at: moment), for: db)
        #expect(action.events.last == .namespace("lab", available: false, watched: true))
        #expect(machine.namespaces["lab"]?.isAvailable == false)
        #expect(machine.namespaces["lab"]?.interfaces == [:])
    }

    @Test func probeResultsAreCountedOnceAndOnlyALevelChangeIsAnEvent() {
        var machine = Machine(keys: [], version: "1", judgesConnectivity: true, judgedFamilies: [.ipv4])
        let passed = ProbeResult(
            probe: ConnectivityProbe(URL(string: "http://192.0.2.10/generate_204")!), family: .ipv4, status: 204,
            latency: .milliseconds(12), verdict: .passed)
        let full = Connectivity(
            ipv4: .init(level: .full, evidence: [passed]), ipv6: .init(level: .none), path: down)
        let first = machine.record(full, namespace: "")
        #expect(first.events == [.connectivity("", full)])
        #expect(first.probeResults == [passed])
        // The same round again (a path change re-judged it): nothing new.
        let again = machine.record(full, namespace: "")
        #expect(again.events.isEmpty && again.probeResults.isEmpty)
        let text = machine.exposition(eventClients: 2, droppedClients: 1).text()
        #expect(text.contains(#"netreach_connectivity_level{namespace="",family="ipv4",level="full"} 1.0"#))
        #expect(text.contains("netreach_event_clients 2.0"))
        #expect(text.contains("netreach_event_clients_dropped_total 1"))
    }

    @Test func theExpositionWritesEachFamilyOnceInTheTablesOrder() {
        var machine = Machine(keys: [internet, db], version: "2.0")
        _ = machine.record(.of(down, at: moment, links: [PathUpdate.link(eth0)]), for: internet)
        _ = machine.record(.of(down, at: moment), for: db)
        machine.recordReload(succeeded: false, at: moment)
        let text = machine.exposition(eventClients: 0, droppedClients: 0).text()
        let types = text.split(separator: "\n").filter { $0.hasPrefix("# TYPE ") }.map {
            String($0.split(separator: " ")[2])
        }
        #expect(Set(types).count == types.count)
        let order = MetricFamilies.all.map(\.name)
        #expect(types == order.filter(types.contains))
        #expect(text.hasPrefix("# HELP netreach_build_info "))
        #expect(text.contains("netreach_config_last_reload_successful 0.0\n"))
        // Both paths' series, in key order.
        let satisfied = text.split(separator: "\n").filter { $0.hasPrefix("netreach_path_satisfied{") }
        #expect(
            satisfied == [
                #"netreach_path_satisfied{namespace="lab",destination=""} 0.0"#,
                #"netreach_path_satisfied{namespace="lab",destination="db"} 0.0"#,
            ])
    }
}
