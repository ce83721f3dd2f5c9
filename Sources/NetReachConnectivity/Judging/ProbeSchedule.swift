/// When the next probe round is due: at once after a start or a path change; while not `full`,
/// after a back-off from `initialBackOff` doubling up to `maximumBackOff` (at most `interval`); while `full`, only every
/// `interval` if periodic probing was asked for (`periodicWhileFull`), else never. A successful
/// request through the network counts as a passing round and postpones the next one.
struct ProbeSchedule: Sendable, Hashable {
    var interval: Duration
    var initialBackOff: Duration
    var periodicWhileFull: Bool
    /// The longest back-off: how late a return to `full` can be seen.
    var maximumBackOff: Duration
    /// The back-off the next round that is not full will wait.
    private var backOff: Duration

    init(
        interval: Duration = .seconds(300), initialBackOff: Duration = .seconds(1), periodicWhileFull: Bool = false,
        maximumBackOff: Duration? = nil
    ) {
        self.interval = interval
        self.maximumBackOff = min(maximumBackOff ?? interval, interval)
        self.initialBackOff = min(initialBackOff, self.maximumBackOff)
        self.periodicWhileFull = periodicWhileFull
        backOff = self.initialBackOff
    }

    /// A start or a path change: probe now, and begin backing off from the start again.
    mutating func pathChanged(at now: Duration) -> Duration {
        backOff = initialBackOff
        return now
    }

    /// A round ended at `now` with `level` shown (`doubting`: full shown, but the round failed).
    /// Returns when the next round is due, or `nil` for none.
    mutating func roundEnded(showing level: ConnectivityLevel, doubting: Bool, at now: Duration) -> Duration? {
        if level == .full && !doubting {
            backOff = initialBackOff
            return periodicWhileFull ? now + interval : nil
        }
        let wait = backOff
        backOff = min(backOff * 2, maximumBackOff)
        return now + wait
    }

    /// A request through the network succeeded at `now`: as good as a passing round.
    mutating func evidenceOfFull(at now: Duration) -> Duration? {
        backOff = initialBackOff
        return periodicWhileFull ? now + interval : nil
    }
}
