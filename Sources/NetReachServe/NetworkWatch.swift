import Dispatch
import Foundation
import NetReach
import NetReachConnectivity
import NetReachSystem
import ServiceLifecycle

/// The monitors `serve` runs: one ``PathMonitor`` per destination (the internet and each
/// `--to NAME=DEST`, each asking about its own ``PathTraffic``) in each namespace. Each monitor's
/// ``PathUpdate``s are all serve learns, recorded in ``ServeState`` on the thread that computed
/// them (the netlink engine's: no hop between the kernel's message and the event stream): the
/// path, and what the next scrape writes (the kernel's routes it was judged from, and for the
/// internet's monitor the namespace's interfaces). Monitors are made from ``PathSources``: the
/// kernel's in production, a simulated network in tests.
///
/// What is watched can change while it runs: ``apply(_:)`` (a reload) and, with
/// ``ServeTargets/followsNamespaceDirectory``, `ip netns` namespaces coming and going. Monitors
/// of what stays are kept; what goes is stopped and its series and events are withdrawn.
///
/// A service of the server's `ServiceGroup`: it starts the monitors when it runs and cancels them
/// on graceful shutdown.
///
/// ```swift
/// let watch = NetworkWatch(targets: targets, state: state)   // sources: .system
/// let group = ServiceGroup(services: [watch, server], ...)
/// await watch.apply(reloadedTargets)
/// ```
package final class NetworkWatch: Service, Sendable {
    /// One destination's monitor in one namespace.
    private struct Monitored {
        /// `nil` for the internet.
        var destination: PathDestination?
        var traffic: PathTraffic
        var monitor: PathMonitor
    }

    /// One namespace being watched.
    private struct WatchedNamespace {
        var namespace: NetworkNamespaceLabel
        /// By destination name; "" is the internet.
        var monitors: [String: Monitored] = [:]
        var judge: ConnectivityMonitor?
    }

    /// Everything the watch is running, touched on ``queue`` only (hence unchecked).
    private final class Running: @unchecked Sendable {
        var targets: ServeTargets
        /// `ip netns` names seen, when following them.
        var discovered: [String] = []
        var directory: NamespaceDirectory?
        var namespaces: [String: WatchedNamespace] = [:]
        /// Why a namespace may not be entered, per label, once said (``explain(_:namespace:)``).
        var problems: [String: String] = [:]
        var isCancelled = false

        init(targets: ServeTargets) { self.targets = targets }
    }

    /// Judges the internet in the server's own namespace, when probes are configured.
    private let connectivity: ConnectivitySetup?
    private let state: ServeState
    private let namespaceDirectory: String
    /// Told the namespaces watched (label → where) whenever the set changes; on ``queue``.
    private let namespacesChanged: @Sendable ([String: NetworkNamespace?]) -> Void
    private let onWarning: @Sendable (String) -> Void
    private let queue = DispatchQueue(label: "netreach.serve.watch")
    private let running: Running
    private let sources: PathSources

    /// - Parameters:
    ///   - sources: where each namespace's monitors read the network from: the kernel, or a
    ///     simulated network in tests.
    ///   - namespaceDirectory: where `ip netns` namespaces are followed from.
    ///   - namespacesChanged: the namespaces watched, whenever they change (`/probe` may only
    ///     enter these).
    package init(
        targets: ServeTargets, connectivity: ConnectivitySetup? = nil, state: ServeState,
        sources: PathSources = .system, namespaceDirectory: String = "/run/netns",
        namespacesChanged: @escaping @Sendable ([String: NetworkNamespace?]) -> Void = { _ in },
        onWarning: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.connectivity = connectivity
        self.state = state
        self.sources = sources
        self.namespaceDirectory = namespaceDirectory
        self.namespacesChanged = namespacesChanged
        self.onWarning = onWarning
        running = Running(targets: targets)
    }

    /// Every path key `targets` names, `discovered` namespaces included, in the order watched.
    package static func keys(of targets: ServeTargets, discovered: [String] = []) -> [PathKey] {
        namespaces(of: targets, discovered: discovered).flatMap { namespace in
            [PathKey(namespace: namespace.label, destination: "")]
                + targets.destinations.map { PathKey(namespace: namespace.label, destination: $0.name) }
        }
    }

    /// The namespaces named, then those followed that are not named already.
    private static func namespaces(of targets: ServeTargets, discovered: [String]) -> [NetworkNamespaceLabel] {
        var result = targets.namespaces
        var labels = Set(result.map(\.label))
        for name in discovered where labels.insert(name).inserted {
            result.append(NetworkNamespaceLabel(label: name, namespace: .named(name)))
        }
        return result
    }

    package func run() async throws {
        // PathMonitor.start blocks until the first snapshot (and a destination's name is
        // resolved): off the concurrency pool.
        queue.async { self.reconcile() }
        // Until the group shuts down, gracefully or by cancellation.
        try? await gracefulShutdown()
        await cancel()
    }

    /// Watches `targets` from now on: what they no longer name is stopped and withdrawn, what
    /// they add is started; returns once every new path has been read (or `timeout` passed: a
    /// host name that does not resolve).
    package func apply(_ targets: ServeTargets, timeout: Duration = .seconds(10)) async {
        schedule(targets)
        await untilRead(timeout: timeout)
    }

    /// Returns once everything queued so far has run and every watched path has been read, or
    /// after `timeout`. A destination's first path comes from the engine's lookup of it, after
    /// its monitor started: the queue alone does not say it was read.
    package func untilRead(timeout: Duration) async {
        await roundTrip()
        // Woken by the record that completes the set, not by polling; the sleep only bounds it.
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.state.untilReadAll() }
            group.addTask { try? await Task.sleep(for: timeout) }
            await group.next()
            group.cancelAll()
        }
    }

    /// Queues ``apply(_:)``'s work and returns at once: targets scheduled one after the other
    /// are applied in that order.
    package func schedule(_ targets: ServeTargets) {
        queue.async { [self] in
            guard !running.isCancelled else { return }
            running.targets = targets
            reconcile()
        }
    }

    /// Returns once the watch's queue has run everything queued before: it is not stuck.
    package func roundTrip() async { await onQueue {} }

    /// Stops every monitor, subscription and the namespace directory.
    package func cancel() async {
        await onQueue { [self] in
            running.isCancelled = true
            running.directory?.cancel()
            running.directory = nil
            for label in running.namespaces.keys { stop(label) }
        }
    }

    private func onQueue(_ body: @escaping @Sendable () -> Void) async {
        await withCheckedContinuation { continuation in
            queue.async {
                body()
                continuation.resume()
            }
        }
    }

    /// Brings what runs in line with the targets and the namespaces followed; on `queue`.
    private func reconcile() {
        guard !running.isCancelled else { return }
        followNamespaceDirectory(running.targets.followsNamespaceDirectory)
        let targets = running.targets
        let wanted = Self.namespaces(of: targets, discovered: running.discovered)
        state.watch(
            keys: Self.keys(of: targets, discovered: running.discovered), defaultNamespace: wanted.first?.label ?? "",
            readyWhen: targets.readyWhen)
        let wantedLabels = Set(wanted.map(\.label))
        for label in running.namespaces.keys where !wantedLabels.contains(label) {
            stop(label)
            running.namespaces[label] = nil
            running.problems[label] = nil
            state.unwatch(namespace: label)
        }
        for namespace in wanted {
            // Another namespace under the same label (a file's `namespaces` changed meaning).
            if let old = running.namespaces[namespace.label], old.namespace != namespace {
                stop(namespace.label)
                running.namespaces[namespace.label] = nil
                running.problems[namespace.label] = nil
                state.unwatch(namespace: namespace.label)
            }
            if running.namespaces[namespace.label] == nil {
                running.namespaces[namespace.label] = WatchedNamespace(namespace: namespace)
            }
            watchDestinations(in: namespace.label, targets.destinations)
        }
        namespacesChanged(Dictionary(uniqueKeysWithValues: wanted.map { ($0.label, $0.namespace) }))
    }

    /// Starts or stops following `ip netns` namespaces; on `queue`.
    private func followNamespaceDirectory(_ follows: Bool) {
        guard follows != (running.directory != nil) else { return }
        guard follows else {
            running.directory?.cancel()
            running.directory = nil
            running.discovered = []
            return
        }
        let directory = NamespaceDirectory(directory: namespaceDirectory, onWarning: onWarning) { [weak self] names in
            guard let self else { return }
            self.queue.async {
                guard self.running.directory != nil, self.running.discovered != names else { return }
                self.running.discovered = names
                self.reconcile()
            }
        }
        running.directory = directory
        // Read now, so the first reconcile watches them already; the thread reports changes.
        running.discovered = NamespaceDirectory.names(in: namespaceDirectory)
        directory.start()
    }

    /// Stops everything watched in the namespace `label`; on `queue`.
    private func stop(_ label: String) {
        guard let watched = running.namespaces[label] else { return }
        watched.judge?.cancel()
        watched.monitors.values.forEach { $0.monitor.cancel() }
        running.namespaces[label]?.judge = nil
        running.namespaces[label]?.monitors = [:]
    }

    /// Starts, restarts and stops the monitors of namespace `label` so that they watch the
    /// internet and `destinations`. On `queue`.
    private func watchDestinations(in label: String, _ destinations: [NamedDestination]) {
        guard let watched = running.namespaces[label] else { return }
        var wanted: [(name: String, destination: PathDestination?, traffic: PathTraffic)] = [("", nil, .web)]
        wanted += destinations.map { ($0.name, $0.destination, $0.traffic) }
        let names = Set(wanted.map(\.name))
        for (name, monitored) in watched.monitors where !names.contains(name) {
            monitored.monitor.cancel()
            running.namespaces[label]?.monitors[name] = nil
        }
        for (name, destination, traffic) in wanted {
            if let current = running.namespaces[label]?.monitors[name] {
                guard current.destination != destination || current.traffic != traffic else { continue }
                // The same name for another destination or traffic: its history is not the new one's.
                current.monitor.cancel()
                running.namespaces[label]?.monitors[name] = nil
                state.unwatch(PathKey(namespace: label, destination: name))
            }
            let monitor = sources.monitor(destination, traffic, watched.namespace.namespace)
            running.namespaces[label]?.monitors[name] = Monitored(
                destination: destination, traffic: traffic, monitor: monitor)
            startMonitor(monitor, key: PathKey(namespace: label, destination: name), traffic: traffic)
            if name.isEmpty, let connectivity, watched.namespace.namespace == nil {
                judge(monitor, with: connectivity, label: label)
            }
        }
    }

    /// Starts judging the internet over `paths` (started already); each verdict goes to the state.
    private func judge(_ paths: PathMonitor, with setup: ConnectivitySetup, label: String) {
        running.namespaces[label]?.judge?.cancel()
        let judge = ConnectivityMonitor(configuration: setup.configuration, pathMonitor: paths, prober: setup.prober)
        running.namespaces[label]?.judge = judge
        // Every verdict, not only level changes: each round's probe results are metrics.
        let verdicts = judge.verdicts
        let state = self.state
        Task {
            for await verdict in verdicts { state.record(verdict, namespace: label) }
        }
        judge.start(queue: DispatchQueue(label: "netreach.serve.connectivity"))
    }

    /// On `queue`.
    private func startMonitor(_ monitor: PathMonitor, key: PathKey, traffic: PathTraffic) {
        let state = self.state
        let recorder = state.beginRecording(key, traffic: traffic)
        let queue = self.queue
        monitor.updateObserver = { [weak self, weak monitor] update in
            // Here, on the engine's thread: the state's lock and the hub's, nothing that waits for
            // the queue (a monitor being started there waits for this thread's first snapshot).
            // The event leaves now; the routes and interfaces the update carries are what the
            // next scrape writes.
            guard state.record(update, for: key, recorder: recorder),
                update.path.unsatisfiedReason == .monitorUnavailable
            else { return }
            queue.async { [weak self, weak monitor] in
                guard let self, let monitor,
                    // A monitor stopped since (a reload, a namespace gone) is not news.
                    self.running.namespaces[key.namespace]?.monitors[key.destination]?.monitor === monitor,
                    let failure = monitor.failure
                else { return }
                self.explain(failure, namespace: key.namespace)
            }
        }
        // Blocks until the first snapshot, whose update the observer has recorded when it returns.
        monitor.start(queue: queue)
    }

    /// Says once, on standard error and in `/readyz`, why serve may not enter the namespace
    /// `label` when a permission was refused; without it, only `netreach_namespace_available 0`
    /// would tell that nothing is read there. On `queue`.
    private func explain(_ failure: PathMonitorError, namespace label: String) {
        guard let problem = Self.permissionProblem(failure), running.problems[label] != problem else { return }
        running.problems[label] = problem
        state.recordProblem(problem, namespace: label)
        onWarning("network namespace \(label): \(problem)")
    }

    /// Why entering a namespace was refused and what it takes, when `failure` is a refused
    /// permission (EPERM from setns, EACCES or EPERM from opening `/proc/PID/ns/net`); `nil` for
    /// any other failure. Opening another process's namespace file is a ptrace access check: by
    /// process id it needs CAP_SYS_PTRACE as well as setns's CAP_SYS_ADMIN.
    package static func permissionProblem(_ failure: PathMonitorError) -> String? {
        guard case .namespaceUnavailable(let path, let code) = failure, code == EPERM || code == EACCES else {
            return nil
        }
        let parts = path.split(separator: "/")
        let byProcess =
            parts.count == 4 && parts[0] == "proc" && Int32(parts[1]) != nil && parts[2...] == ["ns", "net"]
        let needs = byProcess ? "CAP_SYS_ADMIN and CAP_SYS_PTRACE (entering by process id)" : "CAP_SYS_ADMIN"
        let name = code == EPERM ? "EPERM" : "EACCES"
        return
            "cannot enter \(path): \(String(cString: strerror(code))) (\(name)): it needs \(needs); nothing is read from it"
    }
}
