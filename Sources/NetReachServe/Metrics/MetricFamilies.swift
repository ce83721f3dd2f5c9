/// Every metric family `serve` exports, with its type and help: the one table `/metrics` takes its
/// `# HELP` and `# TYPE` lines from, for serve's own families (written from its state at each
/// scrape) and for the library's (netlink, path updates, probes, HTTP), which reach the registry
/// through swift-metrics and ``ServeMetricsFactory``.
///
/// The order is the exposition's: serve's families in this order, then the registry's by name.
///
/// ```swift
/// MetricFamilies.family(named: "netreach_interface_up")?.type   // .gauge
/// MetricFamilies.help(for: "netreach_interface_up")             // "1 when the interface is up ..."
/// ```
package enum MetricFamilies {
    /// A family's Prometheus type: the word on its `# TYPE` line.
    package enum MetricType: String, Sendable {
        case gauge
        case counter
        case histogram
    }

    /// One family: its name, type and what it means.
    package struct Family: Sendable {
        package var name: String
        package var type: MetricType
        package var help: String

        init(_ name: String, _ type: MetricType, _ help: String) {
            self.name = name
            self.type = type
            self.help = help
        }
    }

    /// Every family, serve's first, in the exposition's order.
    package static let all: [Family] = [
        // serve's own, written from its state at each scrape.
        Family("netreach_build_info", .gauge, "The netreach that serves these metrics; always 1."),
        Family(
            "netreach_config_last_reload_successful", .gauge,
            "1 when the last reload (SIGHUP, POST /-/reload) succeeded; 0 while the running configuration is kept."),
        Family(
            "netreach_config_last_reload_success_timestamp_seconds", .gauge,
            "When the configuration was last read successfully (the start, or a reload), in Unix seconds."),
        Family(
            "netreach_path_satisfied", .gauge,
            "1 when the path to the destination is satisfied (it can send and receive)."),
        Family(
            "netreach_path_unsatisfied_reason", .gauge,
            "1 for the reason the path is unsatisfied, 0 for every other reason (all 0 when satisfied)."),
        Family(
            "netreach_path_route_info", .gauge,
            "The kernel's route for the path per address family: its interface, the interface's type and the gateway (empty on-link)."
        ),
        Family(
            "netreach_path_traffic_info", .gauge,
            "The packet whose path is watched: its transport protocol and destination port (tcp and 443 unless --port, --protocol or the file's keys say otherwise)."
        ),
        Family(
            "netreach_path_expensive", .gauge, "1 when the path uses an expensive interface (cellular, or marked so)."),
        Family("netreach_path_constrained", .gauge, "1 when the path uses a constrained interface (marked so)."),
        Family("netreach_path_supports", .gauge, "1 when the path can carry the capability: ipv4, ipv6, dns."),
        Family("netreach_path_changes_total", .counter, "How many times the path changed since the server started."),
        Family(
            "netreach_path_last_change_timestamp_seconds", .gauge,
            "When the path last changed (or was first read), in seconds since the Unix epoch."),
        Family("netreach_interface_up", .gauge, "1 when the interface is up with carrier, 0 when it is down."),
        Family("netreach_namespace_available", .gauge, "1 while the network namespace can be observed."),
        Family(
            "netreach_connectivity_level", .gauge,
            "1 for the connectivity level each address family has now, 0 for every other level."),
        Family("netreach_event_clients", .gauge, "Clients connected to the event stream."),
        Family(
            "netreach_event_clients_dropped_total", .counter,
            "Event-stream clients dropped because they stopped reading."),
        // Accumulated by serve as verdicts come, in the registry.
        Family(
            "netreach_probe_duration_seconds", .histogram,
            "How long each connectivity probe of the server's own namespace took."),
        Family(
            "netreach_probe_results_total", .counter,
            "Connectivity probes of the server's own namespace, by verdict: passed, portal, intercepted, failed."),
        // The library's own (NetReach, NetReachConnectivity, NetReachHTTP), through swift-metrics.
        Family("netreach_path_updates_total", .counter, "Paths delivered to PathMonitor handlers, by status."),
        Family("netreach_netlink_messages_total", .counter, "rtnetlink messages the path engine handled, by kind."),
        Family(
            "netreach_netlink_malformed_messages_total", .counter,
            "rtnetlink messages the path engine could not parse."),
        Family(
            "netreach_netlink_resyncs_total", .counter,
            "Times the path engine read the kernel's state afresh: overrun, malformed, retry."),
        Family(
            "netreach_netlink_snapshots_published_total", .counter, "System snapshots the path engine published."),
        Family(
            "netreach_route_lookups_total", .counter, "Route lookups (RTM_GETROUTE) the path engine asked the kernel."),
        Family("netreach_connectivity_probe_rounds_total", .counter, "Rounds of connectivity probes sent."),
        Family(
            "netreach_connectivity_probe_duration_seconds", .histogram,
            "How long each connectivity probe took, by family and verdict."),
        Family(
            "netreach_connectivity_level_changes_total", .counter,
            "Changes of the connectivity level, overall and per family."),
        Family(
            "netreach_http_requests_total", .counter,
            "Requests a NetworkService finished, by outcome: success or why it failed."),
        Family(
            "netreach_http_attempts_total", .counter,
            "Attempts a NetworkService handed to its transport (redirect hops not counted)."),
        Family("netreach_http_retries_total", .counter, "Attempts a NetworkService repeated, by what failed."),
        Family(
            "netreach_http_connectivity_waits_total", .counter,
            "Waits for connectivity a NetworkService began."),
        Family(
            "netreach_http_connectivity_wait_duration_seconds", .histogram,
            "How long each NetworkService wait for connectivity took, by how it ended."),
    ]

    private static let byName: [String: Family] = Dictionary(
        all.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })

    /// Where each family stands in ``all``.
    static let position: [String: Int] = Dictionary(
        all.enumerated().map { ($1.name, $0) }, uniquingKeysWith: { first, _ in first })

    /// The family called `name`, `nil` when the table does not know it.
    package static func family(named name: String) -> Family? { byName[name] }

    /// `name`'s help text; empty (no `# HELP` line) for a family the table does not know.
    package static func help(for name: String) -> String { byName[name]?.help ?? "" }
}
