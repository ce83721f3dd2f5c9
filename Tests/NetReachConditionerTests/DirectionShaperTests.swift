import Testing

@testable import NetReachConditioner

@Suite("DirectionShaper: when bytes read at a time are delivered")
struct DirectionShaperTests {
    static func shaper(
        _ conditions: DirectionConditions, roundTrip: Duration = .zero, seed: UInt64 = 7
    ) -> DirectionShaper {
        DirectionShaper(conditions, roundTripDelay: roundTrip, seed: seed)
    }

    @Test("No conditions: everything at once, at the time it was read")
    func transparent() {
        var shaper = Self.shaper(.none)
        #expect(shaper.isTransparent)
        #expect(shaper.schedule(65_536, at: .milliseconds(3)) == [.init(at: .milliseconds(3), count: 65_536)])
        #expect(shaper.schedule(0, at: .milliseconds(4)).isEmpty)
    }

    @Test("Delay alone: the whole read, delay later")
    func delay() {
        var shaper = Self.shaper(.init(delay: .milliseconds(100)))
        #expect(shaper.schedule(1_000, at: .milliseconds(5)) == [.init(at: .milliseconds(105), count: 1_000)])
    }

    @Test(
        "Bandwidth: 10 kB at 100 kB/s leave in segment-sized slices, the first at once (the burst), the rest at the rate; a second read queues behind"
    )
    func bandwidth() {
        var shaper = Self.shaper(.init(bandwidth: 100_000))
        let first = shaper.schedule(10_000, at: .zero)
        #expect(first.map(\.count).reduce(0, +) == 10_000)
        #expect(first.first == .init(at: .zero, count: 1_448), "an idle link's burst: one slice")
        #expect(first.dropFirst().first == .init(at: .microseconds(14_480), count: 1_448))
        #expect(first.last?.at == .microseconds(85_520), "(10000 - 1448) bytes at 100 kB/s")
        let second = shaper.schedule(10_000, at: .zero)
        #expect(second.last?.at == .microseconds(185_520), "behind the first read's bytes")
        // After the wire is idle, a read starts at once, with no more than one slice of credit.
        let later = shaper.schedule(2_000, at: .seconds(1))
        #expect(
            later == [.init(at: .seconds(1), count: 1_448), .init(at: .seconds(1) + .microseconds(5_520), count: 552)])
    }

    @Test("Slices are about 10 ms of a fast link")
    func slicesOfFastLinks() {
        var shaper = Self.shaper(.init(bandwidth: 5_000_000))
        let parts = shaper.schedule(200_000, at: .zero)
        #expect(parts.count == 4)
        #expect(parts.map(\.count) == [50_000, 50_000, 50_000, 50_000])
        #expect(parts.map(\.at) == [.zero, .milliseconds(10), .milliseconds(20), .milliseconds(30)])
    }

    @Test("Jitter stays within its bounds, never reorders, and repeats with the same seed")
    func jitter() {
        let conditions = DirectionConditions(delay: .milliseconds(50), jitter: .milliseconds(20))
        var a = Self.shaper(conditions, seed: 42)
        var b = Self.shaper(conditions, seed: 42)
        var c = Self.shaper(conditions, seed: 43)
        var last = Duration.zero
        var timesA: [Duration] = []
        var timesC: [Duration] = []
        for step in 0..<500 {
            let now = Duration.milliseconds(step)
            let part = a.schedule(100, at: now)
            #expect(part == b.schedule(100, at: now))
            timesC.append(c.schedule(100, at: now)[0].at)
            let at = part[0].at
            timesA.append(at)
            #expect(at >= last, "in order")
            #expect(at >= now + .milliseconds(30))
            #expect(at <= max(last, now + .milliseconds(70)))
            last = at
        }
        #expect(timesA != timesC, "another seed draws other delays")
    }

    @Test("Total loss delivers nothing; partial loss costs whole retransmission timeouts, in order")
    func loss() {
        var lost = Self.shaper(.init(loss: 1))
        #expect(lost.schedule(1_000, at: .zero).isEmpty)
        var lossy = Self.shaper(.init(delay: .milliseconds(10), loss: 0.3), roundTrip: .milliseconds(20), seed: 3)
        var penalties: Set<Duration> = []
        var last = Duration.zero
        for step in 0..<300 {
            let now = Duration.seconds(step) // far apart: no part waits for another
            let at = lossy.schedule(1_000, at: now)[0].at
            #expect(at >= last)
            last = at
            penalties.insert(at - now - .milliseconds(10))
        }
        #expect(penalties.contains(.zero))
        #expect(penalties.contains(.milliseconds(200)), "one loss: Linux's minimum retransmission timeout")
        #expect(penalties.allSatisfy { $0.nanoseconds % Duration.milliseconds(200).nanoseconds == 0 })
    }

    @Test("New conditions apply to later reads only")
    func change() {
        var shaper = Self.shaper(.init(delay: .milliseconds(100)))
        let before = shaper.schedule(10, at: .zero)
        shaper.change(to: .init(delay: .milliseconds(10)), roundTripDelay: .zero)
        let after = shaper.schedule(10, at: .milliseconds(1))
        #expect(before[0].at == .milliseconds(100))
        #expect(after[0].at == .milliseconds(100), "not before what was sent earlier: in order")
        #expect(shaper.schedule(10, at: .milliseconds(200))[0].at == .milliseconds(210))
    }

    @Test("A slicer cuts parts into slices of average ± variation bytes, delay apart")
    func slicer() {
        var random = Self.shaper(.none, seed: 9)
        var last: Duration?
        let slicer = (average: 100, variation: 20, delay: Duration.milliseconds(2))
        let parts = ConditionedConnection.slice(
            [.init(at: .milliseconds(5), count: 1_000)], slicer, after: &last, random: &random)
        #expect(parts.map(\.count).reduce(0, +) == 1_000)
        #expect(parts.dropLast().allSatisfy { (80...120).contains($0.count) })
        #expect(parts.first?.at == .milliseconds(5))
        for (a, b) in zip(parts, parts.dropFirst()) { #expect(b.at - a.at == .milliseconds(2)) }
        #expect(last == parts.last?.at)

        // A second read at once queues behind the first's slices: the slicer sets the rate.
        let next = ConditionedConnection.slice(
            [.init(at: .milliseconds(6), count: 100)], slicer, after: &last, random: &random)
        #expect(next.first?.at == (parts.last?.at ?? .zero) + .milliseconds(2))
        // A read long after starts when it is read.
        let later = ConditionedConnection.slice(
            [.init(at: .seconds(1), count: 10)], slicer, after: &last, random: &random)
        #expect(later.first?.at == .seconds(1))
    }
}
