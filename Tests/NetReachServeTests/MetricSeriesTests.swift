import NetReachServe
import NetReachSystem
import NetReachTestSupport
import Prometheus
import Testing

/// `MetricSeries.replace` against what the registry exports: a group holds exactly the series it
/// was last given, with their latest values, whether the call changed values only (kept gauges)
/// or the set of series (gauges made and unregistered).
@Suite("metric series")
struct MetricSeriesTests {
    private func lines(_ registry: PrometheusCollectorRegistry) -> Set<String> {
        Set(registry.emitToString().split(separator: "\n").map(String.init).filter { !$0.hasPrefix("#") })
    }

    private func up(_ interface: String, _ value: Double) -> MetricSeries.Sample {
        .init(name: "netreach_interface_up", labels: [("namespace", "lab"), ("interface", interface)], value: value)
    }

    /// The lines `/metrics` shows for exactly these interfaces' `up(...)` series.
    private func exported(_ values: [String: Double]) -> Set<String> {
        Set(values.map { #"netreach_interface_up{namespace="lab",interface="\#($0)"} \#($1)"# })
    }

    @Test func theSameSeriesWithNewValuesAreUpdatedInPlace() {
        let registry = PrometheusCollectorRegistry()
        var series = MetricSeries(registry: registry)
        series.replace(group: "interfaces/lab", with: [up("eth0", 1), up("wlan0", 0)])
        series.replace(group: "interfaces/lab", with: [up("eth0", 0), up("wlan0", 0)])
        series.replace(group: "interfaces/lab", with: [up("eth0", 0), up("wlan0", 1)])
        #expect(lines(registry) == exported(["eth0": 0.0, "wlan0": 1.0]))
    }

    @Test func aSeriesNoLongerGivenIsUnregisteredAndANewOneRegistered() {
        let registry = PrometheusCollectorRegistry()
        var series = MetricSeries(registry: registry)
        series.replace(group: "interfaces/lab", with: [up("eth0", 1), up("wlan0", 1)])
        // The same count, one series changed: not the in-place case.
        series.replace(group: "interfaces/lab", with: [up("eth0", 1), up("usb0", 0)])
        #expect(
            lines(registry) == exported(["eth0": 1.0, "usb0": 0.0]))
        // Another order of the same series, then fewer.
        series.replace(group: "interfaces/lab", with: [up("usb0", 1), up("eth0", 0)])
        #expect(
            lines(registry) == exported(["eth0": 0.0, "usb0": 1.0]))
        series.replace(group: "interfaces/lab", with: [up("usb0", 1)])
        #expect(lines(registry) == exported(["usb0": 1.0]))
        series.replace(group: "interfaces/lab", with: [])
        #expect(lines(registry).isEmpty)
        // A group emptied is gone: giving it series again registers them afresh.
        series.replace(group: "interfaces/lab", with: [up("eth0", 1)])
        #expect(lines(registry) == exported(["eth0": 1.0]))
    }

    @Test func oneSeriesGivenTwiceKeepsTheLastValueAndIsRemovedOnce() {
        let registry = PrometheusCollectorRegistry()
        var series = MetricSeries(registry: registry)
        series.replace(group: "interfaces/lab", with: [up("eth0", 1), up("eth0", 0)])
        #expect(lines(registry) == exported(["eth0": 0.0]))
        series.replace(group: "interfaces/lab", with: [up("eth0", 0), up("eth0", 1)])
        #expect(lines(registry) == exported(["eth0": 1.0]))
        series.replace(group: "other", with: [up("wlan0", 1)])
        series.remove(group: "interfaces/lab")
        #expect(lines(registry) == exported(["wlan0": 1.0]))
    }

    @Test func groupsAreIndependent() {
        let registry = PrometheusCollectorRegistry()
        var series = MetricSeries(registry: registry)
        series.replace(group: "a", with: [up("eth0", 1)])
        series.replace(group: "b", with: [up("wlan0", 1)])
        series.replace(group: "a", with: [])
        #expect(lines(registry) == exported(["wlan0": 1.0]))
    }
}

/// `MetricSeries.match`, which decides which gauges a group keeps, against its promise on many
/// pseudo-random groups: lists changed by a few series (the side-by-side walk), reordered, with
/// series given twice, and long enough to be matched through keys.
@Suite("metric series matching", .offPool)
struct MetricSeriesMatchingTests {
    private static func sample(_ series: Int, value: Double = 1) -> MetricSeries.Sample {
        // Few names, so that most series differ by their labels only.
        .init(
            name: "netreach_test_\(series % 3)", labels: [("namespace", "lab"), ("series", "\(series / 3)")],
            value: value)
    }

    /// A new list from `old`: a few series removed, added or given twice, sometimes all shuffled.
    private static func changed(_ old: [Int], using random: inout SeededRandom, universe: Int) -> [Int] {
        var new = old
        for _ in 0..<Int.random(in: 0...3, using: &random) where !new.isEmpty {
            new.remove(at: Int.random(in: new.indices, using: &random))
        }
        for _ in 0..<Int.random(in: 0...3, using: &random) {
            new.insert(Int.random(in: 0..<universe, using: &random), at: Int.random(in: 0...new.count, using: &random))
        }
        if !new.isEmpty, Int.random(in: 0..<4, using: &random) == 0 {
            new.insert(
                new[Int.random(in: new.indices, using: &random)], at: Int.random(in: 0...new.count, using: &random))
        }
        if Int.random(in: 0..<5, using: &random) == 0 { new.shuffle(using: &random) }
        return new
    }

    /// Checks `found` for `new` against `old` (series numbers); returns what is wrong.
    private static func problems(_ found: [MetricSeries.Source], new: [Int], old: [Int]) -> [String] {
        guard found.count == new.count else { return ["\(found.count) sources for \(new.count) samples"] }
        var problems: [String] = []
        // Which gauge each sample ends up with: an old series' (one gauge per series), or the one
        // made for a sample.
        var gauge: [String] = []
        for (index, source) in found.enumerated() {
            switch source {
            case .old(let at):
                // Two samples may take one old sample: the same series given twice, one gauge.
                if !old.indices.contains(at) || old[at] != new[index] {
                    problems.append("sample \(index) (series \(new[index])) took old \(at)")
                }
                gauge.append("old \(new[index])")
            case .earlier(let earlier):
                if !(0..<index).contains(earlier) || found[earlier] != .new || new[earlier] != new[index] {
                    problems.append("sample \(index) shares the gauge of \(earlier)")
                }
                gauge.append(gauge.indices.contains(earlier) ? gauge[earlier] : "?")
            case .new:
                gauge.append("new \(index)")
            }
        }
        var gaugeOfSeries: [Int: String] = [:]
        for (index, series) in new.enumerated() {
            if let other = gaugeOfSeries[series], other != gauge[index] {
                problems.append("series \(series) has two gauges: \(other), \(gauge[index])")
            }
            gaugeOfSeries[series] = gauge[index]
            if old.contains(series), !gauge[index].hasPrefix("old") {
                problems.append("series \(series) was kept but got a new gauge")
            }
        }
        return problems
    }

    @Test func everySeriesKeptKeepsItsGaugeAndEachSeriesHasOne() {
        var random = SeededRandom(seed: 24)
        var checked = 0
        // Short groups (found one by one after the walk) and long ones (through keys when much moved).
        for (rounds, length) in [(400, 25), (60, 300)] {
            for _ in 0..<rounds {
                let universe = length * 2
                var old = (0..<Int.random(in: 0...length, using: &random)).map { _ in
                    Int.random(in: 0..<universe, using: &random)
                }
                // A group as the series made it: each series once, in a kept order.
                old = Array(Set(old)).sorted()
                let new = Self.changed(old, using: &random, universe: universe)
                let found = MetricSeries.match(new.map { Self.sample($0) }, among: old.map { Self.sample($0) })
                let problems = Self.problems(found, new: new, old: old)
                #expect(problems.isEmpty, "old \(old), new \(new): \(problems.prefix(5))")
                checked += 1
            }
        }
        #expect(checked == 460)
    }

    @Test func aSeriesAddedAtTheEndIsFoundByTheWalk() {
        let old = (0..<20).map { Self.sample($0) }
        let found = MetricSeries.match(old + [Self.sample(99)], among: old)
        #expect(found == (0..<20).map { .old($0) } + [.new])
        // One removed in the middle: the rest keep their gauges.
        let fewer = Array(old[..<7] + old[8...])
        #expect(MetricSeries.match(fewer, among: old) == (0..<20).filter { $0 != 7 }.map { .old($0) })
    }

    @Test func theRegistryHoldsExactlyTheLastGivenSeriesAfterEveryReplace() {
        let registry = PrometheusCollectorRegistry()
        var series = MetricSeries(registry: registry)
        var random = SeededRandom(seed: 7)
        var current: [Int] = []
        for round in 0..<300 {
            // Every 50 rounds a long group, which a reorder sends through keys.
            let universe = round % 50 == 49 ? 400 : 30
            if round % 50 == 49 { current = Array(0..<200) }
            current = Self.changed(current, using: &random, universe: universe)
            let values = current.map { _ in Double(Int.random(in: 0...9, using: &random)) }
            series.replace(
                group: "g", with: zip(current, values).map { Self.sample($0, value: $1) })
            // The last value given for each series, as the registry prints it.
            var expected: [String: String] = [:]
            for (number, value) in zip(current, values) {
                let name = "netreach_test_\(number % 3)"
                expected[#"\#(name){namespace="lab",series="\#(number / 3)"}"#] = "\(value)"
            }
            let lines = registry.emitToString().split(separator: "\n").filter { !$0.hasPrefix("#") }
            var exported: [String: String] = [:]
            for line in lines {
                let parts = line.split(separator: " ")
                exported[String(parts[0])] = parts.count > 1 ? String(parts[1]) : ""
            }
            #expect(exported == expected, "round \(round)")
            if exported != expected { break }
        }
    }
}
