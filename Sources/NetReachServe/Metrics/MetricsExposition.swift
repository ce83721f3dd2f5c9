import Prometheus

/// `GET /metrics`: the registry's series in Prometheus's text format, each family with a
/// `# HELP` line, then the process's own `process_*` series.
///
/// swift-metrics has no place for help text, so it is added here, from ``help``, before each
/// family's `# TYPE` line.
///
/// ```swift
/// let text = MetricsExposition.render(registry, process: ProcessMetrics.read())
/// ```
package enum MetricsExposition {
    /// The media type of the text format.
    package static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    /// What each of our metrics means; shown to people by Prometheus's UI and by `curl`.
    package static let help: [String: String] = [
        "netreach_path_satisfied": "1 when the path to the destination is satisfied (it can send and receive).",
        "netreach_path_unsatisfied_reason":
            "1 for the reason the path is unsatisfied, 0 for every other reason (all 0 when satisfied).",
        "netreach_path_route_info":
            "The kernel's route for the path per address family: its interface, the interface's type and the gateway (empty on-link).",
        "netreach_path_traffic_info":
            "The packet whose path is watched: its transport protocol and destination port (tcp and 443 unless --port, --protocol or the file's keys say otherwise).",
        "netreach_path_expensive": "1 when the path uses an expensive interface (cellular, or marked so).",
        "netreach_path_constrained": "1 when the path uses a constrained interface (marked so).",
        "netreach_path_supports": "1 when the path can carry the capability: ipv4, ipv6, dns.",
        "netreach_path_changes_total": "How many times the path changed since the server started.",
        "netreach_path_last_change_timestamp_seconds":
            "When the path last changed (or was first read), in seconds since the Unix epoch.",
        "netreach_interface_up": "1 when the interface is up with carrier, 0 when it is down.",
        "netreach_namespace_available": "1 while the network namespace can be observed.",
        "netreach_build_info": "The netreach that serves these metrics; always 1.",
        "netreach_config_last_reload_successful":
            "1 when the last reload (SIGHUP, POST /-/reload) succeeded; 0 while the running configuration is kept.",
        "netreach_config_last_reload_success_timestamp_seconds":
            "When the configuration was last read successfully (the start, or a reload), in Unix seconds.",
        // The library's own (NetReach, NetReachConnectivity), through swift-metrics.
        "netreach_path_updates_total": "Paths delivered to PathMonitor handlers, by status.",
        "netreach_netlink_messages_total": "rtnetlink messages the path engine handled, by kind.",
        "netreach_netlink_malformed_messages_total": "rtnetlink messages the path engine could not parse.",
        "netreach_netlink_resyncs_total":
            "Times the path engine read the kernel's state afresh: overrun, malformed, retry.",
        "netreach_netlink_snapshots_published_total": "System snapshots the path engine published.",
        "netreach_route_lookups_total": "Route lookups (RTM_GETROUTE) the path engine asked the kernel.",
        "netreach_connectivity_probe_rounds_total": "Rounds of connectivity probes sent.",
        "netreach_connectivity_probe_duration_seconds": "How long each connectivity probe took, by family and verdict.",
        "netreach_connectivity_level_changes_total": "Changes of the connectivity level, overall and per family.",
        "netreach_event_clients": "Clients connected to the event stream.",
        "netreach_event_clients_dropped_total": "Event-stream clients dropped because they stopped reading.",
    ]

    /// The registry's text with help lines, then `process`.
    package static func render(_ registry: PrometheusCollectorRegistry, process: String) -> String {
        let text = registry.emitToString()
        var output = ""
        output.reserveCapacity(text.utf8.count + help.count * 80 + process.utf8.count)
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("# TYPE "), let name = line.dropFirst(7).split(separator: " ").first,
                let text = help[String(name)]
            {
                output += "# HELP \(name) \(text)\n"
            }
            output += line
            output += "\n"
        }
        if output.hasSuffix("\n\n") { output.removeLast() }
        return output + process
    }
}
