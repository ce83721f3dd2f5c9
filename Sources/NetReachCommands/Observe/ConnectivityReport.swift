import NetReach
import NetReachConnectivity

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What `netreach check` prints: the verdict, then a line per probe (its family, URL, answer,
/// time and verdict); with `--json`, the path's object with the verdict as `connectivity`
/// (``ConnectivityJSON``), as `watch --internet --json` prints each line. `watch --internet` and `wait --internet`
/// print the verdict's first line (``summary(_:)``) after the path, and its JSON as `connectivity`.
package enum ConnectivityReport {
    /// ```
    /// portal: sign in at http://login.hotel.example/ (ipv4 portal, ipv6 local)
    ///   ipv4 http://192.0.2.10/generate_204: HTTP 302 in 4 ms, portal: HTTP 302 redirect to http://login.hotel.example/
    /// ```
    package static func text(_ verdict: Connectivity) -> String {
        let lines = (verdict.ipv4.evidence + verdict.ipv6.evidence).map { "  \($0)" }
        return ([summary(verdict)] + lines).joined(separator: "\n")
    }

    /// The verdict on one line: `full (ipv4 full, ipv6 local)`,
    /// `portal: sign in at http://login.hotel.example/ (ipv4 portal, ipv6 local)`,
    /// `unknown (ipv4 unknown, ipv6 unknown); no probe sent: the path is expensive`.
    package static func summary(_ verdict: Connectivity) -> String {
        var head: String
        switch verdict.level {
        case .portal(let login?): head = "portal: sign in at \(login.absoluteString)"
        default: head = verdict.level.description
        }
        head += " (ipv4 \(verdict.ipv4.level.name), ipv6 \(verdict.ipv6.level.name))"
        if let suspended = verdict.probesSuspended { head += "; no probe sent: \(suspended)" }
        if verdict.path.status != .satisfied, let reason = verdict.path.unsatisfiedReason {
            head += "; path: \(reason)"
        }
        return head
    }
}
