import CoreMetrics
import Prometheus

/// The series `serve` exports, through swift-metrics into a Prometheus registry, kept in groups so
/// that a series whose labels no longer describe anything (a route through another interface, an
/// interface that vanished, a namespace that is gone) is unregistered, not left stale.
///
/// A group is what one fact owns: one destination's path in one namespace, one namespace's
/// interfaces. ``replace(group:with:)`` sets the group's series to exactly the ones given.
/// Not thread-safe: its owner calls it under a lock.
///
/// ```swift
/// var series = MetricSeries(registry: registry)
/// series.replace(group: "interfaces/lab", with: [
///     .init(name: "netreach_interface_up", labels: [("namespace", "lab"), ("interface", "eth0"), ("type", "wiredEthernet")], value: 1),
/// ])
/// series.replace(group: "interfaces/lab", with: [])   // eth0 vanished: its series is gone
/// ```
package struct MetricSeries {
    /// One gauge's name, labels and value.
    package struct Sample: Sendable {
        package var name: String
        package var labels: [(String, String)]
        package var value: Double

        package init(name: String, labels: [(String, String)], value: Double) {
            self.name = name
            self.labels = labels
            self.value = value
        }

        /// Whether `other` is the same series (name and labels, in order), whatever its value.
        func namesTheSameSeries(as other: Sample) -> Bool {
            name == other.name && labels.count == other.labels.count
                && zip(labels, other.labels).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        }
    }

    private struct Key: Hashable {
        var name: String
        /// Each label's name then its value, in the order given (fixed per metric).
        var labels: [String]

        init(_ name: String, _ labels: [(String, String)]) {
            self.name = name
            self.labels = []
            self.labels.reserveCapacity(labels.count * 2)
            for (label, value) in labels {
                self.labels.append(label)
                self.labels.append(value)
            }
        }

        init(_ sample: Sample) { self.init(sample.name, sample.labels) }
    }

    /// One group's gauges: the samples last given, in their order, each with its gauge.
    private struct GaugeGroup {
        var samples: [Sample]
        var gauges: [CoreMetrics.Gauge]
        /// Whether a series is given more than once (one gauge for several samples).
        var hasTwins: Bool
    }

    private let factory: PrometheusMetricsFactory
    private var gauges: [String: GaugeGroup] = [:]
    private var counters: [String: [Key: CoreMetrics.Counter]] = [:]
    private var timers: [String: [Key: CoreMetrics.Timer]] = [:]

    package init(registry: PrometheusCollectorRegistry) {
        var factory = PrometheusMetricsFactory(registry: registry)
        // Our names and labels are valid already; the default sanitizer would rewrite nothing.
        factory.nameAndLabelSanitizer = { name, labels in (name, labels) }
        self.factory = factory
    }

    /// Sets `group`'s gauges to `samples`, unregistering the ones it had that are not among them.
    package mutating func replace(group: String, with samples: [Sample]) {
        // Most calls (a path recorded again, a change of status) name the same series in the same
        // order as the last one: only the values that moved are recorded, nothing is rebuilt.
        if var kept = gauges[group], kept.samples.count == samples.count,
            zip(kept.samples, samples).allSatisfy({ $0.namesTheSameSeries(as: $1) })
        {
            // A series given twice shows the last value given: every one of its samples is
            // recorded again, in order, not only those that moved.
            for index in samples.indices where kept.hasTwins || kept.samples[index].value != samples[index].value {
                kept.gauges[index].record(samples[index].value)
                kept.samples[index].value = samples[index].value
            }
            gauges[group] = kept
            return
        }
        let kept = gauges[group] ?? GaugeGroup(samples: [], gauges: [], hasTwins: false)
        let found = Self.match(samples, among: kept.samples)
        var ordered: [CoreMetrics.Gauge] = []
        ordered.reserveCapacity(samples.count)
        for (sample, source) in zip(samples, found) {
            let gauge: CoreMetrics.Gauge
            switch source {
            case .old(let index): gauge = kept.gauges[index]
            case .earlier(let index): gauge = ordered[index]
            case .new: gauge = CoreMetrics.Gauge(label: sample.name, dimensions: sample.labels, factory: factory)
            }
            gauge.record(sample.value)
            ordered.append(gauge)
        }
        // What no sample took is unregistered: an old series given twice was one gauge, taken once.
        var taken = Set<ObjectIdentifier>()
        for source in found { if case .old(let index) = source { taken.insert(ObjectIdentifier(kept.gauges[index])) } }
        var destroyed = Set<ObjectIdentifier>()
        for gauge in kept.gauges where !taken.contains(ObjectIdentifier(gauge)) {
            if destroyed.insert(ObjectIdentifier(gauge)).inserted { gauge.destroy() }
        }
        let hasTwins = Set(ordered.map(ObjectIdentifier.init)).count < ordered.count
        gauges[group] = samples.isEmpty ? nil : GaugeGroup(samples: samples, gauges: ordered, hasTwins: hasTwins)
    }

    /// Where a sample's gauge comes from.
    package enum Source: Equatable {
        /// The gauge of the old sample at this index: the same series.
        case old(Int)
        /// The gauge made for the earlier sample at this index (the same series given twice).
        case earlier(Int)
        /// A gauge registered now.
        case new
    }

    /// For each of `samples`, where its gauge comes from: the same series among `old` (each old
    /// sample taken once), else a new gauge; a series given twice has one gauge.
    ///
    /// A group's series keep their order from call to call and change by a few added or removed
    /// (a route, an interface), so both lists are first walked side by side, comparing series
    /// without hashing anything. The samples the walk leaves are looked for one by one when they
    /// are few, and through keys when they are many (a group given in another order).
    package static func match(_ samples: [Sample], among old: [Sample]) -> [Source] {
        var found = [Source?](repeating: nil, count: samples.count)
        var taken = [Bool](repeating: false, count: old.count)
        // The next old series, or one a few places on (series removed before it).
        var next = 0
        for (index, sample) in samples.enumerated() where next < old.count {
            guard let at = (next..<min(old.count, next + 4)).first(where: { old[$0].namesTheSameSeries(as: sample) })
            else { continue }
            found[index] = .old(at)
            taken[at] = true
            next = at + 1
        }
        let left = samples.indices.filter { found[$0] == nil }
        if left.count * (samples.count + old.count) <= 4096 {
            for index in left {
                let sample = samples[index]
                // A series given twice: the gauge the walk found for it, or the one made for its
                // first sample (left before this one, so already decided).
                if let twin = samples.indices.first(where: {
                    $0 != index && found[$0] != nil && samples[$0].namesTheSameSeries(as: sample)
                }) {
                    found[index] = found[twin] == .new ? .earlier(twin) : found[twin]
                } else if let at = old.indices.first(where: { !taken[$0] && old[$0].namesTheSameSeries(as: sample) }) {
                    found[index] = .old(at)
                    taken[at] = true
                } else {
                    found[index] = .new
                }
            }
        } else {
            var bySeries: [Key: Source] = [:]
            for index in samples.indices {
                guard let source = found[index] else { continue }
                let key = Key(samples[index])
                if bySeries[key] == nil { bySeries[key] = source }
            }
            var untaken: [Key: Int] = [:]
            for index in old.indices.reversed() where !taken[index] { untaken[Key(old[index])] = index }
            for index in left {
                let key = Key(samples[index])
                if let source = bySeries[key] {
                    found[index] = source
                } else if let at = untaken.removeValue(forKey: key) {
                    found[index] = .old(at)
                    bySeries[key] = .old(at)
                } else {
                    found[index] = .new
                    bySeries[key] = .earlier(index)
                }
            }
        }
        return found.map { $0 ?? .new }
    }

    /// Adds `by` to the counter `name` with `labels` in `group`, registering it at 0 first if new.
    package mutating func increment(group: String, name: String, labels: [(String, String)], by amount: Int64) {
        let key = Key(name, labels)
        let counter =
            counters[group, default: [:]][key]
            ?? CoreMetrics.Counter(label: name, dimensions: labels, factory: factory)
        counters[group, default: [:]][key] = counter
        if amount > 0 { counter.increment(by: amount) }
    }

    /// Records `duration` in the histogram `name` with `labels` in `group` (Prometheus's default
    /// buckets, 5 ms to 10 s).
    package mutating func record(_ duration: Duration, group: String, name: String, labels: [(String, String)]) {
        let key = Key(name, labels)
        let timer =
            timers[group, default: [:]][key]
            ?? CoreMetrics.Timer(label: name, dimensions: labels, factory: factory)
        timers[group, default: [:]][key] = timer
        timer.recordNanoseconds(
            duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000)
    }

    /// Unregisters every series of `group`.
    package mutating func remove(group: String) {
        // A gauge shared by two samples (the same series given twice) is destroyed once.
        var destroyed = Set<ObjectIdentifier>()
        for gauge in gauges.removeValue(forKey: group)?.gauges ?? [] {
            if destroyed.insert(ObjectIdentifier(gauge)).inserted { gauge.destroy() }
        }
        counters.removeValue(forKey: group)?.values.forEach { $0.destroy() }
        timers.removeValue(forKey: group)?.values.forEach { $0.destroy() }
    }
}
