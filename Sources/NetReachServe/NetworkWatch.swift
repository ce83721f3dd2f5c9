import Dispatch
import NetReach
import NetReachConnectivity
import NetReachSystem
import ServiceLifecycle

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// The monitors `serve` runs: one ``PathMonitor`` per destination (the internet and each
/// `--to NAME=DEST`, each asking about its own ``PathTraffic``) in each namespace. Each monitor's
/// ``PathUpdate``s are all serve learns, recorded in ``ServeState`` on the thread that computed
/// them (the netlink engine's: no hop between the kernel's message and the event stream): the
/// path, and what the next scrape writes (the kernel's routes it was judged from, and for the
/// internet's monitor the namespace's interfaces). Monitors are made from ``PathSources``: the
/// kernel's in production, a simulated network in tests.
///
/// What is watched can change while it runs: ``apply(_:timeout:)`` (a reload) and, with
/// ``ServeTargets/followsNamespaceDirectory``, `ip netns` namespaces coming and going. Monitors
/// of what stays are kept; what goes is stopped and its series and events are withdrawn.
///
/// Everything the watch runs is one value, ``Inventory``, in one `Locked`, changed in place by
/// whoever asks (a reload, the namespace directory's thread, a monitor's observer) and never
/// held across anything that waits: a monitor's start blocks until its first snapshot (and a
/// destination's name is resolved), so new monitors are started one after the other on a thread
/// of their own (`BlockingWork`), and stopping one (which may wait for its engine's thread) is
/// done once the lock is released.
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

    /// A monitor made and registered, waiting to be started.
    private struct MonitorStart {
        var monitor: PathMonitor
        var key: PathKey
        /// Its token from ``ServeState/beginRecording(_:traffic:)``.
        var recorder: UInt64
        /// The internet's judge over this monitor, started once the monitor is.
        var judge: ConnectivityMonitor?
    }

    /// What the watch runs now, and what it has yet to start.
    private struct Inventory {
        var targets: ServeTargets
        /// `ip netns` names seen, when following them.
        var discovered: [String] = []
        var directory: NamespaceDirectory?
        var namespaces: [String: WatchedNamespace] = [:]
        /// Why a namespace may not be entered, per label, once said (``explain(_:key:monitor:)``).
        var problems: [String: String] = [:]
        var isCancelled = false
        /// In the order made; the starter thread takes them one at a time.
        var unstarted: [MonitorStart] = []
        var isStarting = false
        /// Starts asked for and finished so far: ``roundTrip()`` waits for the second to reach
        /// the first as it was when it was called.
        var startsAsked: UInt64 = 0
        var startsFinished: UInt64 = 0
        var startWaiters = ConditionWaiters()

        init(targets: ServeTargets) { self.targets = targets }
    }

    /// What a change leaves to do once the lock is released.
    private struct Aftermath {
        var stopped: [PathMonitor] = []
        var judgesStopped: [ConnectivityMonitor] = []
        var directoriesStopped: [NamespaceDirectory] = []
        var directoryStarted: NamespaceDirectory?
        var startsStarter = false
    }

    /// Judges the internet in the server's own namespace, when probes are configured.
    private let connectivity: ConnectivitySetup?
    private let state: ServeState
    private let namespaceDirectory: String
    /// Told the namespaces watched (label → where) whenever the set changes, in order: under the
    /// watch's lock, so it must not call back into the watch.
    private let namespacesChanged: @Sendable ([String: NetworkNamespace?]) -> Void
    private let onWarning: @Sendable (String) -> Void
    private let inventory: Locked<Inventory>
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
        inventory = Locked(Inventory(targets: targets))
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
        change { inventory, aftermath in reconcile(&inventory, &aftermath) }
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

    /// Returns once every monitor asked for so far has started and every watched path has been
    /// read, or after `timeout`. A destination's first path comes from the engine's lookup of it,
    /// after its monitor started: a start alone does not say it was read.
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

    /// Watches `targets` from now on and returns at once: what they no longer name is withdrawn
    /// before it returns, the monitors of what they add are queued to start. Targets given one
    /// after the other are watched in that order.
    package func schedule(_ targets: ServeTargets) {
        change { inventory, aftermath in
            guard !inventory.isCancelled else { return }
            inventory.targets = targets
            reconcile(&inventory, &aftermath)
        }
    }

    /// Returns once every monitor start asked for before has finished: the watch is not stuck.
    package func roundTrip() async {
        let asked = inventory.withLock { $0.startsAsked }
        while !Task.isCancelled, inventory.withLock({ $0.startsFinished < asked }) {
            // Woken at every finished start; asked again until this call's are done.
            await ConditionWaiters.wait(in: inventory, \.startWaiters) { $0.startsFinished >= asked }
        }
    }

    /// Stops every monitor, subscription and the namespace directory; returns once a start that
    /// was under way has finished.
    package func cancel() async {
        change { inventory, aftermath in
            inventory.isCancelled = true
            if let directory = inventory.directory { aftermath.directoriesStopped.append(directory) }
            inventory.directory = nil
            for label in inventory.namespaces.keys { stop(label, &inventory, &aftermath) }
        }
        await roundTrip()
    }

    /// Runs `body` on the inventory under its lock, then does what it left to do.
    private func change(_ body: (inout Inventory, inout Aftermath) -> Void) {
        let aftermath = inventory.withLock { inventory in
            var aftermath = Aftermath()
            body(&inventory, &aftermath)
            if !inventory.unstarted.isEmpty, !inventory.isStarting {
                inventory.isStarting = true
                aftermath.startsStarter = true
            }
            return aftermath
        }
        aftermath.judgesStopped.forEach { $0.cancel() }
        aftermath.stopped.forEach { $0.cancel() }
        aftermath.directoriesStopped.forEach { $0.cancel() }
        aftermath.directoryStarted?.start()
        if aftermath.startsStarter { BlockingWork.start(named: "netreach-watch") { [self] in startMonitors() } }
    }

    /// Brings what runs in line with the targets and the namespaces followed.
    private func reconcile(_ inventory: inout Inventory, _ aftermath: inout Aftermath) {
        guard !inventory.isCancelled else { return }
        followNamespaceDirectory(inventory.targets.followsNamespaceDirectory, &inventory, &aftermath)
        let targets = inventory.targets
        let wanted = Self.namespaces(of: targets, discovered: inventory.discovered)
        state.watch(
            keys: Self.keys(of: targets, discovered: inventory.discovered), defaultNamespace: wanted.first?.label ?? "",
            readyWhen: targets.readyWhen)
        let wantedLabels = Set(wanted.map(\.label))
        for label in inventory.namespaces.keys where !wantedLabels.contains(label) {
            withdraw(label, &inventory, &aftermath)
        }
        for namespace in wanted {
            // Another namespace under the same label (a file's `namespaces` changed meaning).
            if let old = inventory.namespaces[namespace.label], old.namespace != namespace {
                withdraw(namespace.label, &inventory, &aftermath)
            }
            if inventory.namespaces[namespace.label] == nil {
                inventory.namespaces[namespace.label] = WatchedNamespace(namespace: namespace)
            }
            watchDestinations(in: namespace.label, targets.destinations, &inventory, &aftermath)
        }
        namespacesChanged(Dictionary(uniqueKeysWithValues: wanted.map { ($0.label, $0.namespace) }))
    }

    /// Starts or stops following `ip netns` namespaces.
    private func followNamespaceDirectory(
        _ follows: Bool, _ inventory: inout Inventory, _ aftermath: inout Aftermath
    ) {
        guard follows != (inventory.directory != nil) else { return }
        guard follows else {
            if let directory = inventory.directory { aftermath.directoriesStopped.append(directory) }
            inventory.directory = nil
            inventory.discovered = []
            return
        }
        let directory = NamespaceDirectory(directory: namespaceDirectory, onWarning: onWarning) { [weak self] names in
            self?.discovered(names)
        }
        inventory.directory = directory
        // Read now, so that this reconcile watches them already; its thread reports changes.
        inventory.discovered = NamespaceDirectory.names(in: namespaceDirectory)
        aftermath.directoryStarted = directory
    }

    /// The names `ip netns` has now, from the directory's thread.
    private func discovered(_ names: [String]) {
        change { inventory, aftermath in
            guard inventory.directory != nil, inventory.discovered != names else { return }
            inventory.discovered = names
            reconcile(&inventory, &aftermath)
        }
    }

    /// Stops and forgets the namespace `label`: its paths and the namespace itself are withdrawn.
    private func withdraw(_ label: String, _ inventory: inout Inventory, _ aftermath: inout Aftermath) {
        stop(label, &inventory, &aftermath)
        inventory.namespaces[label] = nil
        inventory.problems[label] = nil
        state.unwatch(namespace: label)
    }

    /// Stops everything watched in the namespace `label`.
    private func stop(_ label: String, _ inventory: inout Inventory, _ aftermath: inout Aftermath) {
        guard let watched = inventory.namespaces[label] else { return }
        if let judge = watched.judge { aftermath.judgesStopped.append(judge) }
        aftermath.stopped += watched.monitors.values.map(\.monitor)
        inventory.namespaces[label]?.judge = nil
        inventory.namespaces[label]?.monitors = [:]
    }

    /// Makes, keeps and stops the monitors of namespace `label` so that they watch the internet
    /// and `destinations`; the new ones are queued to start.
    private func watchDestinations(
        in label: String, _ destinations: [NamedDestination], _ inventory: inout Inventory,
        _ aftermath: inout Aftermath
    ) {
        guard let watched = inventory.namespaces[label] else { return }
        var wanted: [(name: String, destination: PathDestination?, traffic: PathTraffic)] = [("", nil, .web)]
        wanted += destinations.map { ($0.name, $0.destination, $0.traffic) }
        let names = Set(wanted.map(\.name))
        for (name, monitored) in watched.monitors where !names.contains(name) {
            aftermath.stopped.append(monitored.monitor)
            inventory.namespaces[label]?.monitors[name] = nil
        }
        for (name, destination, traffic) in wanted {
            let key = PathKey(namespace: label, destination: name)
            if let current = inventory.namespaces[label]?.monitors[name] {
                guard current.destination != destination || current.traffic != traffic else { continue }
                // The same name for another destination or traffic: its history is not the new one's.
                aftermath.stopped.append(current.monitor)
                inventory.namespaces[label]?.monitors[name] = nil
                state.unwatch(key)
            }
            let monitor = sources.monitor(destination, traffic, watched.namespace.namespace)
            inventory.namespaces[label]?.monitors[name] = Monitored(
                destination: destination, traffic: traffic, monitor: monitor)
            var start = MonitorStart(
                monitor: monitor, key: key, recorder: state.beginRecording(key, traffic: traffic))
            if name.isEmpty, let connectivity, watched.namespace.namespace == nil {
                if let old = inventory.namespaces[label]?.judge { aftermath.judgesStopped.append(old) }
                let judge = ConnectivityMonitor(
                    configuration: connectivity.configuration, pathMonitor: monitor, prober: connectivity.prober)
                inventory.namespaces[label]?.judge = judge
                start.judge = judge
            }
            inventory.unstarted.append(start)
            inventory.startsAsked += 1
        }
    }

    /// The starter thread: takes the monitors in the order they were made, one at a time, until
    /// none is left. A monitor stopped before its turn does not start.
    private func startMonitors() {
        while let next = inventory.withLock({ inventory -> MonitorStart? in
            guard !inventory.unstarted.isEmpty else {
                inventory.isStarting = false
                return nil
            }
            return inventory.unstarted.removeFirst()
        }) {
            start(next)
            inventory.withLock { inventory in
                inventory.startsFinished += 1
                return inventory.startWaiters.takeAll()
            }.forEach { $0.resume() }
        }
    }

    /// Starts one monitor, and its judge; on the starter thread.
    private func start(_ start: MonitorStart) {
        let state = self.state
        let key = start.key
        let recorder = start.recorder
        start.monitor.updateObserver = { [weak self, weak monitor = start.monitor] update in
            // Here, on the engine's thread: the state's lock and the hub's (the event leaves now;
            // the routes and interfaces the update carries are what the next scrape writes), and
            // the watch's for a namespace that cannot be observed.
            guard state.record(update, for: key, recorder: recorder),
                update.path.unsatisfiedReason == .monitorUnavailable, let self, let monitor,
                let failure = monitor.failure
            else { return }
            explain(failure, key: key, monitor: monitor)
        }
        // Blocks until the first snapshot, whose update the observer has recorded when it returns.
        // The queue is the one `pathUpdateHandler` would run on; serve sets none.
        start.monitor.startIfIdle(queue: Self.handlers)
        guard let judge = start.judge else { return }
        // Every verdict, not only level changes: each round's probe results are metrics. The
        // stream ends when the judge is stopped.
        let verdicts = judge.verdicts
        Task {
            for await verdict in verdicts { state.record(verdict, namespace: key.namespace) }
        }
        judge.start(queue: Self.handlers)
    }

    /// Where `PathMonitor` and `ConnectivityMonitor` would run their handlers: serve sets none,
    /// and reads their observer and verdict stream instead.
    private static let handlers = DispatchQueue(label: "netreach.serve.handlers")

    /// Says once, on standard error and in `/readyz`, why serve may not enter the namespace of
    /// `key` when a permission was refused; without it, only `netreach_namespace_available 0`
    /// would tell that nothing is read there. From the monitor's observer, on any thread.
    private func explain(_ failure: PathMonitorError, key: PathKey, monitor: PathMonitor) {
        guard let problem = Self.permissionProblem(failure) else { return }
        let isNews = inventory.withLock { inventory -> Bool in
            // A monitor stopped since (a reload, a namespace gone) is not news.
            guard inventory.namespaces[key.namespace]?.monitors[key.destination]?.monitor === monitor,
                inventory.problems[key.namespace] != problem
            else { return false }
            inventory.problems[key.namespace] = problem
            state.recordProblem(problem, namespace: key.namespace)
            return true
        }
        if isNews { onWarning("network namespace \(key.namespace): \(problem)") }
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
