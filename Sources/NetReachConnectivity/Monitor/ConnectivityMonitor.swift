import Dispatch
import Logging
import Metrics
import NetReach
import NetReachSystem

/// Whether the internet really answers, overall and per family, judged by probes you configure,
/// with the same delivery contract as ``NetReach/PathMonitor``: a handler on the start queue, any
/// number of ``updates`` sequences (the current verdict first), ``current`` from any thread,
/// deliveries only when a level changes, ``cancel()`` for good.
///
/// It probes once at start and after every path change; while not `full`, again after 1 s,
/// doubling up to ``Configuration/maximumBackOff``; while `full`, not at all unless asked. Leaving
/// `full` takes two failed rounds and a dwell time, so one lost probe never flips it; a lost
/// carrier counts once it has lasted ``Configuration/carrierLossDelay``, so a flapping link
/// changes the levels at most once. No probe is
/// sent over an expensive or constrained path unless allowed, and none is built in.
///
/// ```swift
/// import NetReachAsyncHTTPClient
///
/// let monitor = ConnectivityMonitor(
///     configuration: .init(probes: [ConnectivityProbe(URL(string: "http://probe.example.net/generate_204")!)]),
///     prober: AsyncHTTPClientProber())
/// monitor.updateHandler = { connectivity in
///     print(connectivity.level)            // full, portal(http://login…), limited, local, none
/// }
/// monitor.start(queue: .main)
/// ```
///
/// It logs to a `Logger` labelled `netreach.connectivity` (rounds at debug, each probe at trace,
/// level changes at debug) and counts rounds, probe durations and level changes in the
/// `netreach_connectivity_*` metrics (the NetReach article "Metrics and logging").
public final class ConnectivityMonitor: Sendable {
    /// The probes and the rules.
    public let configuration: Configuration
    /// The path monitor whose paths are judged.
    public let pathMonitor: PathMonitor

    /// Where the monitor logs.
    public let logger: Logger
    private let metrics: ConnectivityMetrics
    private let prober: any ConnectivityProber
    private let elapsed: @Sendable () -> Duration
    private let sleepUntil: @Sendable (Duration) async throws -> Void
    // Locked, not Synchronization.Mutex: ThreadSanitizer cannot see a futex (DesignNotes).
    private let state = Locked(State())
    /// When a request over this path last got an answer: written by every such request (one lock,
    /// no task), read by the engine when a periodic round is due.
    private let lastEvidence = Locked<Duration?>(nil)

    private struct State {
        var phase = Phase.idle
        var current = Connectivity.unknown
        var hasEmitted = false
        var handler: (@Sendable (Connectivity) -> Void)?
        var deliveryQueue: DispatchQueue?
        var streams: [UInt64: Stream] = [:]
        var nextStreamID: UInt64 = 0
        var engine: ConnectivityEngine?
        var following: Task<Void, Never>?
        var exchangeListener: PathSubscription?
    }

    private enum Phase { case idle, running, cancelled }

    /// A sequence's continuation, and whether it wants every verdict or only level changes.
    private struct Stream {
        var continuation: AsyncStream<Connectivity>.Continuation
        var everyVerdict: Bool
    }

    /// A monitor of `pathMonitor`'s paths (the shared one by default), probing with `prober`.
    ///
    /// `logger` defaults to a `Logger` labelled `netreach.connectivity`; `metricsFactory` makes
    /// the monitor's metrics (by default `MetricsSystem.factory`, read now: a no-op unless the
    /// program bootstrapped a backend).
    public convenience init(
        configuration: Configuration, pathMonitor: PathMonitor = .shared,
        prober: any ConnectivityProber, logger: Logger? = nil, metricsFactory: (any MetricsFactory)? = nil
    ) {
        self.init(
            configuration: configuration, pathMonitor: pathMonitor, prober: prober, clock: ContinuousClock(),
            logger: logger, metricsFactory: metricsFactory)
    }

    /// A monitor whose waits (back-off, dwell) run on `clock`: a test clock in tests.
    public init<C: Clock>(
        configuration: Configuration, pathMonitor: PathMonitor = .shared,
        prober: any ConnectivityProber, clock: C, logger: Logger? = nil,
        metricsFactory: (any MetricsFactory)? = nil
    ) where C.Duration == Duration {
        self.logger = logger ?? Logger(label: "netreach.connectivity")
        metrics = ConnectivityMetrics(factory: metricsFactory ?? MetricsSystem.factory)
        self.configuration = configuration
        self.pathMonitor = pathMonitor
        self.prober = prober
        let start = clock.now
        elapsed = { start.duration(to: clock.now) }
        sleepUntil = { offset in try await clock.sleep(until: start.advanced(by: offset), tolerance: nil) }
    }

    deinit {
        let (engine, following, streams, listener) = state.withLock {
            ($0.engine, $0.following, $0.streams.values.map(\.continuation), $0.exchangeListener)
        }
        listener?.cancel()
        following?.cancel()
        if let engine { Task { await engine.stop() } }
        for stream in streams { stream.finish() }
    }

    /// Called on the start queue with the first verdict and then with every change of a level.
    public var updateHandler: (@Sendable (Connectivity) -> Void)? {
        get { state.withLock { $0.handler } }
        set { state.withLock { $0.handler = newValue } }
    }

    /// The latest verdict, with the latest evidence; `unknown` before the first. Safe from any thread.
    public var current: Connectivity { state.withLock { $0.current } }

    /// Starts judging (and starts the path monitor if it was not started). A second call does
    /// nothing.
    public func start(queue: DispatchQueue) {
        let began = state.withLock { state -> Bool in
            guard state.phase == .idle else { return false }
            state.phase = .running
            state.deliveryQueue = DispatchQueue(label: "NetReach.ConnectivityMonitor.delivery", target: queue)
            return true
        }
        guard began else { return }
        pathMonitor.startIfIdle(queue: DispatchQueue(label: "NetReach.ConnectivityMonitor.paths"))
        let lastEvidence = self.lastEvidence
        let engine = ConnectivityEngine(
            configuration: configuration, prober: prober, elapsed: elapsed,
            sleepUntil: sleepUntil, lastEvidence: { lastEvidence.withLock { $0 } },
            metrics: metrics, logger: logger,
            publish: { [weak self] verdict in self?.emit(verdict) }
        )
        let paths = pathMonitor.paths
        let pathMonitor = self.pathMonitor
        let following = Task {
            for await path in paths {
                if Task.isCancelled { break }
                await engine.pathChanged(path, familyReasons: pathMonitor.familyReasons())
            }
        }
        // A request through NetworkService over this path counts as a passing round.
        let elapsed = self.elapsed
        let listener = pathMonitor.evidence.listen { _ in lastEvidence.withLock { $0 = elapsed() } }
        let cancelledMeanwhile = state.withLock { state -> Bool in
            guard state.phase == .running else { return true }
            state.engine = engine
            state.following = following
            state.exchangeListener = listener
            return false
        }
        if cancelledMeanwhile {
            following.cancel()
            listener.cancel()
            Task { await engine.stop() }
        }
    }

    /// Stops for good: no probe is sent after it, every ``updates`` sequence ends, no later verdict
    /// is delivered. Safe from any thread, idempotent.
    public func cancel() {
        let (engine, following, streams, listener) = state.withLock {
            state
                -> (
                    ConnectivityEngine?, Task<Void, Never>?, [AsyncStream<Connectivity>.Continuation], PathSubscription?
                ) in
            guard state.phase != .cancelled else { return (nil, nil, [], nil) }
            state.phase = .cancelled
            defer {
                state.engine = nil
                state.following = nil
                state.streams = [:]
                state.exchangeListener = nil
            }
            return (state.engine, state.following, state.streams.values.map(\.continuation), state.exchangeListener)
        }
        listener?.cancel()
        following?.cancel()
        if let engine { Task { await engine.stop() } }
        for stream in streams { stream.finish() }
    }

    /// Whether the monitor has nothing left to do until a path changes or its clock moves on
    /// (``ConnectivityEngine/isQuiet``); `true` before it starts and after it is cancelled. For tests.
    func isQuiet() async -> Bool {
        guard let engine = state.withLock({ $0.engine }) else { return true }
        return await engine.isQuiet
    }

    /// A request over this network just succeeded: while `full`, it counts as a passing round and
    /// postpones the next. `NetworkService` reports its own requests through the path monitor the
    /// two share; call this for requests made another way.
    public func noteSuccessfulRequest() {
        let now = elapsed()
        lastEvidence.withLock { $0 = now }
    }

    /// Every verdict from now on whose levels differ from the one before, starting with the current
    /// one (once started). Any number of tasks can iterate at once; the sequence ends when the
    /// monitor is cancelled.
    ///
    /// ```swift
    /// for await connectivity in monitor.updates where connectivity.level == .full {
    ///     break   // the internet answers
    /// }
    /// ```
    public var updates: AsyncStream<Connectivity> { stream(everyVerdict: false) }

    /// Like ``updates``, but also every verdict whose levels did not change: a new path judged the
    /// same, a round's fresh evidence. For `watch --internet`, which prints path changes too.
    package var verdicts: AsyncStream<Connectivity> { stream(everyVerdict: true) }

    private func stream(everyVerdict: Bool) -> AsyncStream<Connectivity> {
        AsyncStream(bufferingPolicy: .unbounded) { continuation in
            let id = state.withLock { state -> UInt64? in
                guard state.phase != .cancelled else { return nil }
                let id = state.nextStreamID
                state.nextStreamID += 1
                state.streams[id] = Stream(continuation: continuation, everyVerdict: everyVerdict)
                if state.hasEmitted { continuation.yield(state.current) }
                return id
            }
            guard let id else {
                continuation.finish()
                return
            }
            continuation.onTermination = { [weak self] _ in
                _ = self?.state.withLock { $0.streams.removeValue(forKey: id) }
            }
        }
    }

    /// Records `verdict`; delivers it when a level changed (or it is the first).
    private func emit(_ verdict: Connectivity) {
        let delivery = state.withLock { state -> (DispatchQueue, (@Sendable (Connectivity) -> Void)?)? in
            guard state.phase == .running else { return nil }
            let changed = !state.hasEmitted || state.current.levels != verdict.levels
            if changed {
                metrics.countChanges(from: state.current, to: verdict)
                logger.debug("connectivity changed", metadata: ["verdict": "\(verdict)"])
            }
            state.current = verdict
            state.hasEmitted = true
            // Yielded under the lock: every stream sees the verdicts in order.
            for stream in state.streams.values where changed || stream.everyVerdict {
                stream.continuation.yield(verdict)
            }
            guard changed else { return nil }
            return state.deliveryQueue.map { ($0, state.handler) }
        }
        guard let (queue, handler) = delivery, let handler else { return }
        queue.async { [weak self] in
            guard let self, self.state.withLock({ $0.phase == .running }) else { return }
            handler(verdict)
        }
    }
}
