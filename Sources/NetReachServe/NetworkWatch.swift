import Dispatch
import Foundation
import NetReach
import NetReachConnectivity
import NetReachSystem
import ServiceLifecycle

/// The monitors `serve` runs: one ``PathMonitor`` per destination (the internet and each
/// `--to NAME=DEST`, each asking about its own ``PathTraffic``) in each namespace, and each
/// namespace's snapshots for its interfaces and its kernel routes. A path's event leaves from the thread that computed it (the netlink engine's:
/// no hop between the kernel's message and the event stream); everything else they report, the
/// series included, goes to ``ServeState`` from one serial queue, in the order it happened. The
/// namespace's snapshots are subscribed to after its monitors, so a change's first event is out
/// before that queue's thread is woken to compete for the core.
///
/// What is watched can change while it runs: ``apply(_:)`` (a reload) and, with
/// ``ServeTargets/followsNamespaceDirectory``, `ip netns` namespaces coming and going. Monitors
/// of what stays are kept; what goes is stopped and its series and events are withdrawn.
///
/// A service of the server's `ServiceGroup`: it starts the monitors when it runs and cancels them
/// on graceful shutdown.
///
/// ```swift
/// let watch = NetworkWatch(targets: targets, state: state)
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
        var subscription: PathSubscription?
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
        /// The internet routes last seen per namespace label.
        var internetRoutes: [String: [PathSamples.Route]] = [:]
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

    /// - Parameters:
    ///   - namespaceDirectory: where `ip netns` namespaces are followed from.
    ///   - namespacesChanged: the namespaces watched, whenever they change (`/probe` may only
    ///     enter these).
    package init(
        targets: ServeTargets, connectivity: ConnectivitySetup? = nil, state: ServeState,
        namespaceDirectory: String = "/run/netns",
        namespacesChanged: @escaping @Sendable ([String: NetworkNamespace?]) -> Void = { _ in },
        onWarning: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.connectivity = connectivity
        self.state = state
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
            running.internetRoutes[label] = nil
            running.problems[label] = nil
            state.unwatch(namespace: label)
        }
        for namespace in wanted {
            // Another namespace under the same label (a file's `namespaces` changed meaning).
            if let old = running.namespaces[namespace.label], old.namespace != namespace {
                stop(namespace.label)
                running.namespaces[namespace.label] = nil
                running.internetRoutes[namespace.label] = nil
                running.problems[namespace.label] = nil
                state.unwatch(namespace: namespace.label)
            }
            let isNew = running.namespaces[namespace.label] == nil
            if isNew { running.namespaces[namespace.label] = WatchedNamespace(namespace: namespace) }
            let started = watchDestinations(in: namespace.label, targets.destinations)
            // After the monitors: the engine hands each snapshot to its subscribers in the order
            // they subscribed, and this one wakes the queue, whose thread could otherwise take
            // the core from the engine before the first event is out.
            if isNew || started { watchSnapshots(of: namespace) }
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
        watched.subscription?.cancel()
        running.namespaces[label]?.judge = nil
        running.namespaces[label]?.monitors = [:]
        running.namespaces[label]?.subscription = nil
    }

    /// Starts, restarts and stops the monitors of namespace `label` so that they watch the
    /// internet and `destinations`; returns whether it started any. On `queue`.
    private func watchDestinations(in label: String, _ destinations: [NamedDestination]) -> Bool {
        guard let watched = running.namespaces[label] else { return false }
        var started = false
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
            let monitor =
                destination.map {
                    PathMonitor(
                        destination: $0, port: traffic.port, protocol: traffic.transportProtocol,
                        namespace: watched.namespace.namespace)
                } ?? PathMonitor(namespace: watched.namespace.namespace)
            running.namespaces[label]?.monitors[name] = Monitored(
                destination: destination, traffic: traffic, monitor: monitor)
            var family: IPAddress.Family?
            if case .address(let address) = destination { family = address.family }
            startMonitor(
                monitor, key: PathKey(namespace: label, destination: name), traffic: traffic, family: family)
            started = true
            if name.isEmpty, let connectivity, watched.namespace.namespace == nil {
                judge(monitor, with: connectivity, label: label)
            }
        }
        return started
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
    private func startMonitor(_ monitor: PathMonitor, key: PathKey, traffic: PathTraffic, family: IPAddress.Family?) {
        // The event, on the engine's thread: the state's lock and the hub's, nothing that waits
        // for this queue (a monitor being started here waits for that thread's first snapshot).
        let state = self.state
        let recorder = state.beginRecording(key, traffic: traffic)
        monitor.pathObserver = { path in state.recordPath(path, for: key, at: Date(), recorder: recorder) }
        // The series, here, after the event.
        monitor.pathUpdateHandler = { [weak self, weak monitor] path in
            guard let self, let monitor else { return }
            // A path queued before its monitor was stopped (a reload, a namespace gone) is not news.
            guard self.running.namespaces[key.namespace]?.monitors[key.destination]?.monitor === monitor else {
                return
            }
            self.record(path, of: monitor, key: key, family: family)
        }
        // Blocks until the first snapshot; delivers the first path on `queue`, after this returns.
        monitor.start(queue: queue)
    }

    /// On `queue`.
    private func record(_ path: NetworkPath, of monitor: PathMonitor, key: PathKey, family: IPAddress.Family?) {
        let routes: [PathSamples.Route]?
        if key.destination.isEmpty {
            // The namespace's first snapshot is absorbed after the monitors' first paths (see
            // `reconcile`): until then the internet's series would lack its routes, so they wait
            // for it (`absorb` records them), and so does the readiness that counts them.
            routes = running.internetRoutes[key.namespace]
        } else {
            let family = family ?? monitor.destinationAddresses.first?.family ?? .ipv4
            routes = PathSamples.routes(of: path, family: family)
        }
        if let routes { state.recordSeries(for: key, routes: routes) }
        if path.unsatisfiedReason == .monitorUnavailable {
            state.record(interfaces: [:], available: false, namespace: key.namespace)
            if let failure = monitor.failure { explain(failure, namespace: key.namespace) }
        }
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

    /// Subscribes to the namespace's snapshots, or subscribes again so that the subscription
    /// comes after monitors started since; on `queue`.
    private func watchSnapshots(of namespace: NetworkNamespaceLabel) {
        let source = SystemPathSource.shared(namespace: namespace.namespace)
        let label = namespace.label
        // The old subscription is let go once the new one holds the engine (never none in
        // between, which would stop it), and kept if subscribing again fails.
        let old = running.namespaces[label]?.subscription
        do {
            let subscription = try source.subscribe { [weak self] snapshot in
                guard let self else { return }
                self.queue.async {
                    // A snapshot queued before the namespace stopped being watched.
                    guard self.running.namespaces[label]?.subscription != nil else { return }
                    self.absorb(snapshot, namespace: label)
                }
            }
            running.namespaces[label]?.subscription = subscription
            old?.cancel()
        } catch {
            guard old == nil else { return }
            explain(error, namespace: label)
            // No routes will come: the internet's series go without them.
            if running.internetRoutes[label] == nil {
                running.internetRoutes[label] = []
                recordInternetSeries(in: label)
            }
            state.record(interfaces: [:], available: false, namespace: label)
        }
    }

    /// Records the internet's series in `label` with the routes known; on `queue`.
    private func recordInternetSeries(in label: String) {
        state.recordSeries(
            for: PathKey(namespace: label, destination: ""), routes: running.internetRoutes[label] ?? [])
    }

    /// A namespace's snapshot: its interfaces, and its kernel routes to the internet; on `queue`.
    private func absorb(_ snapshot: SystemSnapshot, namespace: String) {
        let classification = InterfaceClassification.automatic
        var interfaces: [String: ServeState.Interface] = [:]
        for link in snapshot.links.values {
            interfaces[link.name] = .init(type: classification.type(of: link), isUp: link.isOperational)
        }
        var routes: [PathSamples.Route] = []
        for family in IPAddress.Family.allCases {
            guard case .route(let route) = snapshot.routeLookups[family],
                let link = snapshot.links[route.interfaceIndex]
            else { continue }
            routes.append(
                .init(
                    family: family, interface: link.name, interfaceType: classification.type(of: link),
                    gateway: route.gateway.map { "\($0)" } ?? ""))
        }
        // A snapshot queued before the namespace went away must not bring its interfaces back.
        let isAvailable = !state.paths.contains {
            $0.key.namespace == namespace && $0.value.path.unsatisfiedReason == .monitorUnavailable
        }
        state.record(interfaces: isAvailable ? interfaces : [:], available: isAvailable, namespace: namespace)
        let changed = running.internetRoutes[namespace] != routes
        running.internetRoutes[namespace] = routes
        if changed { recordInternetSeries(in: namespace) }
    }
}
