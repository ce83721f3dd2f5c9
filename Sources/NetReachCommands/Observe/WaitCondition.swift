import NetReach

/// What `wait` waits for, beyond the monitor's own requirements (the interface type): a pure
/// value, so the decision "is this path good enough, and if not, why" is testable with tables.
///
/// ```swift
/// let condition = WaitCondition(requiresIPv6: true)
/// condition.missing(in: path)   // ["ipv6"] on an IPv4-only network
/// ```
struct WaitCondition: Sendable, Hashable {
    /// The path must support IPv4 (`--ipv4`).
    var requiresIPv4 = false
    /// The path must support IPv6 (`--ipv6`).
    var requiresIPv6 = false
    /// The path must have a nameserver (`--dns`).
    var requiresDNS = false

    /// Whether `path` is satisfied and has everything required.
    func isMet(by path: NetworkPath) -> Bool {
        path.status == .satisfied && missing(in: path).isEmpty
    }

    /// The required properties `path` lacks, as printed in the timeout message (`ipv6`, `dns`).
    func missing(in path: NetworkPath) -> [String] {
        [
            ("ipv4", requiresIPv4 && !path.supportsIPv4),
            ("ipv6", requiresIPv6 && !path.supportsIPv6),
            ("dns", requiresDNS && !path.supportsDNS),
        ]
        .filter(\.1).map(\.0)
    }

    /// Why `path` does not meet the condition, in the words of the human output:
    /// `unsatisfied (no default route)`, or
    /// `satisfied eth0(wiredEthernet) ipv4 gw 192.0.2.1 (missing ipv6)`.
    func shortfall(of path: NetworkPath) -> String {
        let line = PathFormatting.line(path)
        let missing = missing(in: path)
        guard path.status == .satisfied, !missing.isEmpty else { return line }
        return "\(line) (missing \(missing.joined(separator: ", ")))"
    }
}
