import NetReach
import NetReachConnectivity

/// The gauges of a connectivity verdict: `netreach_connectivity_level{namespace,family,level}`,
/// one-hot over the closed set of levels for each family judged.
///
/// ```swift
/// ConnectivitySamples.samples(of: verdict, namespace: "", families: [.ipv4])
/// // netreach_connectivity_level{namespace="",family="ipv4",level="full"} 1, the five others 0
/// ```
package enum ConnectivitySamples {
    /// Every level's label value, in order of how much works.
    package static let levels = ["unknown", "none", "local", "limited", "portal", "full"]

    package static func samples(
        of verdict: Connectivity, namespace: String, families: Set<IPAddress.Family>
    ) -> [MetricSample] {
        IPAddress.Family.allCases.filter(families.contains).flatMap { family in
            let current = verdict[family].level.name
            return levels.map { level in
                MetricSample(
                    name: "netreach_connectivity_level",
                    labels: [("namespace", namespace), ("family", family.rawValue), ("level", level)],
                    value: level == current ? 1 : 0)
            }
        }
    }

    /// A probe's verdict as a label value: passed, portal, intercepted or failed.
    package static func name(_ verdict: ProbeVerdict) -> String {
        switch verdict {
        case .passed: "passed"
        case .portal: "portal"
        case .intercepted: "intercepted"
        case .failed: "failed"
        }
    }
}
