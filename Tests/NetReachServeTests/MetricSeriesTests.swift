import NetReachServe
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
