import Dispatch
import Foundation
import NetReach
import NetReachConnectivity
import NetReachSystem
import ServiceLifecycle

/// The monitors `serve` runs: one ``PathMonitor`` per destination (the internet and each
/// `--to NAME=DEST`) in each namespace, and each namespace's snapshots for its interfaces and
/// its kernel routes. Everything they report goes to ``ServeState`` from one serial queue, so
/// metrics and events see changes in the order they happened.
///
/// A service of the server's `ServiceGroup`: it starts the monitors when it runs and cancels them
/// on graceful shutdown.
///
/// ```swift
/// let watch = NetworkWatch(namespaces: [.own], destinations: [("db", "10.0.0.5")], state: state)
/// let group = ServiceGroup(services: [watch, server], ...)
/// ```
package final class NetworkWatch: Service, Sendable {
    /// A namespace to watch: its label value and where it is.
    package struct WatchedNamespace: Sendable, Hashable {
        /// `namespace` label value: the argument as given; empty for the server's own namespace.
        package var label: String
        /// `nil` for the server's own.
        package var namespace: NetworkNamespace?

        package init(label: String, namespace: NetworkNamespace?) {
            self.label = label
            self.namespace = namespace
        }

        /// The server's own namespace.
        package static let own = WatchedNamespace(label: "", namespace: nil)

        /// A namespace from `--namespace`: a process id (its `/proc/PID/ns/net`), a path, or an
        /// `ip netns` name.
        package init(argument: String) {
            if let pid = Int32(argument), pid > 0 {
                self.init(label: argument, namespace: .process(pid))
            } else {
                self.init(label: argument, namespace: NetworkNamespace(argument: argument))
            }
        }
    }

    /// A destination with the name it is exported under.
    package struct NamedDestination: Sendable, Hashable {
        package var name: String
        package var destination: PathDestination

        package init(name: String, destination: PathDestination) {
            self.name = name
            self.destination = destination
        }
    }

    private struct Watching {
        var monitors: [PathMonitor] = []
        var judge: ConnectivityMonitor?
        var subscriptions: [PathSubscription] = []
        var isCancelled = false
    }

    package let namespaces: [WatchedNamespace]
    package let destinations: [NamedDestination]
    /// Judges the internet in the server's own namespace, when probes are configured.
    private let connectivity: ConnectivitySetup?
    private let state: ServeState
    private let queue = DispatchQueue(label: "netreach.serve.watch")
    private let watching = Locked(Watching())
    /// The internet routes last seen per namespace label, read and written on `queue` only.
    private let internetRoutes = Locked([String: [PathSamples.Route]]())

    package init(
        namespaces: [WatchedNamespace], destinations: [NamedDestination], connectivity: ConnectivitySetup? = nil,
        state: ServeState
    ) {
        self.namespaces = namespaces
        self.destinations = destinations
        self.connectivity = connectivity
        self.state = state
    }

    /// Every path key this watch reports, for ``ServeState/init(keys:version:hub:registry:renderPath:)``.
    package static func keys(namespaces: [WatchedNamespace], destinations: [NamedDestination]) -> [PathKey] {
        namespaces.flatMap { namespace in
            [PathKey(namespace: namespace.label, destination: "")]
                + destinations.map { PathKey(namespace: namespace.label, destination: $0.name) }
        }
    }

    package func run() async throws {
        // PathMonitor.start blocks until the first snapshot (and a destination's name is
        // resolved): off the concurrency pool.
        queue.async { self.start() }
        // Until the group shuts down, gracefully or by cancellation.
        try? await gracefulShutdown()
        cancel()
    }

    /// Returns once the watch's queue has run everything queued before: it is not stuck.
    package func roundTrip() async {
        await withCheckedContinuation { continuation in queue.async { continuation.resume() } }
    }

    /// Stops every monitor and subscription.
    package func cancel() {
        let (monitors, subscriptions, judge) = watching.withLock { watching in
            watching.isCancelled = true
            defer { (watching.monitors, watching.subscriptions, watching.judge) = ([], [], nil) }
            return (watching.monitors, watching.subscriptions, watching.judge)
        }
        judge?.cancel()
        monitors.forEach { $0.cancel() }
        subscriptions.forEach { $0.cancel() }
    }

    /// Starts everything; on `queue`.
    private func start() {
        for namespace in namespaces {
            if watching.withLock({ $0.isCancelled }) { return }
            watchSnapshots(of: namespace)
            let internet = PathMonitor(namespace: namespace.namespace)
            startMonitor(internet, namespace: namespace, name: "", family: nil)
            if let connectivity, namespace.namespace == nil {
                judge(internet, with: connectivity, label: namespace.label)
            }
            for named in destinations {
                let monitor = PathMonitor(destination: named.destination, namespace: namespace.namespace)
                var family: IPAddress.Family?
                if case .address(let address) = named.destination { family = address.family }
                startMonitor(monitor, namespace: namespace, name: named.name, family: family)
            }
        }
    }

    /// Starts judging the internet over `paths` (started already); each verdict goes to the state.
    private func judge(_ paths: PathMonitor, with setup: ConnectivitySetup, label: String) {
        let judge = ConnectivityMonitor(configuration: setup.configuration, pathMonitor: paths, prober: setup.prober)
        let isCancelled = watching.withLock { watching in
            if !watching.isCancelled { watching.judge = judge }
            return watching.isCancelled
        }
        guard !isCancelled else { return }
        // Every verdict, not only level changes: each round's probe results are metrics.
        let verdicts = judge.verdicts
        let state = self.state
        Task {
            for await verdict in verdicts { state.record(verdict, namespace: label) }
        }
        judge.start(queue: DispatchQueue(label: "netreach.serve.connectivity"))
    }

    private func startMonitor(
        _ monitor: PathMonitor, namespace: WatchedNamespace, name: String, family: IPAddress.Family?
    ) {
        let key = PathKey(namespace: namespace.label, destination: name)
        let isCancelled = watching.withLock { watching in
            if !watching.isCancelled { watching.monitors.append(monitor) }
            return watching.isCancelled
        }
        guard !isCancelled else { return }
        monitor.pathUpdateHandler = { [weak self, weak monitor] path in
            guard let self, let monitor else { return }
            self.record(path, of: monitor, key: key, family: family)
        }
        // Delivers the first path on `queue` too, after this returns.
        monitor.start(queue: queue)
    }

    /// On `queue`.
    private func record(_ path: NetworkPath, of monitor: PathMonitor, key: PathKey, family: IPAddress.Family?) {
        let routes: [PathSamples.Route]
        if key.destination.isEmpty {
            routes = internetRoutes.withLock { $0[key.namespace] ?? [] }
        } else {
            let family = family ?? monitor.destinationAddresses.first?.family ?? .ipv4
            routes = PathSamples.routes(of: path, family: family)
        }
        state.record(path, routes: routes, for: key, at: Date())
        if path.unsatisfiedReason == .monitorUnavailable {
            state.record(interfaces: [:], available: false, namespace: key.namespace)
        }
    }

    private func watchSnapshots(of namespace: WatchedNamespace) {
        let source = SystemPathSource.shared(namespace: namespace.namespace)
        do {
            let subscription = try source.subscribe { [weak self] snapshot in
                guard let self else { return }
                self.queue.async { self.absorb(snapshot, namespace: namespace.label) }
            }
            // Cancelled while subscribing (a SIGTERM during start-up): end it here, as cancel() would.
            let isCancelled = watching.withLock { watching in
                if !watching.isCancelled { watching.subscriptions.append(subscription) }
                return watching.isCancelled
            }
            if isCancelled { subscription.cancel() }
        } catch {
            state.record(interfaces: [:], available: false, namespace: namespace.label)
        }
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
        let changed = internetRoutes.withLock { known in
            defer { known[namespace] = routes }
            return known[namespace] != routes
        }
        let key = PathKey(namespace: namespace, destination: "")
        if changed, let path = state.path(for: key) {
            state.record(path, routes: routes, for: key, at: Date())
        }
    }
}
