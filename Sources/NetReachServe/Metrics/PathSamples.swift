import NetReach

/// The gauges of one watched path: what `/metrics` says about it, as a pure function of the path
/// and of the kernel's route per family.
///
/// ```swift
/// let samples = PathSamples.samples(of: path, key: key, routes: routes)
/// // netreach_path_satisfied{namespace="",destination=""} 1, the one-hot reason, route_info, ...
/// ```
package enum PathSamples {
    /// The route the kernel uses for one family of a path: `netreach_path_route_info`'s labels.
    package struct Route: Sendable, Hashable {
        package var family: IPAddress.Family
        package var interface: String
        package var interfaceType: InterfaceType
        /// Empty when the destination is on-link.
        package var gateway: String

        package init(family: IPAddress.Family, interface: String, interfaceType: InterfaceType, gateway: String) {
            self.family = family
            self.interface = interface
            self.interfaceType = interfaceType
            self.gateway = gateway
        }
    }

    /// Every gauge of `path` (the counter of changes is kept apart); with `traffic`,
    /// `netreach_path_traffic_info{protocol,port}`, which tells apart two destinations whose
    /// paths differ only by the packet asked about.
    package static func samples(
        of path: NetworkPath, key: PathKey, routes: [Route], lastChange: Double, traffic: PathTraffic? = nil
    ) -> [MetricSample] {
        let labels = key.labels
        func gauge(_ name: String, _ value: Bool, _ extra: [(String, String)] = []) -> MetricSample {
            MetricSample(name: name, labels: labels + extra, value: value ? 1 : 0)
        }
        var samples = [
            gauge("netreach_path_satisfied", path.status == .satisfied),
            gauge("netreach_path_expensive", path.isExpensive),
            gauge("netreach_path_constrained", path.isConstrained),
            gauge("netreach_path_supports", path.supportsIPv4, [("capability", "ipv4")]),
            gauge("netreach_path_supports", path.supportsIPv6, [("capability", "ipv6")]),
            gauge("netreach_path_supports", path.supportsDNS, [("capability", "dns")]),
            MetricSample(
                name: "netreach_path_last_change_timestamp_seconds", labels: labels, value: lastChange),
        ]
        // One series per path whatever its state, not labels on every series: the traffic is
        // configuration, fixed for the path's life (a change restarts its monitor).
        if let traffic {
            samples.append(
                gauge(
                    "netreach_path_traffic_info", true,
                    [("protocol", traffic.transportProtocol.rawValue), ("port", String(traffic.port))]))
        }
        // One-hot over the schema's closed set, so `== 1` finds a reason and a missing series is
        // never mistaken for 0.
        for reason in UnsatisfiedReason.allCases {
            samples.append(
                gauge(
                    "netreach_path_unsatisfied_reason", path.unsatisfiedReason == reason, [("reason", reason.rawValue)])
            )
        }
        for route in routes where path.status == .satisfied {
            samples.append(
                gauge(
                    "netreach_path_route_info", true,
                    [
                        ("family", route.family.rawValue), ("interface", route.interface),
                        ("interface_type", route.interfaceType.rawValue), ("gateway", route.gateway),
                    ]))
        }
        return samples
    }

    /// The kernel's routes an update's path was judged from, one per family that has one, with
    /// their interfaces named and typed as the monitor does.
    package static func routes(of update: PathUpdate) -> [Route] {
        IPAddress.Family.allCases.compactMap { family in
            guard case .route(let route) = update.routes[family],
                let interface = update.interface(at: route.interfaceIndex)
            else { return nil }
            return Route(
                family: family, interface: interface.name, interfaceType: interface.type,
                gateway: route.gateway.map { "\($0)" } ?? "")
        }
    }
}
