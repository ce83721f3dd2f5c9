import NetReachSystem
import Testing

@testable import NetReachConditioner

/// The wire's credit with a fake clock: every time is passed in, so late timers are whatever the
/// test says they are.
@Suite("TokenBucket: when slices may leave, however late the timers")
struct TokenBucketTests {
    /// DSL's downstream: 2 Mbit/s, slices and burst of 2500 bytes (10 ms).
    static let rate = 250_000
    static let slice = 2_500

    /// Takes slices the way the connection does when its wire timer fires at `now` for the
    /// `deadline` it was armed for: every slice that may leave by `now` (they waited since the
    /// deadline), then one more, whose departure is the next deadline. Returns the departures.
    static func timerFires(
        _ bucket: inout TokenBucket, deadline: Duration, now: Duration, slice: Int = slice, rate: Int = rate
    ) -> [Duration] {
        var departures: [Duration] = []
        while true {
            let leaves = bucket.take(
                slice, rate: rate, burst: DirectionShaper.burst(bandwidth: rate), waitingSince: deadline)
            departures.append(leaves)
            if leaves > now { return departures }
        }
    }

    @Test("The burst is one slice: 10 ms of the link, at least a segment")
    func burstIsOneSlice() {
        #expect(DirectionShaper.burst(bandwidth: 250_000) == 2_500)
        #expect(DirectionShaper.burst(bandwidth: 5_000_000) == 50_000)
        #expect(DirectionShaper.burst(bandwidth: 25_000) == DirectionShaper.segmentSize, "edge: one segment")
    }

    @Test("An idle link sends its burst at once, then one slice per slice time")
    func idleLinkThenRate() {
        var bucket = TokenBucket()
        let since = Duration.seconds(5)
        let departures = (0..<4).map { _ in
            bucket.take(Self.slice, rate: Self.rate, burst: Self.slice, waitingSince: since)
        }
        #expect(departures == [since, since + .milliseconds(10), since + .milliseconds(20), since + .milliseconds(30)])
    }

    @Test("A timer that fires 50 ms late finds 50 ms of slices due and sends them: the schedule is the on-time one")
    func lateTimerSendsWhatIsDue() {
        var onTime = TokenBucket()
        var late = TokenBucket()
        // A read at 0 of more than the link carries in a second: the first slice leaves at once
        // (the burst), the next at 10 ms, when the first timer is armed.
        #expect(Self.timerFires(&onTime, deadline: .zero, now: .zero) == [.zero, .milliseconds(10)])
        #expect(Self.timerFires(&late, deadline: .zero, now: .zero) == [.zero, .milliseconds(10)])

        // On time: at 10 ms the next slice (20 ms), and so on.
        var onTimeDepartures: [Duration] = []
        var deadline = Duration.milliseconds(10)
        while deadline < .milliseconds(70) {
            let taken = Self.timerFires(&onTime, deadline: deadline, now: deadline)
            #expect(taken.count == 1, "one slice a timer when timers are on time")
            onTimeDepartures += taken
            deadline = taken.last ?? deadline
        }

        // Late: the 10 ms timer fires at 60 ms. The slices of 20, 30, 40, 50 and 60 ms are due and
        // go at once; the 70 ms one is the next deadline.
        let lateDepartures = Self.timerFires(&late, deadline: .milliseconds(10), now: .milliseconds(60))
        #expect(lateDepartures.filter { $0 <= .milliseconds(60) }.count == 5)
        #expect(lateDepartures == onTimeDepartures)
        #expect(late == onTime, "no credit lost to the late timer")
    }

    @Test("No credit is hoarded beyond the burst while the link is idle")
    func idleHoardsNoMoreThanTheBurst() {
        var bucket = TokenBucket()
        _ = Self.timerFires(&bucket, deadline: .zero, now: .zero)
        // Idle for ten seconds (1000 slices' worth of credit), then 20 slices at once.
        let since = Duration.seconds(10)
        var departures: [Duration] = []
        for _ in 0..<20 {
            departures.append(bucket.take(Self.slice, rate: Self.rate, burst: Self.slice, waitingSince: since))
        }
        #expect(departures.filter { $0 <= since }.count == 1, "only the burst leaves at once")
        for (index, leaves) in departures.enumerated() {
            #expect(leaves == since + .milliseconds(10 * index))
        }
        // A larger burst is what it says, no more.
        var bigger = TokenBucket()
        let burst = 4 * Self.slice
        let taken = (0..<8).map { _ in bigger.take(Self.slice, rate: Self.rate, burst: burst, waitingSince: since) }
        #expect(taken.filter { $0 <= since }.count == 4)
        #expect(taken.last == since + .milliseconds(40))
    }

    @Test("The rate is exact over a million slices, with timers late by up to 50 ms at random")
    func exactOverManySlices() {
        // 240 kbit/s and segment-sized slices: 1448 / 30000 s is 48.2666... ms, not a whole
        // number of nanoseconds, so rounding each slice would drift.
        let rate = 30_000
        let slice = DirectionShaper.segmentSize
        let burst = DirectionShaper.burst(bandwidth: rate)
        var bucket = TokenBucket()
        var generator = SeededRandom(seed: 11)
        var sent = 0
        var deadline = Duration.zero
        var now = Duration.zero
        var lastDeparture = Duration.zero
        while sent < 1_000_000 * slice {
            for leaves in Self.timerFires(&bucket, deadline: deadline, now: now, slice: slice, rate: rate) {
                sent += slice
                lastDeparture = leaves
            }
            deadline = lastDeparture
            now = deadline + .microseconds(Int64.random(in: 0...50_000, using: &generator))
        }
        // Every byte after the burst at exactly the rate: (sent - burst) / rate seconds, to the
        // nanosecond each of the two is rounded up to.
        let exact = Duration.nanoseconds(Int64((sent - burst) * 1_000_000_000 / rate))
        #expect(lastDeparture - exact >= .zero && lastDeparture - exact <= .nanoseconds(1), "\(lastDeparture - exact)")
    }

    @Test("A new rate counts from where the old rate's credit ends")
    func rateChange() {
        var bucket = TokenBucket()
        #expect(bucket.take(2_500, rate: 250_000, burst: 2_500, waitingSince: .zero) == .zero)
        #expect(bucket.take(2_500, rate: 250_000, burst: 2_500, waitingSince: .zero) == .milliseconds(10))
        // Ten times slower from here: the next slice's credit takes 100 ms from 10 ms.
        #expect(bucket.take(2_500, rate: 25_000, burst: 1_448, waitingSince: .zero) == .milliseconds(110))
        #expect(bucket.emptyAt == .milliseconds(110))
    }

    @Test("Times are exact to the nanosecond, rounded up, for any count")
    func exactTimes() {
        #expect(TokenBucket.time(1_448, rate: 30_000) == .nanoseconds(48_266_667))
        #expect(TokenBucket.time(3, rate: 3) == .seconds(1))
        #expect(TokenBucket.time(0, rate: 3) == .zero)
        // 1 TB at 1 kB/s: 10^9 s; count times 10^9 is beyond Int64, the result is not.
        #expect(TokenBucket.time(1_000_000_000_000, rate: 1_000) == .seconds(1_000_000_000 as Int64))
    }
}
