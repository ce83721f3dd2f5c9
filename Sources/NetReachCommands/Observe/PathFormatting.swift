import NetReach
import NetReachConnectivity

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// How `status`, `watch` and `wait` print a ``NetworkPath``, in one place so they always agree.
///
/// The human forms are meant to be grepped and cut, so they are stable: words in a fixed order,
/// no colour, no localisation, timestamps in UTC.
package enum PathFormatting {
    /// One line: `satisfied eth0(wiredEthernet) ipv4 ipv6 dns gw 192.0.2.1` or
    /// `unsatisfied (no default route)`. Interfaces and gateways are comma-separated, preferred
    /// first; `expensive` and `constrained` appear only when true.
    static func line(_ path: NetworkPath) -> String {
        guard path.status == .satisfied else {
            return "\(path.status) (\(path.unsatisfiedReason?.description ?? "unknown"))"
        }
        var words = ["satisfied"]
        if !path.availableInterfaces.isEmpty {
            words.append(path.availableInterfaces.map(\.description).joined(separator: ","))
        }
        words += flagWords(path)
        if !path.gateways.isEmpty {
            words += ["gw", path.gateways.map(\.description).joined(separator: ",")]
        }
        if path.isMultipath { words.append("multipath") }
        return words.joined(separator: " ")
    }

    /// ``line(_:)`` prefixed with an ISO-8601 UTC timestamp with milliseconds:
    /// `2026-11-22T19:40:01.123Z satisfied eth0(wiredEthernet) ipv4 dns gw 192.0.2.1`.
    static func timestampedLine(_ path: NetworkPath, at date: Date) -> String {
        "\(PathJSON.timestamp(date)) \(line(path))"
    }

    /// The path's line, then the connectivity verdict (`watch --internet`, `wait --internet`):
    /// `satisfied eth0(wiredEthernet) ipv4 gw 192.0.2.1; internet full (ipv4 full, ipv6 local)`.
    static func line(_ verdict: Connectivity) -> String {
        "\(line(verdict.path)); internet \(ConnectivityReport.summary(verdict))"
    }

    /// ``line(_:)-(Connectivity)`` prefixed with a timestamp, as ``timestampedLine(_:at:)-(NetworkPath,_)``.
    static func timestampedLine(_ verdict: Connectivity, at date: Date) -> String {
        "\(PathJSON.timestamp(date)) \(line(verdict))"
    }

    /// `key: value` lines for `status`, one property per line, every key always present
    /// (`none`, `yes`/`no`), so `awk '/^dns:/ {print $2}'` works whatever the state.
    static func block(_ path: NetworkPath) -> String {
        let interfaces = path.availableInterfaces.map(\.description).joined(separator: " ")
        let gateways = path.gateways.map(\.description).joined(separator: " ")
        let rows: [(String, String)] = [
            ("status", path.status.description),
            ("reason", path.unsatisfiedReason?.description ?? "none"),
            ("interfaces", interfaces.isEmpty ? "none" : interfaces),
            ("ipv4", yesNo(path.supportsIPv4)),
            ("ipv6", yesNo(path.supportsIPv6)),
            ("dns", yesNo(path.supportsDNS)),
            ("expensive", yesNo(path.isExpensive)),
            ("constrained", yesNo(path.isConstrained)),
            ("multipath", yesNo(path.isMultipath)),
            ("gateways", gateways.isEmpty ? "none" : gateways),
        ]
        let width = rows.map(\.0.count).max()! + 1
        return rows.map { key, value in
            key + ":" + String(repeating: " ", count: width - key.count - 1) + " " + value
        }.joined(separator: "\n")
    }

    /// The words for the path's true flags, in the order they are printed.
    static func flagWords(_ path: NetworkPath) -> [String] {
        [
            ("ipv4", path.supportsIPv4), ("ipv6", path.supportsIPv6), ("dns", path.supportsDNS),
            ("expensive", path.isExpensive), ("constrained", path.isConstrained),
        ]
        .filter(\.1).map(\.0)
    }

    private static func yesNo(_ value: Bool) -> String { value ? "yes" : "no" }
}
