import NetReach

/// Whether to show an "offline" indicator, decided without flicker: a network that drops for less
/// than the grace period never shows it, and once shown it stays up for a minimum time. Feed it
/// paths or connectivity levels from any monitor; decisions arrive on the main actor.
///
/// The naive pattern (present an overlay whenever `status != .satisfied`) flashes on every
/// blip and races between the monitor's queue and the UI. Instead:
///
/// ```swift
/// @MainActor final class OfflineBanner {
///     let indicator = OfflineIndicator { showing in
///         print(showing ? "offline" : "back online")   // show or hide the banner here
///     }
///     func start() { indicator.follow(PathMonitor.shared) }
/// }
/// ```
///
/// Tests drive it with a clock of their own (`init(policy:clock:onChange:)`), for example
/// swift-clocks' `TestClock`.
@MainActor
public final class OfflineIndicator {
    /// When the indicator shows and hides.
    public let policy: OfflineIndicatorPolicy
    /// Whether the indicator is up now.
    public var isShowing: Bool { machine.isShowing }

    private var machine: OfflineIndicatorMachine
    private let onChange: @MainActor (Bool) -> Void
    /// Time since this indicator was made, on its clock.
    private let elapsed: @Sendable () -> Duration
    /// Sleeps until that much time since the start has passed.
    private let sleepUntil: @Sendable (Duration) async throws -> Void
    private var timer: Task<Void, Never>?
    private var following: Task<Void, Never>?

    /// An indicator on the continuous clock.
    ///
    /// - Parameters:
    ///   - policy: the grace period, the minimum display time, and whether a limited network
    ///     counts as offline.
    ///   - onChange: called on the main actor with `true` to show, `false` to hide; only on a change.
    public convenience init(
        policy: OfflineIndicatorPolicy = OfflineIndicatorPolicy(),
        onChange: @escaping @MainActor (Bool) -> Void
    ) {
        self.init(policy: policy, clock: ContinuousClock(), onChange: onChange)
    }

    /// An indicator on `clock` (a test clock in tests).
    public init<C: Clock>(
        policy: OfflineIndicatorPolicy = OfflineIndicatorPolicy(), clock: C,
        onChange: @escaping @MainActor (Bool) -> Void
    ) where C.Duration == Duration {
        self.policy = policy
        self.machine = OfflineIndicatorMachine(policy: policy)
        self.onChange = onChange
        let start = clock.now
        elapsed = { start.duration(to: clock.now) }
        sleepUntil = { offset in try await clock.sleep(until: start.advanced(by: offset), tolerance: nil) }
    }

    isolated deinit {
        timer?.cancel()
        following?.cancel()
    }

    /// The path now: anything but `.satisfied` is offline.
    public func update(_ path: NetworkPath) {
        observe(offline: policy.isOffline(path))
    }

    /// The connectivity level now; `.unknown` changes nothing.
    public func update(_ level: ConnectivityLevel) {
        guard let offline = policy.isOffline(level) else { return }
        observe(offline: offline)
    }

    /// Follows `monitor`'s paths (its current path first) until ``stop()`` or until the indicator
    /// is released; following another monitor replaces this one.
    public func follow(_ monitor: PathMonitor) {
        following?.cancel()
        following = Task { [weak self] in
            for await path in monitor.paths {
                guard let self, !Task.isCancelled else { return }
                self.update(path)
            }
        }
    }

    /// Stops following a monitor and cancels a pending decision; the indicator keeps its state.
    public func stop() {
        following?.cancel()
        following = nil
        timer?.cancel()
        timer = nil
    }

    private func observe(offline: Bool) {
        apply(machine.observe(offline: offline, at: elapsed()))
    }

    /// Reports a decision, then waits for the next deadline, if any.
    private func apply(_ decision: OfflineIndicatorMachine.Decision?) {
        if let decision { onChange(decision == .show) }
        timer?.cancel()
        timer = nil
        guard let deadline = machine.deadline else { return }
        let sleepUntil = self.sleepUntil
        timer = Task { [weak self] in
            do { try await sleepUntil(deadline) } catch { return } // cancelled: a newer observation
            guard let self else { return }
            self.apply(self.machine.advance(to: self.elapsed()))
        }
    }
}
