/// The level one family shows, from probe rounds and path facts, without flapping: leaving `full`
/// takes `failedRoundsToLeaveFull` consecutive rounds that are not full, spread over at least
/// `dwell`; anything else (returning to `full`, a first verdict, a portal turning into a limited
/// network) takes one round. Path facts (`none`, `local`) count at once: they are the kernel's
/// answer, not a probe's.
struct ConnectivityHysteresis: Sendable, Hashable {
    var failedRoundsToLeaveFull: Int
    var dwell: Duration
    /// The level shown.
    private(set) var level: ConnectivityLevel = .unknown
    /// Rounds that were not full since the last full one, while `full` is still shown.
    private(set) var failedRounds = 0
    private var firstFailure: Duration?

    init(failedRoundsToLeaveFull: Int = 2, dwell: Duration = .seconds(10)) {
        self.failedRoundsToLeaveFull = max(1, failedRoundsToLeaveFull)
        self.dwell = dwell
    }

    /// A round's level at `now`; returns the level shown after it.
    mutating func round(_ verdict: ConnectivityLevel, at now: Duration) -> ConnectivityLevel {
        if verdict == .full || level != .full {
            failedRounds = 0
            firstFailure = nil
            level = verdict
            return level
        }
        failedRounds += 1
        let first = firstFailure ?? now
        firstFailure = first
        if failedRounds >= failedRoundsToLeaveFull && now - first >= dwell {
            failedRounds = 0
            firstFailure = nil
            level = verdict
        }
        return level
    }

    /// A fact of the path (`none`, `local`) or a new network (`unknown`): shown at once.
    mutating func path(_ fact: ConnectivityLevel) -> ConnectivityLevel {
        failedRounds = 0
        firstFailure = nil
        level = fact
        return level
    }

    /// Whether `full` is shown but rounds are failing: the next round should come soon.
    var isDoubtingFull: Bool { level == .full && failedRounds > 0 }
}
