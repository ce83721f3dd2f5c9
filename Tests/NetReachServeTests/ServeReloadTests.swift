import Foundation
import NetReach
import NetReachServe
import Prometheus
import Synchronization
import Testing

/// What a reload (or a namespace leaving `/run/netns`) does to what `serve` says: the paths no
/// longer watched are withdrawn from the metrics and the event stream, and a reload that fails
/// changes nothing but `netreach_config_last_reload_successful`.
@Suite("serve reload")
struct ServeReloadTests {
    private let internet = PathKey(namespace: "lab1", destination: "")
    private let db = PathKey(namespace: "lab1", destination: "db")
    private let down = NetworkPath.unsatisfied(.noDefaultRoute)
    private let moment = Date(timeIntervalSince1970: 1_795_376_401.123)
    /// `down`'s object in an event, as NetReach's JSON writes it at `moment`.
    private var downJSON: String { PathJSON.line(down, at: moment) }

    private func makeState(_ keys: [PathKey]) -> (ServeState, PrometheusCollectorRegistry, EventHub) {
        let registry = PrometheusCollectorRegistry()
        let hub = EventHub(replayCapacity: 32, clientBuffer: 32)
        let state = ServeState(
            keys: keys, version: "1", hub: hub, registry: registry)
        return (state, registry, hub)
    }

    private func series(_ registry: PrometheusCollectorRegistry) -> [String] {
        registry.emitToString().split(separator: "\n").map(String.init).filter { !$0.hasPrefix("#") }
    }

    /// The `data:` lines of the events a client resuming after id 0 is sent, or a new client.
    private func events(_ hub: EventHub, after id: UInt64?) async -> [String] {
        let subscription = hub.subscribe(lastEventID: id, onDrop: {})
        defer { subscription.cancel() }
        hub.shutDown()
        var data: [String] = []
        for await chunk in subscription.chunks {
            data += chunk.split(separator: "\n").filter { $0.hasPrefix("data: ") }.map { String($0.dropFirst(6)) }
        }
        return data.filter { $0 != "{}" } // the shutdown event
    }

    /// A path's event leaves from the engine's thread, so a monitor stopped by a reload may still
    /// hand one over after its path was withdrawn: it must not bring the path back.
    @Test func aPathFromAStoppedMonitorCannotFollowItsWithdrawal() async {
        let (state, registry, hub) = makeState([db])
        let first = state.beginRecording(db)
        #expect(state.recordPath(down, for: db, at: moment, recorder: first))
        state.recordSeries(for: db, routes: [])
        // A reload points db elsewhere: withdrawn, and a new monitor records it.
        state.unwatch(db)
        #expect(!state.recordPath(.unsatisfied(.noInterface), for: db, at: moment, recorder: first))
        #expect(state.path(for: db) == nil)
        #expect(!state.hasReadAll)
        // The new monitor asks about other traffic: its events say which.
        let second = state.beginRecording(db, traffic: PathTraffic(transportProtocol: .udp, port: 53))
        #expect(!state.recordPath(.unsatisfied(.noInterface), for: db, at: moment, recorder: first))
        #expect(state.recordPath(down, for: db, at: moment, recorder: second))
        // The same path again is no change: no event.
        #expect(!state.recordPath(down, for: db, at: moment, recorder: second))
        state.recordSeries(for: db, routes: [])
        #expect(state.hasReadAll)
        #expect(series(registry).contains(#"netreach_path_changes_total{namespace="lab1",destination="db"} 0"#))
        #expect(
            series(registry).contains(
                #"netreach_path_traffic_info{namespace="lab1",destination="db",protocol="udp",port="53"} 1.0"#))
        let all = await events(hub, after: 0)
        #expect(
            all == [
                #"{"destination":"db","namespace":"lab1","path":\#(downJSON),"port":443,"protocol":"tcp"}"#,
                #"{"destination":"db","namespace":"lab1","path":null,"port":443,"protocol":"tcp"}"#,
                #"{"destination":"db","namespace":"lab1","path":\#(downJSON),"port":53,"protocol":"udp"}"#,
            ])
    }

    /// The series follow the latest path, counting every change recorded since they last did,
    /// and a path's series first exported is when it counts as read.
    @Test func theSeriesCountEveryChangeRecordedSinceTheyLastFollowed() {
        let (state, registry, _) = makeState([db])
        let recorder = state.beginRecording(db)
        state.recordPath(down, for: db, at: moment, recorder: recorder)
        #expect(!state.hasReadAll)
        state.recordSeries(for: db, routes: [])
        #expect(state.hasReadAll)
        state.recordPath(.unsatisfied(.noInterface), for: db, at: moment, recorder: recorder)
        state.recordPath(down, for: db, at: moment, recorder: recorder)
        state.recordSeries(for: db, routes: [])
        let lines = series(registry)
        #expect(lines.contains(#"netreach_path_changes_total{namespace="lab1",destination="db"} 2"#), "\(lines)")
        #expect(
            lines.contains(
                #"netreach_path_unsatisfied_reason{namespace="lab1",destination="db",reason="noDefaultRoute"} 1.0"#))
    }

    @Test func pathsNoLongerWatchedAreWithdrawnFromMetricsAndEvents() async {
        let (state, registry, hub) = makeState([internet, db])
        state.record(down, routes: [], for: internet, at: moment)
        state.record(down, routes: [], for: db, at: moment)
        #expect(series(registry).contains(#"netreach_path_satisfied{namespace="lab1",destination="db"} 0.0"#))

        state.watch(keys: [internet], defaultNamespace: "lab1", readyWhen: .satisfied)
        #expect(state.keys == [internet])
        #expect(state.readyWhen == .satisfied)
        #expect(state.path(for: db) == nil)
        #expect(!series(registry).contains { $0.contains(#"destination="db""#) }, "\(series(registry))")
        #expect(series(registry).contains(#"netreach_path_satisfied{namespace="lab1",destination=""} 0.0"#))
        // A client that was there hears that db is no longer watched; a new one never hears of db.
        let all = await events(hub, after: 0)
        #expect(all.count == 3)
        #expect(all.last == #"{"destination":"db","namespace":"lab1","path":null,"port":443,"protocol":"tcp"}"#)
        let current = await events(hub, after: nil)
        #expect(
            current == [
                #"{"destination":"","namespace":"lab1","path":\#(downJSON),"port":443,"protocol":"tcp"}"#
            ])
    }

    @Test func aNamespaceNoLongerWatchedTakesItsInterfacesPathsAndAvailabilityAlong() async {
        let (state, registry, hub) = makeState([internet, db])
        state.record(down, routes: [], for: internet, at: moment)
        state.record(
            interfaces: ["veth0": .init(type: .wiredEthernet, isUp: true)], available: true, namespace: "lab1")
        #expect(series(registry).contains { $0.hasPrefix("netreach_interface_up{namespace=\"lab1\"") })

        state.watch(keys: [], defaultNamespace: "", readyWhen: .started)
        state.unwatch(namespace: "lab1")
        #expect(!series(registry).contains { $0.contains(#"namespace="lab1""#) }, "\(series(registry))")
        #expect(state.namespaces["lab1"] == nil)
        let all = await events(hub, after: 0)
        #expect(all.last == #"{"available":false,"namespace":"lab1","watched":false}"#, "\(all)")
        #expect(await events(hub, after: nil).isEmpty)
    }

    @Test func aDestinationGivenAnotherHostStartsAfresh() {
        let (state, registry, _) = makeState([internet, db])
        state.record(down, routes: [], for: db, at: moment)
        state.record(.unsatisfied(.noInterface), routes: [], for: db, at: moment)
        #expect(series(registry).contains(#"netreach_path_changes_total{namespace="lab1",destination="db"} 1"#))
        state.unwatch(db)
        #expect(state.keys.contains(db)) // still watched, under its new host
        #expect(!state.hasReadAll)
        state.record(down, routes: [], for: db, at: moment)
        #expect(series(registry).contains(#"netreach_path_changes_total{namespace="lab1",destination="db"} 0"#))
    }

    @Test func aReloadThatFailsKeepsWhatIsWatchedAndSaysZeroUntilOneSucceeds() async throws {
        let (state, registry, _) = makeState([PathKey(namespace: "", destination: "")])
        state.recordReload(succeeded: true, at: Date(timeIntervalSince1970: 1_000))
        let watch = NetworkWatch(targets: ServeTargets(), state: state)
        let answers = Answers()
        let reloader = ServeReloader(load: { try answers.next() }, watch: watch, state: state)

        answers.set(.failure(Refused()))
        let failed = await reloader.reload()
        #expect(failed.failureDescription == "the file is missing")
        var lines = series(registry)
        #expect(lines.contains("netreach_config_last_reload_successful 0.0"))
        #expect(lines.contains("netreach_config_last_reload_success_timestamp_seconds 1000.0"))
        #expect(state.keys == [PathKey(namespace: "", destination: "")])

        var targets = ServeTargets()
        targets.destinations = [NamedDestination(name: "loop", destination: "127.0.0.1")]
        answers.set(.success(targets))
        let succeeded = await reloader.reload()
        #expect(succeeded.failureDescription == nil)
        lines = series(registry)
        #expect(lines.contains("netreach_config_last_reload_successful 1.0"))
        #expect(!lines.contains("netreach_config_last_reload_success_timestamp_seconds 1000.0"))
        // Applied, and read: reload() returns once the new paths are.
        #expect(state.keys.map(\.destination) == ["", "loop"])
        #expect(state.path(for: PathKey(namespace: "", destination: "loop"))?.status == .satisfied)
        await watch.cancel()
    }

    @Test func onlyEntriesWithANamespaceMountedCountAsIpNetnsNamespaces() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("netns-\(UUID())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // What `ip netns add` leaves before its bind mount, or `ip netns delete` after the unmount.
        _ = FileManager.default.createFile(atPath: directory + "/half-made", contents: nil)
        try FileManager.default.createDirectory(atPath: directory + "/sub", withIntermediateDirectories: false)
        #expect(NamespaceDirectory.names(in: directory).isEmpty)
        #expect(NamespaceDirectory.names(in: directory + "/missing").isEmpty)
    }
}

private struct Refused: Error, CustomStringConvertible {
    var description: String { "the file is missing" }
}

/// What the test's loader returns next.
private final class Answers: Sendable {
    private let answer = Mutex<Result<ServeTargets, Refused>>(.success(ServeTargets()))
    func set(_ result: Result<ServeTargets, Refused>) { answer.withLock { $0 = result } }
    func next() throws -> ServeTargets { try answer.withLock { $0 }.get() }
}

extension Result where Failure == ServeReloader.Failure {
    fileprivate var failureDescription: String? {
        if case .failure(let failure) = self { return failure.description }
        return nil
    }
}
