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

    private func makeState(_ keys: [PathKey]) -> (ServeState, EventHub) {
        let hub = EventHub(replayCapacity: 32, clientBuffer: 32)
        return (ServeState(keys: keys, version: "1", hub: hub), hub)
    }

    /// What a scrape reads now.
    private func series(_ state: ServeState) -> [String] { state.seriesLines }

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
        let (state, hub) = makeState([db])
        let first = state.beginRecording(db)
        #expect(state.record(.of(down, at: moment), for: db, recorder: first))
        // A reload points db elsewhere: withdrawn, and a new monitor records it.
        state.unwatch(db)
        #expect(!state.record(.of(.unsatisfied(.noInterface), at: moment), for: db, recorder: first))
        #expect(state.path(for: db) == nil)
        #expect(!state.hasReadAll)
        // The new monitor asks about other traffic: its events say which.
        let second = state.beginRecording(db, traffic: PathTraffic(transportProtocol: .udp, port: 53))
        #expect(!state.record(.of(.unsatisfied(.noInterface), at: moment), for: db, recorder: first))
        #expect(state.record(.of(down, at: moment), for: db, recorder: second))
        // The same path again is taken (its routes and links may be news) but sends no event.
        #expect(state.record(.of(down, at: moment), for: db, recorder: second))
        #expect(state.hasReadAll)
        #expect(series(state).contains(#"netreach_path_changes_total{namespace="lab1",destination="db"} 0"#))
        #expect(
            series(state).contains(
                #"netreach_path_traffic_info{namespace="lab1",destination="db",protocol="udp",port="53"} 1.0"#))
        let all = await events(hub, after: 0)
        #expect(
            all == [
                #"{"destination":"db","namespace":"lab1","path":\#(downJSON),"port":443,"protocol":"tcp"}"#,
                #"{"destination":"db","namespace":"lab1","path":null,"port":443,"protocol":"tcp"}"#,
                #"{"destination":"db","namespace":"lab1","path":\#(downJSON),"port":53,"protocol":"udp"}"#,
            ])
    }

    /// A scrape reads the latest path and counts every change recorded, and a path's first
    /// update is when it counts as read.
    @Test func aScrapeCountsEveryChangeRecorded() {
        let (state, _) = makeState([db])
        let recorder = state.beginRecording(db)
        #expect(!state.hasReadAll)
        state.record(.of(down, at: moment), for: db, recorder: recorder)
        #expect(state.hasReadAll)
        state.record(.of(.unsatisfied(.noInterface), at: moment), for: db, recorder: recorder)
        state.record(.of(down, at: moment), for: db, recorder: recorder)
        let lines = series(state)
        #expect(lines.contains(#"netreach_path_changes_total{namespace="lab1",destination="db"} 2"#), "\(lines)")
        #expect(
            lines.contains(
                #"netreach_path_unsatisfied_reason{namespace="lab1",destination="db",reason="noDefaultRoute"} 1.0"#))
    }

    @Test func pathsNoLongerWatchedAreWithdrawnFromMetricsAndEvents() async {
        let (state, hub) = makeState([internet, db])
        state.record(.of(down, at: moment), for: internet)
        state.record(.of(down, at: moment), for: db)
        #expect(series(state).contains(#"netreach_path_satisfied{namespace="lab1",destination="db"} 0.0"#))

        state.watch(keys: [internet], defaultNamespace: "lab1", readyWhen: .satisfied)
        #expect(state.keys == [internet])
        #expect(state.readyWhen == .satisfied)
        #expect(state.path(for: db) == nil)
        #expect(!series(state).contains { $0.contains(#"destination="db""#) }, "\(series(state))")
        #expect(series(state).contains(#"netreach_path_satisfied{namespace="lab1",destination=""} 0.0"#))
        // A client that was there hears that db is no longer watched; a new one never hears of db.
        // (The internet's first update also said the namespace is observable: not a path event.)
        let all = await events(hub, after: 0).filter { $0.hasPrefix(#"{"destination""#) }
        #expect(all.count == 3)
        #expect(all.last == #"{"destination":"db","namespace":"lab1","path":null,"port":443,"protocol":"tcp"}"#)
        let current = await events(hub, after: nil).filter { $0.hasPrefix(#"{"destination""#) }
        #expect(
            current == [
                #"{"destination":"","namespace":"lab1","path":\#(downJSON),"port":443,"protocol":"tcp"}"#
            ])
    }

    @Test func aNamespaceNoLongerWatchedTakesItsInterfacesPathsAndAvailabilityAlong() async {
        let (state, hub) = makeState([internet, db])
        state.record(.of(down, at: moment, links: [SystemSnapshot.Link(index: 2, name: "veth0")]), for: internet)
        #expect(series(state).contains { $0.hasPrefix("netreach_interface_up{namespace=\"lab1\"") })

        state.watch(keys: [], defaultNamespace: "", readyWhen: .started)
        state.unwatch(namespace: "lab1")
        #expect(!series(state).contains { $0.contains(#"namespace="lab1""#) }, "\(series(state))")
        #expect(state.namespaces["lab1"] == nil)
        let all = await events(hub, after: 0)
        #expect(all.last == #"{"available":false,"namespace":"lab1","watched":false}"#, "\(all)")
        #expect(await events(hub, after: nil).isEmpty)
    }

    @Test func aDestinationGivenAnotherHostStartsAfresh() {
        let (state, _) = makeState([internet, db])
        state.record(.of(down, at: moment), for: db)
        state.record(.of(.unsatisfied(.noInterface), at: moment), for: db)
        #expect(series(state).contains(#"netreach_path_changes_total{namespace="lab1",destination="db"} 1"#))
        state.unwatch(db)
        #expect(state.keys.contains(db)) // still watched, under its new host
        #expect(!state.hasReadAll)
        state.record(.of(down, at: moment), for: db)
        #expect(series(state).contains(#"netreach_path_changes_total{namespace="lab1",destination="db"} 0"#))
    }

    @Test func aReloadThatFailsKeepsWhatIsWatchedAndSaysZeroUntilOneSucceeds() async throws {
        let (state, _) = makeState([PathKey(namespace: "", destination: "")])
        state.recordReload(succeeded: true, at: Date(timeIntervalSince1970: 1_000))
        let watch = NetworkWatch(targets: ServeTargets(), state: state)
        let answers = Answers()
        let reloader = ServeReloader(load: { try answers.next() }, watch: watch, state: state)

        answers.set(.failure(Refused()))
        let failed = await reloader.reload()
        #expect(failed.failureDescription == "the file is missing")
        var lines = series(state)
        #expect(lines.contains("netreach_config_last_reload_successful 0.0"))
        #expect(lines.contains("netreach_config_last_reload_success_timestamp_seconds 1000.0"))
        #expect(state.keys == [PathKey(namespace: "", destination: "")])

        var targets = ServeTargets()
        targets.destinations = [NamedDestination(name: "loop", destination: "127.0.0.1")]
        answers.set(.success(targets))
        let succeeded = await reloader.reload()
        #expect(succeeded.failureDescription == nil)
        lines = series(state)
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
