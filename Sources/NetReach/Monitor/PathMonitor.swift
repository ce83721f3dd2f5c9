import CoreMetrics
import Dispatch
import Logging
import NetReachSystem

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Watches the network path and tells you the moment it changes: the Linux counterpart of
/// Network.framework's `NWPathMonitor`, with the same vocabulary and stronger guarantees.
///
/// ```swift
/// let monitor = PathMonitor()
/// monitor.pathUpdateHandler = { path in
///     print(path.status, path.unsatisfiedReason.map { "\($0)" } ?? "")
/// }
/// monitor.start(queue: .main)
/// // currentPath is exact as soon as start(queue:) returns:
/// if monitor.currentPath.status == .satisfied { sendFirstRequest() }
///
/// // Or with Swift concurrency, from any number of tasks:
/// for await path in monitor.paths where path.isConnected { ... }
/// ```
///
/// Guarantees:
/// - ``start(queue:)`` returns after the system state has been read, so ``currentPath`` is exact
///   from then on, and the first delivery carries that same path.
/// - Delivery is change-only and ordered: a handler or stream never sees the same path twice in a
///   row, nor an older path after a newer one.
/// - ``currentPath`` may be read from any thread at any time.
/// - A second ``start(queue:)``, or one after ``cancel()``, is a logged no-op. ``cancel()`` is
///   final, idempotent and safe from inside a handler or a stream's termination. Called on the
///   start queue or from a handler, no handler starts after it returns; called from another
///   thread, a delivery the queue had already begun may still run its handler once.
public final class PathMonitor: Sendable {
    /// A monitor for the whole process with no requirements, started on first use and never
    /// cancelled (its ``cancel()`` does nothing). Prefer its ``paths`` to a handler, which every
    /// user of `shared` would overwrite.
    ///
    /// ```swift
    /// if PathMonitor.shared.currentPath.isConnected { ... }
    /// ```
    public static let shared: PathMonitor = {
        let monitor = PathMonitor(
            requirements: PathRequirements(), classification: .automatic,
            source: SystemPathSource.shared(), isShared: true)
        monitor.start(queue: DispatchQueue(label: "NetReach.PathMonitor.shared"))
        return monitor
    }()

    /// The monitor's requirements.
    public let requirements: PathRequirements
    /// How the monitor classifies interfaces.
    public let classification: InterfaceClassification
    /// The destination of a per-destination monitor; `nil` for the path to the internet.
    public let destination: PathDestination?
    /// How long a host name's resolution may take, at start and after each change.
    public let resolutionTimeout: Duration
    /// Where the monitor logs: each delivered path at debug, misuse (a second start) at warning.
    public let logger: Logger
    /// Makes the monitor's counters; kept for the monitors ``monitoring(_:)`` makes.
    private let metricsFactory: any MetricsFactory
    private let metrics: PathMonitorMetrics
    /// A `Logger` labelled `netreach.path`: the monitors' and the system sources' unless given one.
    static let defaultLogger = Logger(label: "netreach.path")
    private let source: any PathSource
    private let isShared: Bool
    /// Resolves host names: the system resolver, or a stand-in in tests (which must never ask DNS).
    private let resolve: @Sendable (String, Duration) -> Result<[IPAddress], HostResolutionError>
    /// Everything that changes, behind one lock.
    private let state = Locked(State())
    /// Evidence about this path from its users, for its other users (a request that got an
    /// answer, for a connectivity judge of the same path); the monitor only carries it.
    package let evidence = PathEvidence()
    /// Held while a path is computed and emitted, so paths from the source and from a finished
    /// re-resolution reach the handler in the order they were computed.
    private let evaluation = Locked(())

    private enum Phase { case idle, starting, running, cancelled }

    private struct State {
        var phase = Phase.idle
        var handler: (@Sendable (NetworkPath) -> Void)?
        var observer: (@Sendable (PathUpdate) -> Void)?
        /// The last update handed to the observer, and how many were.
        var lastUpdate: PathUpdate?
        var sequence: UInt64 = 0
        var path = NetworkPath.unsatisfied(.monitorUnavailable)
        var hasEmitted = false
        var deliveryQueue: DispatchQueue?
        var streams: [UInt64: AsyncStream<NetworkPath>.Continuation] = [:]
        var nextStreamID: UInt64 = 0
        var subscription: PathSubscription?
        /// Posts each change on the start queue after the handler (NetReachNotifications).
        var poster: (@Sendable (PathMonitor, NetworkPath) -> Void)?
        var failure: PathMonitorError?
        /// A per-destination monitor's addresses (empty: the name did not resolve).
        var destinationAddresses: [IPAddress] = []
        var resolutionFailure: HostResolutionError?
        /// Keeps the source looking up the routes to `destinationAddresses`.
        var destinationRoutes: PathSubscription?
        /// The last snapshot, to evaluate again when a re-resolution changes the addresses.
        var lastSnapshot: SystemSnapshot?
        /// The network a host name was last resolved on (its internet lookups and nameservers).
        var resolvedOn: ResolutionContext?
        var isResolving = false
    }

    private struct ResolutionContext: Equatable {
        var lookups: [IPAddress.Family: RouteLookup]
        var nameservers: [IPAddress]
        init(_ snapshot: SystemSnapshot) {
            lookups = snapshot.routeLookups
            nameservers = snapshot.nameservers
        }
    }

    /// Creates a monitor of the system's network, like `NWPathMonitor()`,
    /// `NWPathMonitor(requiredInterfaceType:)` and `NWPathMonitor(prohibitedInterfaceTypes:)`.
    ///
    /// The path is the one a client's traffic takes: by default a web client's, TCP to port 443
    /// (with a source port from the namespace's `ip_local_port_range`), which policy rules that
    /// match the protocol or ports (`ip rule add ipproto tcp dport 443 table 100`) may send
    /// elsewhere than other traffic. Name the traffic your program sends:
    ///
    /// ```swift
    /// let dns = PathMonitor(port: 53, protocol: .udp)
    /// ```
    ///
    /// - Parameters:
    ///   - port: the destination port of the traffic asked about.
    ///   - transportProtocol: its transport protocol.
    ///   - requiredInterfaceType: only interfaces of this type count.
    ///   - prohibitedInterfaceTypes: interfaces of these types never count.
    ///   - classification: overrides for interface types and expensive/constrained interfaces.
    ///   - namespace: a network namespace to observe instead of this process's (needs root).
    ///   - logger: where the monitor logs; by default a `Logger` labelled `netreach.path`.
    ///   - metricsFactory: makes the monitor's counters (`netreach_path_updates_total`); `nil`
    ///     takes `MetricsSystem.factory` now, a no-op unless the program bootstrapped a backend. The
    ///     shared kernel source's engine counts with `MetricsSystem.factory`; give a
    ///     ``SystemPathSource`` of your own to `init(requirements:classification:source:logger:metricsFactory:)`
    ///     to choose its factory too.
    public convenience init(
        port: UInt16 = 443,
        protocol transportProtocol: TransportProtocol = .tcp,
        requiredInterfaceType: InterfaceType? = nil,
        prohibitedInterfaceTypes: [InterfaceType] = [],
        classification: InterfaceClassification = .automatic,
        namespace: NetworkNamespace? = nil,
        logger: Logger? = nil,
        metricsFactory: (any MetricsFactory)? = nil
    ) {
        self.init(
            requirements: PathRequirements(
                requiredInterfaceType: requiredInterfaceType,
                prohibitedInterfaceTypes: Set(prohibitedInterfaceTypes)),
            classification: classification,
            source: SystemPathSource.shared(namespace: namespace, port: port, protocol: transportProtocol),
            logger: logger, metricsFactory: metricsFactory)
    }

    /// Creates a monitor of the path to one destination: the kernel's route to that address
    /// (interface, gateway, source), updated when routing for it changes (a more specific route,
    /// a policy rule, a VPN's split tunnel). A loopback or on-link destination is satisfied
    /// without any default route.
    ///
    /// A host name is resolved when the monitor starts (``start(queue:)`` waits for it, at most
    /// `resolutionTimeout`) and again after each change of the network; while it has no address
    /// the path is unsatisfied with ``UnsatisfiedReason/destinationUnresolved`` and
    /// ``resolutionFailure`` says why. In another `namespace`, names are resolved inside it, as a
    /// program there would resolve them (its `/etc/netns/NAME` files, as `ip netns exec` sets them
    /// up, or a container's own): never by this machine's resolver, which may not know them or
    /// know them as other addresses.
    ///
    /// The route asked for is a client's packet to `port` over `transportProtocol` (a web client's,
    /// TCP to 443, by default; the source port from the namespace's `ip_local_port_range`): policy
    /// rules that match the protocol or ports can send a database's TCP/5432 and a DNS query's
    /// UDP/53 to the same address different ways.
    ///
    /// ```swift
    /// let monitor = PathMonitor(destination: "10.20.0.5", port: 5432, protocol: .tcp)
    /// monitor.start(queue: .main)
    /// print(monitor.currentPath.primaryInterface?.name ?? "unreachable")   // wg0, through the tunnel
    /// ```
    public convenience init(
        destination: PathDestination,
        port: UInt16 = 443,
        protocol transportProtocol: TransportProtocol = .tcp,
        requiredInterfaceType: InterfaceType? = nil,
        prohibitedInterfaceTypes: [InterfaceType] = [],
        classification: InterfaceClassification = .automatic,
        namespace: NetworkNamespace? = nil,
        resolutionTimeout: Duration = .seconds(5),
        logger: Logger? = nil,
        metricsFactory: (any MetricsFactory)? = nil
    ) {
        self.init(
            requirements: PathRequirements(
                requiredInterfaceType: requiredInterfaceType,
                prohibitedInterfaceTypes: Set(prohibitedInterfaceTypes)),
            classification: classification,
            source: SystemPathSource.shared(namespace: namespace, port: port, protocol: transportProtocol),
            isShared: false, destination: destination, resolutionTimeout: resolutionTimeout,
            resolve: { HostResolver.resolve($0, timeout: $1, in: namespace) }, logger: logger,
            metricsFactory: metricsFactory)
    }

    /// Creates a monitor of the path to `destination` fed by any ``PathSource``. A simulated
    /// network answers with ``SystemSnapshot/emulatedRouteLookup(to:)`` unless a test sets
    /// ``SystemSnapshot/destinationLookups``.
    public convenience init(
        destination: PathDestination,
        requirements: PathRequirements = PathRequirements(),
        classification: InterfaceClassification = .automatic,
        source: any PathSource,
        resolutionTimeout: Duration = .seconds(5),
        logger: Logger? = nil,
        metricsFactory: (any MetricsFactory)? = nil
    ) {
        self.init(
            requirements: requirements, classification: classification, source: source, isShared: false,
            destination: destination, resolutionTimeout: resolutionTimeout, logger: logger,
            metricsFactory: metricsFactory)
    }

    /// Creates a monitor fed by any ``PathSource``, such as a simulated network in tests.
    ///
    /// ```swift
    /// let network = SimulatedNetwork()          // NetReachTesting
    /// let monitor = PathMonitor(source: network)
    /// ```
    ///
    /// `logger` defaults to a `Logger` labelled `netreach.path`; `metricsFactory` (by default
    /// `MetricsSystem.factory`, read now) makes the monitor's counters, which a test can read
    /// from a factory of its own with no global bootstrap.
    public convenience init(
        requirements: PathRequirements = PathRequirements(),
        classification: InterfaceClassification = .automatic,
        source: any PathSource,
        logger: Logger? = nil,
        metricsFactory: (any MetricsFactory)? = nil
    ) {
        self.init(
            requirements: requirements, classification: classification, source: source, isShared: false,
            logger: logger, metricsFactory: metricsFactory)
    }

    /// A per-destination monitor of the system's path in `namespace`, whose host names `resolve`
    /// answers: serve's `/probe` resolves on a bounded pool first and hands the answer in, so
    /// ``start(queue:)`` never waits for the resolver.
    package convenience init(
        destination: PathDestination, namespace: NetworkNamespace?,
        resolve: @escaping @Sendable (String, Duration) -> Result<[IPAddress], HostResolutionError>
    ) {
        self.init(
            requirements: PathRequirements(), classification: .automatic,
            source: SystemPathSource.shared(namespace: namespace), isShared: false, destination: destination,
            resolve: resolve)
    }

    /// A per-destination monitor fed by `source`, whose host names `resolve` answers: serve's
    /// watch on a simulated network resolves each namespace's names inside that namespace, and
    /// tests answer names without asking DNS.
    ///
    /// ```swift
    /// let monitor = PathMonitor(
    ///     destination: "db.internal", source: network,
    ///     resolve: { host, timeout in HostResolver.resolve(host, timeout: timeout, in: .named("blue")) })
    /// ```
    package convenience init(
        destination: PathDestination, source: any PathSource,
        resolve: @escaping @Sendable (String, Duration) -> Result<[IPAddress], HostResolutionError>
    ) {
        self.init(
            requirements: PathRequirements(), classification: .automatic, source: source, isShared: false,
            destination: destination, resolve: resolve)
    }

    private init(
        requirements: PathRequirements, classification: InterfaceClassification, source: any PathSource, isShared: Bool,
        destination: PathDestination? = nil, resolutionTimeout: Duration = .seconds(5),
        resolve: @escaping @Sendable (String, Duration) -> Result<[IPAddress], HostResolutionError> = {
            HostResolver.resolve($0, timeout: $1)
        },
        logger: Logger? = nil, metricsFactory: (any MetricsFactory)? = nil
    ) {
        self.resolve = resolve
        self.logger = logger ?? Self.defaultLogger
        let metricsFactory = metricsFactory ?? MetricsSystem.factory
        self.metricsFactory = metricsFactory
        metrics = PathMonitorMetrics(factory: metricsFactory)
        self.requirements = requirements
        self.classification = classification
        self.source = source
        self.isShared = isShared
        self.destination = destination
        self.resolutionTimeout = resolutionTimeout
    }

    deinit {
        let (subscription, routes) = state.withLock { ($0.subscription, $0.destinationRoutes) }
        subscription?.cancel()
        routes?.cancel()
        for stream in state.withLock({ $0.streams.values }) { stream.finish() }
    }

    /// The latest path; exact from the moment ``start(queue:)`` returns. Before start it is
    /// unsatisfied with reason ``UnsatisfiedReason/monitorUnavailable``. Safe from any thread.
    public var currentPath: NetworkPath { state.withLock { $0.path } }

    /// Why the monitor could not observe the system, at start or since; `nil` while it can.
    public var failure: PathMonitorError? { state.withLock { $0.failure } }

    /// Why a per-destination monitor's host name has no addresses now; `nil` when it has some
    /// (or the destination is an address).
    public var resolutionFailure: HostResolutionError? { state.withLock { $0.resolutionFailure } }

    /// The addresses a per-destination monitor follows: the destination address, or the host
    /// name's addresses in the resolver's order (empty while it does not resolve).
    public var destinationAddresses: [IPAddress] { state.withLock { $0.destinationAddresses } }

    /// Starts monitoring; handlers run on `queue`, one at a time, in order (even if `queue` is
    /// concurrent). Returns once the system state has been read.
    ///
    /// If the system cannot be observed (for example a namespace that does not exist), the monitor
    /// still starts: it delivers an unsatisfied path with reason
    /// ``UnsatisfiedReason/monitorUnavailable`` and sets ``failure``.
    public func start(queue: DispatchQueue) {
        guard startIfIdle(queue: queue) else {
            if !isShared {
                NetReachDiagnostics.warning(
                    "PathMonitor.start(queue:) ignored: the monitor was already started or cancelled", logger: logger)
            }
            return
        }
    }

    /// Whether the monitor has been neither started nor cancelled.
    package var isIdle: Bool { state.withLock { $0.phase == .idle } }

    /// Starts the monitor unless it was started (or cancelled) already, saying nothing then: for a
    /// service that starts, when it first needs a path, a monitor it was given unstarted. Returns
    /// whether this call started it (once the system state has been read).
    @discardableResult
    package func startIfIdle(queue: DispatchQueue) -> Bool {
        let began = state.withLock { state -> Bool in
            guard state.phase == .idle else { return false }
            state.phase = .starting
            state.deliveryQueue = DispatchQueue(label: "NetReach.PathMonitor.delivery", target: queue)
            return true
        }
        guard began else { return false }
        if let destination { prepare(destination) }
        do {
            let subscription = try source.subscribe { [weak self] snapshot in self?.receive(snapshot) }
            let cancelledMeanwhile = state.withLock { state -> Bool in
                guard state.phase == .starting else { return true }
                state.phase = .running
                state.subscription = subscription
                return false
            }
            if cancelledMeanwhile { subscription.cancel() }
        } catch {
            // Reported through `failure` and the path's reason, not also logged: callers that show
            // `failure` would otherwise print it twice.
            state.withLock { $0.failure = error }
            emit(.unsatisfied(.monitorUnavailable), from: nil)
            state.withLock { if $0.phase == .starting { $0.phase = .running } }
        }
        return true
    }

    /// Stops monitoring for good: every ``paths`` sequence ends, no later change is delivered, and
    /// the monitor's share of the system source is released. Called on the start queue or from a
    /// handler, no handler starts after it returns; from another thread, a delivery the queue had
    /// already begun may still run its handler once (waiting for it could deadlock a handler that
    /// waits for that thread). Idempotent; safe from any
    /// thread, from inside a handler, and from a stream's termination handler.
    /// ``shared`` ignores it.
    public func cancel() {
        guard !isShared else { return }
        let (subscription, routes, streams) = state.withLock {
            state -> (PathSubscription?, PathSubscription?, [AsyncStream<NetworkPath>.Continuation]) in
            guard state.phase != .cancelled else { return (nil, nil, []) }
            state.phase = .cancelled
            defer {
                state.subscription = nil
                state.destinationRoutes = nil
                state.streams = [:]
            }
            return (state.subscription, state.destinationRoutes, Array(state.streams.values))
        }
        // Outside the lock: finishing a stream runs its termination handler, which may call back in.
        subscription?.cancel()
        routes?.cancel()
        for stream in streams { stream.finish() }
    }

    /// Why each family cannot carry traffic to the internet in the latest snapshot (usable
    /// families absent): what ``NetworkPath`` does not say for a family it does not support.
    /// Empty before the first snapshot.
    package func familyReasons() -> [IPAddress.Family: UnsatisfiedReason] {
        guard let snapshot = state.withLock({ $0.lastSnapshot }) else { return [:] }
        return PathEvaluator.familyReasons(snapshot, requirements: requirements, classification: classification)
    }

    /// Called by the source, one snapshot at a time.
    private func receive(_ snapshot: SystemSnapshot) {
        let resolveAgain = evaluation.withLock { _ in
            let resolveAgain = state.withLock { state -> Bool in
                if let failure = snapshot.observationFailure { state.failure = failure }
                state.lastSnapshot = snapshot
                guard case .host = destination else { return false }
                // The first snapshot is the network the name was resolved on at start.
                guard let resolvedOn = state.resolvedOn else {
                    state.resolvedOn = ResolutionContext(snapshot)
                    return false
                }
                guard resolvedOn != ResolutionContext(snapshot), !state.isResolving else { return false }
                state.isResolving = true
                return true
            }
            emit(path(for: snapshot), from: snapshot)
            return resolveAgain
        }
        if resolveAgain { resolveInBackground(on: snapshot) }
    }

    /// The path `snapshot` gives this monitor.
    private func path(for snapshot: SystemSnapshot) -> NetworkPath {
        guard destination != nil else {
            return PathEvaluator.evaluate(snapshot, requirements: requirements, classification: classification)
        }
        let addresses = state.withLock { $0.destinationAddresses }
        if addresses.isEmpty && snapshot.observationFailure == nil { return .unsatisfied(.destinationUnresolved) }
        return PathEvaluator.evaluate(
            snapshot, requirements: requirements, classification: classification, destinations: addresses)
    }

    /// Resolves the destination (bounded by `resolutionTimeout`) and has the source look up the
    /// routes to its addresses, before the first snapshot is evaluated.
    private func prepare(_ destination: PathDestination) {
        let addresses: [IPAddress]
        var failure: HostResolutionError?
        switch destination {
        case .address(let address):
            addresses = [address]
        case .host(let host):
            switch resolve(host, resolutionTimeout) {
            case .success(let resolved): addresses = resolved
            case .failure(let error): (addresses, failure) = ([], error)
            }
        }
        let routes = addresses.isEmpty ? nil : source.lookUpRoutes(to: addresses)
        let cancelled = state.withLock { state -> Bool in
            state.destinationAddresses = addresses
            state.resolutionFailure = failure
            guard state.phase != .cancelled else { return true }
            state.destinationRoutes = routes
            return false
        }
        // Cancelled while resolving: the source must not keep looking these addresses up.
        if cancelled { routes?.cancel() }
    }

    /// Resolves the host name again on a thread of its own; if its addresses changed, follows the
    /// new ones and emits the path they give.
    private func resolveInBackground(on snapshot: SystemSnapshot) {
        guard case .host(let host) = destination else { return }
        let context = ResolutionContext(snapshot)
        BlockingWork.start(named: "netreach-resolve") { [weak self] in
            guard let self else { return }
            let result = self.resolve(host, self.resolutionTimeout)
            let addresses = (try? result.get()) ?? []
            let changed = self.state.withLock { $0.destinationAddresses != addresses }
            // Registered before the switch, so the snapshot evaluated below already has the answers.
            let routes = changed && !addresses.isEmpty ? self.source.lookUpRoutes(to: addresses) : nil
            let (previous, cancelled) = self.evaluation.withLock { _ in
                let (previous, latest, cancelled) = self.state.withLock {
                    state -> (PathSubscription?, SystemSnapshot?, Bool) in
                    state.isResolving = false
                    state.resolvedOn = context
                    if case .failure(let error) = result {
                        state.resolutionFailure = error
                    } else {
                        state.resolutionFailure = nil
                    }
                    guard changed, state.phase != .cancelled else {
                        return (nil, state.lastSnapshot, state.phase == .cancelled)
                    }
                    let previous = state.destinationRoutes
                    state.destinationAddresses = addresses
                    state.destinationRoutes = routes
                    return (previous, state.lastSnapshot, false)
                }
                if let latest, changed, !cancelled {
                    self.emit(self.path(for: latest), from: latest)
                }
                return (previous, cancelled)
            }
            previous?.cancel()
            if cancelled { routes?.cancel() }
            // The network may have changed again while the resolver ran.
            let again = self.state.withLock { state -> SystemSnapshot? in
                guard state.phase != .cancelled, !state.isResolving, let latest = state.lastSnapshot,
                    ResolutionContext(latest) != state.resolvedOn
                else { return nil }
                state.isResolving = true
                return latest
            }
            if let again { self.resolveInBackground(on: again) }
        }
    }

    /// A started monitor of the path to `destination`, through this monitor's source, with its
    /// requirements and classification: how code that already holds a monitor asks about one
    /// server. Cancel it when done.
    ///
    /// ```swift
    /// let database = PathMonitor.shared.monitoring("10.20.0.5")
    /// defer { database.cancel() }
    /// print(database.currentPath)   // satisfied via wg0(other) ... when a split tunnel carries it
    /// ```
    public func monitoring(_ destination: PathDestination) -> PathMonitor {
        let monitor = PathMonitor(
            requirements: requirements, classification: classification, source: source,
            isShared: false, destination: destination, resolutionTimeout: resolutionTimeout,
            resolve: resolve, logger: logger, metricsFactory: metricsFactory)
        monitor.start(queue: DispatchQueue(label: "NetReach.PathMonitor.destination"))
        return monitor
    }
}

// MARK: - Delivery

// How a monitor's paths reach its users: the `paths` streams, the handler on the start queue and
// the notification. `receive` evaluates a snapshot and hands the path to `emit`.
extension PathMonitor {
    /// Called on the start queue with the first path and then with every change.
    /// Set it before ``start(queue:)`` to see the first path; one set later sees the changes
    /// computed after it was set.
    public var pathUpdateHandler: (@Sendable (NetworkPath) -> Void)? {
        get { state.withLock { $0.handler } }
        set { state.withLock { $0.handler = newValue } }
    }

    /// Called with the first ``PathUpdate`` and every later one, on the thread that computed it
    /// (the source's: the netlink engine's thread, or a simulated network's caller), in order,
    /// before the ``paths`` streams and the handler see the path. Set it before ``start(queue:)``
    /// to see the first update.
    ///
    /// The one way to follow what a path was judged from (the kernel's routes, the interfaces),
    /// and the quickest: no thread hop between the kernel's message and this call. Besides each
    /// change of the path, an update comes when only its routes or interfaces changed (see
    /// ``PathUpdate``). The source waits while the observer runs: it must not block for long nor
    /// call back into the monitor, and every other monitor sharing the source waits too.
    ///
    /// ```swift
    /// let monitor = PathMonitor()
    /// monitor.updateObserver = { update in
    ///     print(update.sequence, update.time, update.path)
    /// }
    /// monitor.start(queue: DispatchQueue(label: "paths"))
    /// ```
    public var updateObserver: (@Sendable (PathUpdate) -> Void)? {
        get { state.withLock { $0.observer } }
        set { state.withLock { $0.observer = newValue } }
    }

    /// Called on the start queue after the handler with each change, when set: how
    /// NetReachNotifications posts `PathMonitor.pathDidChangeNotification` without this module
    /// linking Foundation's `NotificationCenter`.
    package var changePoster: (@Sendable (PathMonitor, NetworkPath) -> Void)? {
        get { state.withLock { $0.poster } }
        set { state.withLock { $0.poster = newValue } }
    }

    /// Every path from now on, starting with the current one (once the monitor has started).
    /// Any number of tasks can iterate at once, each with its own sequence; ending iteration
    /// releases it. The sequence finishes when the monitor is cancelled.
    ///
    /// Each sequence buffers without limit so that it sees every change, in order; a consumer that
    /// stops reading should stop iterating.
    ///
    /// ```swift
    /// for await path in monitor.paths {
    ///     if path.isConnected { break }
    /// }
    /// ```
    public var paths: AsyncStream<NetworkPath> {
        AsyncStream(bufferingPolicy: .unbounded) { continuation in
            let id = state.withLock { state -> UInt64? in
                guard state.phase != .cancelled else { return nil }
                let id = state.nextStreamID
                state.nextStreamID += 1
                state.streams[id] = continuation
                if state.hasEmitted { continuation.yield(state.path) }
                return id
            }
            guard let id else { return continuation.finish() }
            continuation.onTermination = { [weak self] _ in
                _ = self?.state.withLock { $0.streams.removeValue(forKey: id) }
            }
        }
    }

    /// Hands `path` to every ``paths`` stream at once and to the handler on the start queue,
    /// unless it repeats the last one, and its update (with what `snapshot` says it was judged
    /// from) to the observer unless that repeats the last update. Called while the monitor's
    /// evaluation lock is held, so paths leave in the order they were computed.
    func emit(_ path: NetworkPath, from snapshot: SystemSnapshot?) {
        typealias Delivery = (
            observer: (@Sendable (PathUpdate) -> Void)?, update: PathUpdate?, pathChanged: Bool,
            queue: DispatchQueue?, streams: [AsyncStream<NetworkPath>.Continuation]
        )
        let delivery = state.withLock { state -> Delivery? in
            guard state.phase == .starting || state.phase == .running else { return nil }
            let pathChanged = !state.hasEmitted || state.path != path
            var update: PathUpdate?
            if state.observer != nil {
                let next = PathUpdate(
                    path: path, routes: routes(in: snapshot, addresses: state.destinationAddresses),
                    links: snapshot?.links ?? [:], classification: classification, time: Date(),
                    sequence: state.sequence + 1)
                if pathChanged || state.lastUpdate?.hasSameContent(as: next) != true {
                    state.sequence = next.sequence
                    state.lastUpdate = next
                    update = next
                }
            }
            guard pathChanged else { return update.map { (state.observer, $0, false, nil, []) } }
            state.path = path
            state.hasEmitted = true
            // The queue only runs the handler and posts the notification: with neither, waking it
            // would cost a thread wake-up per change for nothing (a `paths` reader wakes its own).
            let queueHasWork = state.handler != nil || state.poster != nil
            return (
                state.observer, update, true, queueHasWork ? state.deliveryQueue : nil, Array(state.streams.values)
            )
        }
        guard let (observer, update, pathChanged, queue, streams) = delivery else { return }
        // The observer first (a line written where the path was computed), the counting after.
        if let update { observer?(update) }
        guard pathChanged else { return }
        for stream in streams { stream.yield(path) }
        queue?.async { [weak self] in self?.deliver(path) }
        metrics.delivered(path.status)
        logger.debug(
            "path changed",
            metadata: [
                "status": "\(path.status)", "reason": "\(path.unsatisfiedReason.map { "\($0)" } ?? "")",
                "interface": "\(path.primaryInterface?.name ?? "")",
            ])
    }

    /// The routes an update says its path was judged from: the internet's, or those to the first
    /// of `addresses` in each family.
    private func routes(in snapshot: SystemSnapshot?, addresses: [IPAddress]) -> [IPAddress.Family: RouteLookup] {
        guard let snapshot else { return [:] }
        // The kernel's answers as the snapshot holds them (shared, not copied), unless a
        // hand-built snapshot leaves a family to the emulated lookup.
        if destination == nil, snapshot.routeLookups.count == IPAddress.Family.allCases.count {
            return snapshot.routeLookups
        }
        var routes: [IPAddress.Family: RouteLookup] = [:]
        guard destination != nil else {
            for family in IPAddress.Family.allCases { routes[family] = snapshot.routeLookup(for: family) }
            return routes
        }
        for address in addresses where routes[address.family] == nil {
            routes[address.family] = snapshot.routeLookup(to: address)
        }
        return routes
    }

    /// Runs on the delivery queue.
    private func deliver(_ path: NetworkPath) {
        let (handler, poster) = state.withLock { state in
            state.phase == .cancelled ? (nil, nil) : (state.handler, state.poster)
        }
        handler?(path)
        poster?(self, path)
    }
}
