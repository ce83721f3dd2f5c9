import NetReach
import NetReachConnectivity
import NetReachSystem
import Prometheus

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What `serve` knows now: the latest update of every watched destination in every namespace
/// (its path, the kernel's routes and the namespace's interfaces it was judged from), whether
/// each namespace can be observed, the latest verdicts. Every change that is news goes to the
/// event stream, in order; `/metrics` is written from it when scraped (``exposition(process:)``).
///
/// The decisions are a value, ``StateMachine``; this object holds it under one lock and performs
/// the actions it returns: events are published under the lock (events of one path leave in the
/// order its updates were recorded, and none after its withdrawal), waiters are resumed and probe
/// results counted after it. Updates come from the thread that computed them (a monitor's
/// observer, the netlink engine's: no hop between the kernel's message and the event stream);
/// the rest from ``NetworkWatch`` (a reload, the namespace directory's thread) and the HTTP
/// handlers, on any thread.
///
/// ```swift
/// let state = ServeState(keys: [PathKey(namespace: "", destination: "")], version: "0.23.0", hub: hub)
/// state.record(PathUpdate(path: path), for: key)
/// state.path(for: key)?.status   // .satisfied
/// ```
package final class ServeState: Sendable {
    /// One watched path and its history.
    package struct Watched: Sendable, Hashable {
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

    /// Every path the server watches now, in a stable order.
    package var keys: [PathKey] { state.withLock { $0.keys } }
    /// The namespace the endpoints answer for when none is named: the first one watched
    /// (`--namespace`'s first, or the server's own).
    package var defaultNamespace: String { state.withLock { $0.defaultNamespace } }
    /// When `/readyz` says ready.
    package var readyWhen: Health.ReadyCondition { state.withLock { $0.readyWhen } }
    /// The registry of the series that accumulate (the library's through swift-metrics, the probe
    /// histogram and results); `/metrics` writes it after serve's own families.
    package let registry: PrometheusCollectorRegistry
    /// Where events go.
    package let hub: EventHub
    /// Whether the server judges the internet (sends probes): `/api/v1/connectivity` and
    /// `connectivity` events.
    package let judgesConnectivity: Bool
    /// The families the connectivity monitor judges.
    package let judgedFamilies: Set<IPAddress.Family>
    private let state: Locked<StateMachine>

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
        state = Locked(
            StateMachine(
                keys: keys, version: version, readyWhen: readyWhen, judgesConnectivity: judgesConnectivity,
                judgedFamilies: judgedFamilies))
    }

    /// Runs `input` on the machine under the lock, publishes its events there, then resumes its
    /// waiters and counts its probe results.
    @discardableResult
    private func perform(_ input: (inout StateMachine) -> StateMachine.Action) -> StateMachine.Action {
        let action = state.withLock { machine in
            let action = input(&machine)
            for event in action.events { publish(event) }
            return action
        }
        action.resume.forEach { $0.resume() }
        if !action.probeResults.isEmpty { count(action.probeResults) }
        return action
    }

    private func publish(_ event: StateMachine.Event) {
        switch event {
        case .path(let key, let path, let traffic, let date):
            hub.publish(.path, topic: key.topic, data: pathEvent(path, key: key, traffic: traffic, at: date))
        case .withdrawn(let key, let traffic):
            hub.publish(.path, topic: key.topic, data: pathEvent(nil, key: key, traffic: traffic))
        case .namespace(let namespace, let available, let watched):
            var data = JSONBuffer(capacity: 128)
            data.append("{\"available\":")
            data.append(available)
            data.append(",\"namespace\":")
            data.appendString(namespace)
            data.append(",\"watched\":")
            data.append(watched)
            data.append("}")
            hub.publish(.namespace, topic: "namespace/\(namespace)", data: data.text)
        case .connectivity(let namespace, let verdict):
            var data = JSONBuffer(capacity: 1024)
            data.append("{\"connectivity\":")
            ConnectivityJSON.write(verdict, at: Date(), into: &data)
            data.append(",\"namespace\":")
            data.appendString(namespace)
            data.append("}")
            hub.publish(.connectivity, topic: "connectivity/\(namespace)", data: data.text)
        case .forget(let topic):
            hub.forget(topic: topic)
        }
    }

    /// Each probe result in `netreach_probe_duration_seconds` and `netreach_probe_results_total`.
    private func count(_ results: [ProbeResult]) {
        let durations = registry.makeDurationHistogram(
            descriptor: ServeMetricsFactory.descriptor("netreach_probe_duration_seconds"),
            buckets: ServeMetricsFactory.durationBuckets)
        for result in results {
            durations.record(result.latency)
            registry.makeCounter(
                descriptor: ServeMetricsFactory.descriptor("netreach_probe_results_total"),
                labels: [("verdict", ConnectivitySamples.name(result.verdict))]
            ).increment()
        }
    }

    /// From now on the server watches `keys` (in the order watched: the first's namespace is the
    /// default one), ready when `readyWhen` holds. The paths no longer watched are withdrawn: a
    /// `path` event with a `null` path says so, and their series are no longer written.
    package func watch(keys: [PathKey], defaultNamespace: String, readyWhen: Health.ReadyCondition) {
        perform { $0.watch(keys: keys, defaultNamespace: defaultNamespace, readyWhen: readyWhen) }
    }

    /// Withdraws the path of `key`: no series, no current state for new event clients, and a
    /// `path` event whose path is `null`. It stays among ``keys`` if it is still watched (a
    /// destination renamed to another host starts afresh).
    package func unwatch(_ key: PathKey) { perform { $0.unwatch(key) } }

    /// Withdraws the namespace labelled `namespace` and every path in it: a namespace that left
    /// `/run/netns`, or that a reload no longer names. A `namespace` event says
    /// `"watched":false`.
    package func unwatch(namespace: String) { perform { $0.unwatch(namespace: namespace) } }

    /// Records a reload's outcome (`netreach_config_last_reload_successful`, and the time of the
    /// last one that succeeded, as Prometheus exports its own).
    package func recordReload(succeeded: Bool, at date: Date) {
        state.withLock { $0.recordReload(succeeded: succeeded, at: date) }
    }

    /// Makes the caller the one recorder of `key`'s paths, the paths of `traffic`: from now on
    /// only ``record(_:for:recorder:)`` calls with the returned token (or none) count, until
    /// ``unwatch(_:)``. A monitor replaced or stopped keeps its old token, so an update it computed
    /// just before it stopped can no longer reach the stream after the path was withdrawn.
    package func beginRecording(_ key: PathKey, traffic: PathTraffic = .web) -> UInt64 {
        state.withLock { $0.beginRecording(key, traffic: traffic) }
    }

    /// Records a monitor's `update` for `key`; returns whether it was taken (`recorder`, the
    /// token of ``beginRecording(_:traffic:)``, is the current one, or `nil`). From any thread,
    /// one at a time per key (a monitor's observer): the path's event, when it is the first or a
    /// change, leaves here; the routes and interfaces it carries are what the next scrape writes.
    @discardableResult
    package func record(_ update: PathUpdate, for key: PathKey, recorder: UInt64? = nil) -> Bool {
        perform { $0.record(update, for: key, recorder: recorder) }.isRecorded
    }

    /// Records why `namespace` cannot be entered (a denied permission: a configuration that will
    /// not mend itself), for `/readyz`; until the namespace is no longer watched.
    package func recordProblem(_ problem: String, namespace: String) {
        state.withLock { $0.recordProblem(problem, namespace: namespace) }
    }

    /// Why each namespace that cannot be entered cannot, by label.
    package var namespaceProblems: [String: String] { state.withLock { $0.namespaceProblems } }

    /// Records a connectivity verdict of `namespace`: `netreach_connectivity_level` from now on,
    /// each new probe result (`netreach_probe_duration_seconds`, `netreach_probe_results_total`),
    /// and an event when a level changed.
    package func record(_ verdict: Connectivity, namespace: String) {
        perform { $0.record(verdict, namespace: namespace) }
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

    /// `/metrics`: serve's families written from the state as it stands (the event stream's
    /// clients read now), the registry's, then `process`.
    package func exposition(process: String = "") -> String {
        // A copy under the lock (its dictionaries are shared, not copied); written outside it.
        let machine = state.withLock { $0 }
        return machine.exposition(eventClients: hub.clientCount, droppedClients: hub.droppedCount)
            .text(registry: registry, process: process)
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

}
