import Dispatch
import Foundation

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
/// Guarantees (see DESIGN.md "Concurrency contract"):
/// - ``start(queue:)`` returns after the system state has been read, so ``currentPath`` is exact
///   from then on, and the first delivery carries that same path.
/// - Delivery is change-only and ordered: a handler or stream never sees the same path twice in a
///   row, nor an older path after a newer one.
/// - ``currentPath`` may be read from any thread at any time.
/// - A second ``start(queue:)``, or one after ``cancel()``, is a logged no-op. ``cancel()`` is
///   final, idempotent and safe from inside a handler or a stream's termination; no handler starts
///   after it returns.
public final class PathMonitor: Sendable {
    /// Posted on `NotificationCenter.default` after each change when ``postsNotifications`` is on;
    /// the object is the monitor and `userInfo[PathMonitor.pathUserInfoKey]` the new ``NetworkPath``.
    public static let pathDidChangeNotification = Notification.Name("NetReachPathDidChange")
    /// The `userInfo` key of ``pathDidChangeNotification`` holding the ``NetworkPath``.
    public static let pathUserInfoKey = "path"

    /// A monitor for the whole process with no requirements, started on first use and never
    /// cancelled (its ``cancel()`` does nothing). Prefer its ``paths`` to a handler, which every
    /// user of `shared` would overwrite.
    ///
    /// ```swift
    /// if PathMonitor.shared.currentPath.isConnected { ... }
    /// ```
    public static let shared: PathMonitor = {
        let monitor = PathMonitor(requirements: PathRequirements(), classification: .automatic,
                                  source: SystemPathSource.shared(), isShared: true)
        monitor.start(queue: DispatchQueue(label: "NetReach.PathMonitor.shared"))
        return monitor
    }()

    /// The monitor's requirements.
    public let requirements: PathRequirements
    /// How the monitor classifies interfaces.
    public let classification: InterfaceClassification
    private let source: any PathSource
    private let isShared: Bool
    private let state = Locked(State())

    private enum Phase { case idle, starting, running, cancelled }

    private struct State {
        var phase = Phase.idle
        var handler: (@Sendable (NetworkPath) -> Void)?
        var path = NetworkPath.unsatisfied(.monitorUnavailable)
        var hasEmitted = false
        var deliveryQueue: DispatchQueue?
        var streams: [UInt64: AsyncStream<NetworkPath>.Continuation] = [:]
        var nextStreamID: UInt64 = 0
        var subscription: PathSubscription?
        var postsNotifications = false
        var failure: PathMonitorError?
    }

    /// Creates a monitor of the system's network, like `NWPathMonitor()`,
    /// `NWPathMonitor(requiredInterfaceType:)` and `NWPathMonitor(prohibitedInterfaceTypes:)`.
    ///
    /// - Parameters:
    ///   - requiredInterfaceType: only interfaces of this type count.
    ///   - prohibitedInterfaceTypes: interfaces of these types never count.
    ///   - classification: overrides for interface types and expensive/constrained interfaces.
    ///   - namespace: a network namespace to observe instead of this process's (needs root).
    public convenience init(
        requiredInterfaceType: InterfaceType? = nil,
        prohibitedInterfaceTypes: [InterfaceType] = [],
        classification: InterfaceClassification = .automatic,
        namespace: NetworkNamespace? = nil
    ) {
        self.init(
            requirements: PathRequirements(requiredInterfaceType: requiredInterfaceType,
                                           prohibitedInterfaceTypes: Set(prohibitedInterfaceTypes)),
            classification: classification,
            source: SystemPathSource.shared(namespace: namespace))
    }

    /// Creates a monitor fed by any ``PathSource``, such as a simulated network in tests.
    ///
    /// ```swift
    /// let network = SimulatedNetwork()          // NetReachTesting
    /// let monitor = PathMonitor(source: network)
    /// ```
    public convenience init(
        requirements: PathRequirements = PathRequirements(),
        classification: InterfaceClassification = .automatic,
        source: any PathSource
    ) {
        self.init(requirements: requirements, classification: classification, source: source, isShared: false)
    }

    private init(requirements: PathRequirements, classification: InterfaceClassification, source: any PathSource, isShared: Bool) {
        self.requirements = requirements
        self.classification = classification
        self.source = source
        self.isShared = isShared
    }

    deinit {
        let subscription = state.withLock { $0.subscription }
        subscription?.cancel()
        for stream in state.withLock({ $0.streams.values }) { stream.finish() }
    }

    /// Called on the start queue with the first path and then with every change.
    /// Set it before ``start(queue:)`` to see the first path.
    public var pathUpdateHandler: (@Sendable (NetworkPath) -> Void)? {
        get { state.withLock { $0.handler } }
        set { state.withLock { $0.handler = newValue } }
    }

    /// The latest path; exact from the moment ``start(queue:)`` returns. Before start it is
    /// unsatisfied with reason ``UnsatisfiedReason/monitorUnavailable``. Safe from any thread.
    public var currentPath: NetworkPath { state.withLock { $0.path } }

    /// Why the monitor could not observe the system, if it could not; `nil` otherwise.
    public var failure: PathMonitorError? { state.withLock { $0.failure } }

    /// When `true`, each change is also posted as ``pathDidChangeNotification`` on
    /// `NotificationCenter.default`, on the start queue after the handler. Off by default.
    public var postsNotifications: Bool {
        get { state.withLock { $0.postsNotifications } }
        set { state.withLock { $0.postsNotifications = newValue } }
    }

    /// Starts monitoring; handlers run on `queue`, one at a time, in order (even if `queue` is
    /// concurrent). Returns once the system state has been read.
    ///
    /// If the system cannot be observed (for example a namespace that does not exist), the monitor
    /// still starts: it delivers an unsatisfied path with reason
    /// ``UnsatisfiedReason/monitorUnavailable`` and sets ``failure``.
    public func start(queue: DispatchQueue) {
        let began = state.withLock { state -> Bool in
            guard state.phase == .idle else { return false }
            state.phase = .starting
            state.deliveryQueue = DispatchQueue(label: "NetReach.PathMonitor.delivery", target: queue)
            return true
        }
        guard began else {
            if !isShared { NetReachDiagnostics.log("PathMonitor.start(queue:) ignored: the monitor was already started or cancelled") }
            return
        }
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
            emit(.unsatisfied(.monitorUnavailable))
            state.withLock { if $0.phase == .starting { $0.phase = .running } }
        }
    }

    /// Stops monitoring for good: no handler starts after this returns, every ``paths`` sequence
    /// ends, and the monitor's share of the system source is released. Idempotent; safe from any
    /// thread, from inside a handler, and from a stream's termination handler.
    /// ``shared`` ignores it.
    public func cancel() {
        guard !isShared else { return }
        let (subscription, streams) = state.withLock { state -> (PathSubscription?, [AsyncStream<NetworkPath>.Continuation]) in
            guard state.phase != .cancelled else { return (nil, []) }
            state.phase = .cancelled
            defer { state.subscription = nil; state.streams = [:] }
            return (state.subscription, Array(state.streams.values))
        }
        // Outside the lock: finishing a stream runs its termination handler, which may call back in.
        subscription?.cancel()
        for stream in streams { stream.finish() }
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

    /// Called by the source, one snapshot at a time.
    private func receive(_ snapshot: SystemSnapshot) {
        emit(PathEvaluator.evaluate(snapshot, requirements: requirements, classification: classification))
    }

    private func emit(_ path: NetworkPath) {
        let delivery = state.withLock { state -> (DispatchQueue?, [AsyncStream<NetworkPath>.Continuation])? in
            guard state.phase == .starting || state.phase == .running else { return nil }
            guard !state.hasEmitted || state.path != path else { return nil }
            state.path = path
            state.hasEmitted = true
            return (state.deliveryQueue, Array(state.streams.values))
        }
        guard let (queue, streams) = delivery else { return }
        for stream in streams { stream.yield(path) }
        queue?.async { [weak self] in self?.deliver(path) }
    }

    /// Runs on the delivery queue.
    private func deliver(_ path: NetworkPath) {
        let (handler, posts) = state.withLock { state in
            state.phase == .cancelled ? (nil, false) : (state.handler, state.postsNotifications)
        }
        handler?(path)
        if posts {
            NotificationCenter.default.post(name: Self.pathDidChangeNotification, object: self,
                                            userInfo: [Self.pathUserInfoKey: path])
        }
    }
}
