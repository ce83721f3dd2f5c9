import NetReachSystem

/// The schedule of one direction of a conditioned link: for bytes read at a time, when each part
/// of them is delivered. A pure value (the relay that owns the sockets only follows its answers),
/// tested with tables.
///
/// The model is a bottleneck link shaped as the kernel's `tc tbf` shapes one: bytes leave at
/// `bandwidth` as a ``TokenBucket`` lets them (an idle link sends up to ``burst(bandwidth:)`` at
/// once, then the rate holds, so a large read takes about `size / bandwidth` to pass), then spend
/// `delay` (± `jitter`) on the link. Large reads are cut into slices of about 10 ms of the link's
/// time so bytes arrive as they would, not in bursts. Delivery is in order, as TCP's is: a part
/// never overtakes the one before it. Times are offsets from the link's start; they come from the
/// schedule, not from when timers fired, so a late timer never slows the link down.
struct DirectionShaper: Sendable {
    /// A part of a read: this many bytes, delivered at this time.
    struct Part: Sendable, Hashable {
        var at: Duration
        var count: Int
    }

    /// TCP's segment payload on Ethernet; the unit in which packets are lost.
    static let segmentSize = 1448
    /// Linux's minimum retransmission timeout: what a lost segment costs at least.
    static let minimumRetransmissionTimeout = Duration.milliseconds(200)

    private(set) var conditions: DirectionConditions
    /// The round trip's delay (both directions), for the retransmission timeout.
    private var roundTripDelay: Duration
    private var random: SeededRandom
    /// The credit of the wire the bytes leave on.
    private var wire = TokenBucket()
    /// The last part's delivery time: later parts never come before it.
    private var lastDelivery = Duration.zero

    init(_ conditions: DirectionConditions, roundTripDelay: Duration, seed: UInt64) {
        self.conditions = conditions
        self.roundTripDelay = roundTripDelay
        random = SeededRandom(seed: seed)
    }

    /// Takes new conditions for bytes read from now on; what was scheduled stays scheduled.
    mutating func change(to conditions: DirectionConditions, roundTripDelay: Duration) {
        self.conditions = conditions
        self.roundTripDelay = roundTripDelay
    }

    /// Whether nothing is done to the bytes (the relay then writes them at once).
    var isTransparent: Bool { conditions.isNone }

    /// When the `count` bytes read at `now` are delivered, in parts. Empty when they never are
    /// (all packets lost).
    mutating func schedule(_ count: Int, at now: Duration) -> [Part] {
        guard count > 0 else { return [] }
        if conditions.loss >= 1 { return [] }
        var parts: [Part] = []
        var remaining = count
        let slice = sliceSize
        while remaining > 0 {
            let size = min(slice, remaining)
            remaining -= size
            let sent: Duration
            if let bandwidth = conditions.bandwidth, bandwidth > 0 {
                sent = wire.take(size, rate: bandwidth, burst: Self.burst(bandwidth: bandwidth), waitingSince: now)
            } else {
                sent = now
            }
            let delivery = delivery(ofSliceSentAt: sent, size: size)
            if let last = parts.last, last.at == delivery {
                parts[parts.count - 1].count += size
            } else {
                parts.append(Part(at: delivery, count: size))
            }
        }
        return parts
    }

    /// When a slice of `size` bytes that left at `sent` arrives: after the delay,
    /// jitter and what its lost packets cost, and never before the slice ahead of it.
    mutating func delivery(ofSliceSentAt sent: Duration, size: Int) -> Duration {
        var delivery = sent + conditions.delay + drawJitter() + lossPenalty(size)
        if delivery < lastDelivery { delivery = lastDelivery }
        lastDelivery = delivery
        return delivery
    }

    /// A slicer's next slice size: `average` ± `variation`, at least one byte.
    mutating func drawSliceSize(average: Int, variation: Int) -> Int {
        guard variation > 0 else { return max(1, average) }
        return max(1, average + Int.random(in: -variation...variation, using: &random))
    }

    /// About 10 ms of the link's time (at least a segment); everything at once without a bandwidth.
    var sliceSize: Int {
        guard let bandwidth = conditions.bandwidth, bandwidth > 0 else { return Int.max }
        return Self.sliceSize(bandwidth: bandwidth)
    }

    /// About 10 ms of a link of `bandwidth` bytes a second, at least a segment.
    static func sliceSize(bandwidth: Int) -> Int {
        max(segmentSize, bandwidth / 100)
    }

    /// The credit an idle link of `bandwidth` has (`tc tbf`'s `burst`): one slice, about 10 ms of
    /// the link's time and at least a segment. `tbf` needs a burst of at least what one timer
    /// tick lets through (its man page: the rate divided by `HZ`), and a slice is what one of our
    /// timers lets through. It only shapes a link that was idle (a late timer on a busy one is made
    /// up from the schedule, see ``TokenBucket``), so it is kept that small: an idle link's first
    /// slice leaves at once instead of after its own 10 ms, and no larger burst ever does.
    static func burst(bandwidth: Int) -> Int {
        sliceSize(bandwidth: bandwidth)
    }

    private mutating func drawJitter() -> Duration {
        guard conditions.jitter > .zero else { return .zero }
        let range = conditions.jitter.nanoseconds
        let offset = Int64.random(in: -range...range, using: &random)
        // Never earlier than no delay at all.
        return max(.nanoseconds(offset), .zero - conditions.delay)
    }

    /// The retransmissions lost packets of this slice cost: each loss, one timeout (a retransmission
    /// that is lost again, another).
    private mutating func lossPenalty(_ size: Int) -> Duration {
        guard conditions.loss > 0 else { return .zero }
        let timeout = max(Self.minimumRetransmissionTimeout, roundTripDelay)
        var penalty = Duration.zero
        let segments = (size + Self.segmentSize - 1) / Self.segmentSize
        for _ in 0..<segments {
            while Double.random(in: 0..<1, using: &random) < conditions.loss { penalty += timeout }
        }
        return penalty
    }
}

extension Duration {
    /// The whole duration in nanoseconds (saturating).
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return seconds < 0 ? .min : .max }
        return scaled &+ attoseconds / 1_000_000_000
    }
}
