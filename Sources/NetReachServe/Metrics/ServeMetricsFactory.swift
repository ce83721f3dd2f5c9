import CoreMetrics
import Prometheus

/// swift-metrics into a Prometheus registry with each family's help from ``MetricFamilies``: the
/// library's series (netlink, path updates, probe rounds, HTTP) reach `/metrics` through it.
///
/// swift-prometheus's own `PrometheusMetricsFactory` registers every family with an empty help,
/// and the registry stops the process when one family is later registered with another help; so
/// every maker of a series in serve's registry goes through this factory or through
/// ``MetricFamilies/help(for:)``. Names and labels are passed as given (ours are valid already).
///
/// ```swift
/// MetricsSystem.bootstrap(ServeMetricsFactory(registry: registry))
/// ```
package struct ServeMetricsFactory: CoreMetrics.MetricsFactory {
    /// Where the series go.
    package let registry: PrometheusCollectorRegistry
    /// Prometheus's default buckets, 5 ms to 10 s, as `PrometheusMetricsFactory` has them.
    package static let durationBuckets: [Duration] = [
        .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
        .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2500), .seconds(5), .seconds(10),
    ]
    /// Prometheus's default value buckets, as `PrometheusMetricsFactory` has them.
    package static let valueBuckets: [Double] = [5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000]

    package init(registry: PrometheusCollectorRegistry) { self.registry = registry }

    /// The family `name` with its help from the table (the whole name in `metricName`: ours are
    /// complete already).
    package static func descriptor(_ name: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: name, unitName: "", helpText: MetricFamilies.help(for: name))
    }

    package func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        registry.makeCounter(descriptor: Self.descriptor(label), labels: dimensions)
    }

    package func makeFloatingPointCounter(
        label: String, dimensions: [(String, String)]
    )
        -> any FloatingPointCounterHandler
    {
        registry.makeCounter(descriptor: Self.descriptor(label), labels: dimensions)
    }

    package func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        guard aggregate else { return registry.makeGauge(descriptor: Self.descriptor(label), labels: dimensions) }
        return registry.makeValueHistogram(
            descriptor: Self.descriptor(label), labels: dimensions, buckets: Self.valueBuckets)
    }

    package func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
        registry.makeGauge(descriptor: Self.descriptor(label), labels: dimensions)
    }

    package func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        registry.makeDurationHistogram(
            descriptor: Self.descriptor(label), labels: dimensions, buckets: Self.durationBuckets)
    }

    package func destroyCounter(_ handler: any CounterHandler) {
        if let counter = handler as? Prometheus.Counter { registry.unregisterCounter(counter) }
    }

    package func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) {
        if let counter = handler as? Prometheus.Counter { registry.unregisterCounter(counter) }
    }

    package func destroyRecorder(_ handler: any RecorderHandler) {
        switch handler {
        case let gauge as Prometheus.Gauge: registry.unregisterGauge(gauge)
        case let histogram as Histogram<Double>: registry.unregisterValueHistogram(histogram)
        default: break
        }
    }

    package func destroyMeter(_ handler: any MeterHandler) {
        if let gauge = handler as? Prometheus.Gauge { registry.unregisterGauge(gauge) }
    }

    package func destroyTimer(_ handler: any TimerHandler) {
        if let histogram = handler as? Histogram<Duration> { registry.unregisterDurationHistogram(histogram) }
    }
}
