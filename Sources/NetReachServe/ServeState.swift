import Foundation
import NetReach
import NetReachConnectivity
import NetReachSystem
import Prometheus

/// What `serve` knows now: the latest path of every watched destination in every namespace, the
/// namespaces' interfaces, and whether each namespace can be observed. Every update goes, in
/// order, to the metric series and to the event stream.
///
/// Updates come from one serial queue (``NetworkWatch``'s), except a path's own: its event leaves
/// from the thread that computed it (``recordPath(_:for:at:recorder:)``, the netlink engine's), and
/// its series follow from the queue (``recordSeries(for:routes:)``). Readers (the HTTP handlers)
/// may be on any thread.
///
/// ```swift
/// let state = ServeState(keys: [PathKey(namespace: "", destination: "")], version: "0.23.0", hub: hub)
/// state.record(path, routes: [], for: key, at: Date())
/// state.path(for: key)?.status   // .satisfied
/// ```
package final class ServeState: Sendable {
    /// One watched path and its history.
    package struct Watched: Sendable {
        package var path: NetworkPath
        package var changes: Int
        /// Seconds since the Unix epoch.
        package var lastChange: Double

        package init(path: NetworkPath, changes: Int, lastChange: Double) {
            self.path = path
            self.changes = changes
            self.lastChange = lastChange
        }
    }

    /// One namespace as observed.
    package struct Namespace: Sendable, Hashable {
        package var isAvailable: Bool
        /// Interface name → (type, operational).
        package var interfaces: [String: Interface]
    }

    /// One interface of a namespace.
    package struct Interface: Sendable, Hashable {
        package var type: InterfaceType
        package var isUp: Bool

        package init(type: InterfaceType, isUp: Bool) {
            self.type = type
            self.isUp = isUp
        }
    }

    private struct State {
        var series: MetricSeries
        var keys: [PathKey]
        var defaultNamespace: String
        var readyWhen: Health.ReadyCondition
        var paths: [PathKey: Watched] = [:]
        var namespaces: [String: Namespace] = [:]
        /// Why a namespace cannot be entered, by label (``recordProblem(_:namespace:)``).
        var namespaceProblems: [String: String] = [:]
        var droppedReported = 0
        /// Seconds since the Unix epoch: the start, then each reload that succeeded.
        var lastReloadSuccess = Date().timeIntervalSince1970
        /// The latest verdict per namespace, and the last one an event was sent for.
        var verdicts: [String: Connectivity] = [:]
        var announcedLevels: [String: [ConnectivityLevel]] = [:]
        /// The evidence already counted, per namespace and family (a verdict repeats a round's
        /// evidence when only the path changed).
        var countedEvidence: [String: [IPAddress.Family: [ProbeResult]]] = [:]
        /// Tasks waiting until every watched path has been read (``untilReadAll()``).
        var readWaiters = ConditionWaiters()
        /// Who may record each path (``beginRecording(_:traffic:)``): a monitor stopped since cannot.
        var recorders: [PathKey: UInt64] = [:]
        /// The traffic each path is the path of, as its recorder said.
        var traffic: [PathKey: PathTraffic] = [:]
        var nextRecorder: UInt64 = 0
        /// The paths whose series are recorded, and how many of each one's changes the
        /// `netreach_path_changes_total` counter has counted.
        var seriesRecorded: [PathKey: Int] = [:]

        /// Read means exported: the path and its series.
        var hasReadAll: Bool { keys.allSatisfy { seriesRecorded[$0] != nil } }

        /// The read waiters to resume, if every watched path has been read now.
        mutating func readWaitersToResume() -> [CheckedContinuation<Void, Never>] {
            hasReadAll ? readWaiters.takeAll() : []
        }
    }

    /// Every path the server watches now, in a stable order.
    package var keys: [PathKey] { state.withLock { $0.keys } }
    /// The namespace the endpoints answer for when none is named: the first one watched
    /// (`--namespace`'s first, or the server's own).
    package var defaultNamespace: String { state.withLock { $0.defaultNamespace } }
    /// When `/readyz` says ready.
    package var readyWhen: Health.ReadyCondition { state.withLock { $0.readyWhen } }
    /// The registry `/metrics` renders.
    package let registry: PrometheusCollectorRegistry
    /// Where events go.
    package let hub: EventHub
    /// Whether the server judges the internet (sends probes): `/api/v1/connectivity` and
    /// `connectivity` events.
    package let judgesConnectivity: Bool
    /// The families the connectivity monitor judges.
    package let judgedFamilies: Set<IPAddress.Family>
    private let state: Locked<State>

    package init(
        keys: [PathKey], version: String, hub: EventHub,
        registry: PrometheusCollectorRegistry = PrometheusCollectorRegistry(),
        readyWhen: Health.ReadyCondition = .started,
        judgesConnectivity: Bool = false,
        judgedFamilies: Set<IPAddress.Family> = [.ipv4, .ipv6]
    ) {
        self.registry = registry
        self.hub = hub
        self.judgesConnectivity = judgesConnectivity
        self.judgedFamilies = judgedFamilies
        var series = MetricSeries(registry: registry)
        series.replace(
            group: "build", with: [.init(name: "netreach_build_info", labels: [("version", version)], value: 1)])
        state = Locked(
            State(
                series: series, keys: keys.sorted(), defaultNamespace: keys.first?.namespace ?? "",
                readyWhen: readyWhen))
    }

    /// From now on the server watches `keys` (in the order watched: the first's namespace is the
    /// default one), ready when `readyWhen` holds. The paths no longer watched are withdrawn:
    /// their series are unregistered and a `path` event with a `null` path says so.
    package func watch(keys: [PathKey], defaultNamespace: String, readyWhen: Health.ReadyCondition) {
        let (removed, readers) = state.withLock { state in
            let kept = Set(keys)
            state.keys = keys.sorted()
            state.defaultNamespace = defaultNamespace
            state.readyWhen = readyWhen
            return (state.paths.keys.filter { !kept.contains($0) }.sorted(), state.readWaitersToResume())
        }
        readers.forEach { $0.resume() }
        removed.forEach(unwatch)
    }

    /// Withdraws the path of `key`: no series, no current state for new event clients, and a
    /// `path` event whose path is `null`. It stays among ``keys`` if it is still watched (a
    /// destination renamed to another host starts afresh).
    package func unwatch(_ key: PathKey) {
        state.withLock { state in
            let event = pathEvent(nil, key: key, traffic: state.traffic[key] ?? .web)
            state.series.remove(group: key.topic)
            state.recorders[key] = nil
            state.traffic[key] = nil
            state.seriesRecorded[key] = nil
            guard state.paths.removeValue(forKey: key) != nil else { return }
            // Under the lock, as a path's own event is: no late path of a stopped monitor can
            // follow this one.
            hub.publish(.path, topic: key.topic, data: event)
            hub.forget(topic: key.topic)
        }
    }

    /// Withdraws the namespace labelled `namespace` and every path in it: a namespace that left
    /// `/run/netns`, or that a reload no longer names. A `namespace` event says
    /// `"watched":false`.
    package func unwatch(namespace: String) {
        let (paths, known) = state.withLock { state in
            for group in ["interfaces/\(namespace)", "namespace/\(namespace)", "connectivity/\(namespace)"] {
                state.series.remove(group: group)
            }
            state.verdicts[namespace] = nil
            state.namespaceProblems[namespace] = nil
            state.announcedLevels[namespace] = nil
            state.countedEvidence[namespace] = nil
            let known = state.namespaces.removeValue(forKey: namespace) != nil
            return (state.paths.keys.filter { $0.namespace == namespace }, known)
        }
        paths.forEach(unwatch)
        guard known else { return }
        hub.publish(
            .namespace, topic: "namespace/\(namespace)",
            data: #"{"available":false,"namespace":\#(Self.jsonString(namespace)),"watched":false}"#)
        hub.forget(topic: "namespace/\(namespace)")
        hub.forget(topic: "connectivity/\(namespace)")
    }

    /// Records a reload's outcome (`netreach_config_last_reload_successful`, and the time of the
    /// last one that succeeded, as Prometheus exports its own).
    package func recordReload(succeeded: Bool, at date: Date) {
        state.withLock { state in
            var samples = [
                MetricSeries.Sample(
                    name: "netreach_config_last_reload_successful", labels: [], value: succeeded ? 1 : 0)
            ]
            let last = succeeded ? date.timeIntervalSince1970 : state.lastReloadSuccess
            state.lastReloadSuccess = last
            samples.append(
                .init(name: "netreach_config_last_reload_success_timestamp_seconds", labels: [], value: last))
            state.series.replace(group: "config", with: samples)
        }
    }

    /// Records `path` for `key` and its series at once: ``recordPath(_:for:at:recorder:)`` then
    /// ``recordSeries(for:routes:)``, for a caller that has both on one thread.
    package func record(_ path: NetworkPath, routes: [PathSamples.Route], for key: PathKey, at date: Date) {
        recordPath(path, for: key, at: date)
        recordSeries(for: key, routes: routes)
    }

    /// Makes the caller the one recorder of `key`'s paths, the paths of `traffic`: from now on
    /// only ``recordPath(_:for:at:recorder:)`` calls with the returned token (or none) count, until
    /// ``unwatch(_:)``. A monitor replaced or stopped keeps its old token, so a path it computed
    /// just before it stopped can no longer reach the stream after the path was withdrawn.
    package func beginRecording(_ key: PathKey, traffic: PathTraffic = .web) -> UInt64 {
        state.withLock { state in
            state.nextRecorder += 1
            state.recorders[key] = state.nextRecorder
            state.traffic[key] = traffic
            return state.nextRecorder
        }
    }

    /// Records `path` for `key` when it is the first one read or a change, and sends its event;
    /// returns whether it was. From any thread, one at a time per key (a monitor's observer): the
    /// event leaves here, before the series (``recordSeries(for:routes:)``) are updated.
    /// `recorder`: the token of ``beginRecording(_:traffic:)``; a stale one records nothing.
    @discardableResult
    package func recordPath(_ path: NetworkPath, for key: PathKey, at date: Date, recorder: UInt64? = nil) -> Bool {
        // Rendered before the lock; a monitor sends only changes, so it is seldom thrown away.
        let event = pathEvent(path, key: key, traffic: state.withLock { $0.traffic[key] } ?? .web, at: date)
        return state.withLock { state in
            if let recorder, state.recorders[key] != recorder { return false }
            let now = date.timeIntervalSince1970
            var watched = state.paths[key] ?? Watched(path: path, changes: -1, lastChange: now)
            guard state.paths[key] == nil || watched.path != path else { return false }
            watched.path = path
            watched.changes += 1
            watched.lastChange = now
            state.paths[key] = watched
            // Under the lock: events of one path leave in the order its changes were recorded,
            // and none after its withdrawal (``unwatch(_:)``).
            hub.publish(.path, topic: key.topic, data: event)
            return true
        }
    }

    /// Brings `key`'s series in line with its latest path (`routes`: the kernel's routes for
    /// `route_info`), counting its changes since the last call; on the watch's queue. Until the
    /// first call for every watched path, ``untilReadAll()`` waits.
    package func recordSeries(for key: PathKey, routes: [PathSamples.Route]) {
        let readers = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            guard let watched = state.paths[key] else { return [] }
            state.series.replace(
                group: key.topic,
                with: PathSamples.samples(
                    of: watched.path, key: key, routes: routes, lastChange: watched.lastChange,
                    traffic: state.traffic[key] ?? .web))
            // Registered at 0 with the first path; each change after it counts once.
            let counted = state.seriesRecorded[key] ?? 0
            state.series.increment(
                group: key.topic, name: "netreach_path_changes_total", labels: key.labels,
                by: Int64(max(0, watched.changes - counted)))
            state.seriesRecorded[key] = watched.changes
            return state.readWaitersToResume()
        }
        readers.forEach { $0.resume() }
    }

    /// Records the interfaces of `namespace` (`netreach_interface_up`), and that it is
    /// observable or not; a namespace that becomes (un)available is an event.
    package func record(interfaces: [String: Interface], available: Bool, namespace: String) {
        let changed: Bool = state.withLock { state in
            let old = state.namespaces[namespace]
            let new = Namespace(isAvailable: available, interfaces: interfaces)
            // Most snapshots change a route, not an interface: nothing to rebuild then.
            guard old != new else { return false }
            state.namespaces[namespace] = new
            state.series.replace(
                group: "interfaces/\(namespace)",
                // By name: the same order every time, so the series that stay are matched in place.
                with: interfaces.sorted { $0.key < $1.key }.map { name, interface in
                    .init(
                        name: "netreach_interface_up",
                        labels: [("namespace", namespace), ("interface", name), ("type", interface.type.rawValue)],
                        value: interface.isUp ? 1 : 0)
                })
            state.series.replace(
                group: "namespace/\(namespace)",
                with: [
                    .init(
                        name: "netreach_namespace_available", labels: [("namespace", namespace)],
                        value: available ? 1 : 0)
                ])
            return old?.isAvailable != available
        }
        if changed {
            hub.publish(
                .namespace, topic: "namespace/\(namespace)",
                data: #"{"available":\#(available),"namespace":\#(Self.jsonString(namespace)),"watched":true}"#)
        }
    }

    /// Records why `namespace` cannot be entered (a denied permission: a configuration that will
    /// not mend itself), for `/readyz`; until the namespace is no longer watched.
    package func recordProblem(_ problem: String, namespace: String) {
        state.withLock { $0.namespaceProblems[namespace] = problem }
    }

    /// Why each namespace that cannot be entered cannot, by label.
    package var namespaceProblems: [String: String] { state.withLock { $0.namespaceProblems } }

    /// Records a connectivity verdict of `namespace`: `netreach_connectivity_level`, each new
    /// probe result (`netreach_probe_duration_seconds`, `netreach_probe_results_total`), and an
    /// event when a level changed.
    package func record(_ verdict: Connectivity, namespace: String) {
        let announce: Bool = state.withLock { state in
            state.verdicts[namespace] = verdict
            state.series.replace(
                group: "connectivity/\(namespace)",
                with: ConnectivitySamples.samples(of: verdict, namespace: namespace, families: judgedFamilies))
            for family in IPAddress.Family.allCases {
                let evidence = verdict[family].evidence
                guard !evidence.isEmpty, state.countedEvidence[namespace]?[family] != evidence else { continue }
                state.countedEvidence[namespace, default: [:]][family] = evidence
                for result in evidence {
                    state.series.record(
                        result.latency, group: "probes", name: "netreach_probe_duration_seconds", labels: [])
                    state.series.increment(
                        group: "probes", name: "netreach_probe_results_total",
                        labels: [("verdict", ConnectivitySamples.name(result.verdict))], by: 1)
                }
            }
            guard state.announcedLevels[namespace] != verdict.levels else { return false }
            state.announcedLevels[namespace] = verdict.levels
            return true
        }
        if announce, judgesConnectivity {
            var data = JSONBuffer(capacity: 1024)
            data.append("{\"connectivity\":")
            ConnectivityJSON.write(verdict, at: Date(), into: &data)
            data.append(",\"namespace\":")
            data.appendString(namespace)
            data.append("}")
            hub.publish(.connectivity, topic: "connectivity/\(namespace)", data: data.text)
        }
    }

    /// The latest verdict of `namespace`, `nil` before the first one (or without probes).
    package func verdict(namespace: String) -> Connectivity? { state.withLock { $0.verdicts[namespace] } }

    /// The latest path of `key`, `nil` before the first one is read.
    package func path(for key: PathKey) -> NetworkPath? { state.withLock { $0.paths[key]?.path } }

    /// Every path read so far.
    package var paths: [PathKey: Watched] { state.withLock { $0.paths } }

    /// Every namespace observed so far.
    package var namespaces: [String: Namespace] { state.withLock { $0.namespaces } }

    /// Whether every watched path has been read once.
    package var hasReadAll: Bool { state.withLock { $0.hasReadAll } }

    /// Returns once every watched path has been read once (at once if they have), or when the
    /// task is cancelled.
    package func untilReadAll() async {
        await ConditionWaiters.wait(in: state, \.readWaiters) { $0.hasReadAll }
    }

    /// Updates the gauges that describe the event stream itself.
    package func recordEventClients() {
        let (clients, dropped) = (hub.clientCount, hub.droppedCount)
        state.withLock { state in
            state.series.replace(
                group: "events", with: [.init(name: "netreach_event_clients", labels: [], value: Double(clients))])
            state.series.increment(
                group: "events", name: "netreach_event_clients_dropped_total", labels: [],
                by: Int64(dropped - state.droppedReported))
            state.droppedReported = dropped
        }
    }

    /// A `path` event's data: the namespace, the destination, the path as `status --json` prints
    /// it at `date` (`null` when it is no longer watched), and the traffic it is the path of
    /// (`port`, `protocol`), so that two destinations told apart only by their traffic read apart.
    package func pathEvent(
        _ path: NetworkPath?, key: PathKey, traffic: PathTraffic = .web, at date: Date = Date()
    ) -> String {
        var text = JSONBuffer(capacity: 512)
        text.append("{\"destination\":")
        text.appendString(key.destination)
        text.append(",\"namespace\":")
        text.appendString(key.namespace)
        text.append(",\"path\":")
        if let path {
            PathJSON.write(path, at: date, into: &text)
        } else {
            text.append("null")
        }
        text.append(",\"port\":")
        text.append(Int(traffic.port))
        text.append(",\"protocol\":")
        text.appendQuoted(verbatim: traffic.transportProtocol.rawValue)
        text.append("}")
        return text.text
    }

    /// `text` as a JSON string literal, escaped as JSONEncoder escapes it.
    package static func jsonString(_ text: String) -> String { PathJSON.string(text) }
}
