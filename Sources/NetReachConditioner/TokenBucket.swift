/// The credit of one direction's wire, as the kernel's `tc tbf` keeps it: credit accrues at the
/// link's rate, up to a burst, and a slice leaves once there is credit for all of its bytes. A
/// pure value on a monotonic clock whose times are offsets (`Duration`) from any fixed start; the
/// caller passes the time in, so tests drive it with a fake clock.
///
/// Credit is kept against absolute time, never against when a timer ran: the bucket remembers
/// the point (`origin`) from which credit has accrued and how many bytes have been taken since,
/// so when a slice may leave is computed from the rate alone, and a run of slices comes out at
/// exactly the rate however late their timers fire.
///
/// Idle and busy differ, as they must for a shaper whose timers can be late by tens of
/// milliseconds (the kernel's are late by microseconds, so `tbf` need not care):
///
/// - While nothing waits, credit stops at `burst` bytes: bytes that come to an idle link take at
///   most a burst at once, then follow at the rate. Nothing is hoarded beyond it.
/// - While bytes wait, credit accrues on the schedule: a slice that waited since a time may
///   leave when the credit for it accrued after that time, however late the caller asks. So a
///   timer that fires 50 ms late finds 50 ms of slices due and sends them, instead of leaving the
///   link idle for those 50 ms.
///
/// ```swift
/// var bucket = TokenBucket()
/// // 1448 bytes at 100 kB/s with a one-slice burst, waiting since 0: they may leave at once.
/// bucket.take(1_448, rate: 100_000, burst: 1_448, waitingSince: .zero)   // .zero
/// bucket.take(1_448, rate: 100_000, burst: 1_448, waitingSince: .zero)   // 14.48 ms
/// ```
struct TokenBucket: Sendable, Hashable {
    /// The time from which credit has accrued at `rate` for the bytes taken since.
    private(set) var origin = Duration.zero
    /// Bytes taken since `origin`.
    private(set) var taken = 0
    /// The rate `origin` and `taken` count in; a new rate starts a new count where the old ends.
    private(set) var rate = 0

    init() {}

    /// When the credit taken so far has accrued: the bucket is empty then, and fills after it.
    var emptyAt: Duration { origin + Self.time(taken, rate: rate) }

    /// Takes the credit for `count` bytes that have waited since `waitingSince`, on a link of
    /// `rate` bytes a second whose bucket holds `burst` bytes, and returns when they may leave:
    /// once there is credit for all of them, and not before they waited. Slices are taken in the
    /// order they leave.
    ///
    /// When the bucket was empty before `waitingSince - burst / rate`, the link was idle with a
    /// full bucket when they came: credit counts from then, so they have at most `burst` bytes
    /// of it. Otherwise credit counts from where the last slice left it, whenever this is called.
    mutating func take(_ count: Int, rate: Int, burst: Int, waitingSince: Duration) -> Duration {
        let rate = max(1, rate)
        let fullSince = waitingSince - Self.time(max(0, burst), rate: rate)
        if rate != self.rate {
            // The first slice finds a full bucket; at a new rate, the credit taken at the old one
            // stays taken and the new rate counts from where it ends.
            origin = self.rate == 0 ? fullSince : emptyAt
            taken = 0
            self.rate = rate
        }
        if emptyAt < fullSince {
            origin = fullSince
            taken = 0
        }
        taken += max(0, count)
        return max(waitingSince, emptyAt)
    }

    /// The time `count` bytes take at `rate` bytes a second, rounded up to the nanosecond: exact
    /// (the product is 128-bit) for any time up to `Int64`'s 292 years, so the time of many
    /// slices taken together never drifts from the rate.
    static func time(_ count: Int, rate: Int) -> Duration {
        guard count > 0, rate > 0 else { return .zero }
        let product = count.multipliedFullWidth(by: 1_000_000_000)
        let (quotient, remainder) = rate.dividingFullWidth(product)
        return .nanoseconds(Int64(quotient) + (remainder > 0 ? 1 : 0))
    }
}
