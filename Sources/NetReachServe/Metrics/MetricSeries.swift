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
        var labels: [String] // name=value pairs, in the order given (fixed per metric)

        init(_ name: String, _ labels: [(String, String)]) {
            self.name = name
            self.labels = labels.map { "\($0)=\($1)" }
        }
    }

    /// One group's gauges: the samples last given, in their order, each with its gauge.
    private struct GaugeGroup {
        var samples: [Sample]
        var gauges: [CoreMetrics.Gauge]
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
            for index in samples.indices where kept.samples[index].value != samples[index].value {
                kept.gauges[index].record(samples[index].value)
                kept.samples[index].value = samples[index].value
            }
            gauges[group] = kept
            return
        }
        var old: [Key: CoreMetrics.Gauge] = [:]
        if let kept = gauges[group] {
            for (sample, gauge) in zip(kept.samples, kept.gauges) { old[Key(sample.name, sample.labels)] = gauge }
        }
        var made: [Key: CoreMetrics.Gauge] = [:]
        var ordered: [CoreMetrics.Gauge] = []
        for sample in samples {
            let key = Key(sample.name, sample.labels)
            let gauge =
                made[key] ?? old.removeValue(forKey: key)
                ?? CoreMetrics.Gauge(label: sample.name, dimensions: sample.labels, factory: factory)
            gauge.record(sample.value)
            made[key] = gauge
            ordered.append(gauge)
        }
        for gauge in old.values { gauge.destroy() }
        gauges[group] = samples.isEmpty ? nil : GaugeGroup(samples: samples, gauges: ordered)
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
