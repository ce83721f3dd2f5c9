/// The show/hide decisions of ``OfflineIndicator`` as a value: observations and the passing of
/// time in, a decision out. Time is a `Duration` since any fixed start, so the machine needs no
/// clock and is tested with tables.
package struct OfflineIndicatorMachine: Sendable, Hashable {
    /// What the indicator should do now.
    package enum Decision: Sendable, Hashable {
        case show
        case hide
    }

    package let policy: OfflineIndicatorPolicy
    /// Whether the indicator is up.
    package private(set) var isShowing = false
    /// The last thing observed: offline or not.
    private var offline = false
    /// While offline and not yet shown: when the grace period ends.
    private var showAt: Duration?
    /// While shown: when it went up.
    private var shownAt: Duration = .zero

    package init(policy: OfflineIndicatorPolicy) { self.policy = policy }

    /// When ``advance(to:)`` may next decide something, if anything is pending.
    package var deadline: Duration? {
        if let showAt { return showAt }
        if isShowing && !offline { return shownAt + policy.minimumDisplayTime }
        return nil
    }

    /// The network is (or is not) offline at `now`.
    package mutating func observe(offline: Bool, at now: Duration) -> Decision? {
        self.offline = offline
        if offline {
            if !isShowing && showAt == nil { showAt = now + policy.gracePeriod }
        } else {
            showAt = nil // a blip shorter than the grace period: never shown
        }
        return advance(to: now)
    }

    /// Time has passed: a grace period or a minimum display time may have ended.
    package mutating func advance(to now: Duration) -> Decision? {
        if let showAt, now >= showAt {
            self.showAt = nil
            isShowing = true
            shownAt = now
            return .show
        }
        if isShowing && !offline && now >= shownAt + policy.minimumDisplayTime {
            isShowing = false
            return .hide
        }
        return nil
    }
}
