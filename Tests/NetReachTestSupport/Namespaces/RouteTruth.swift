import Foundation
import NetReach
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// What a program in a lab gets for a connection: the reference the monitor is compared with.
///
/// A connected UDP socket in the lab's namespace (which sends nothing) shows the source address the
/// kernel picks for it (`getsockname`), or the error `connect` gets; then `ip -j route get ADDRESS
/// from SOURCE ipproto tcp sport PORT dport 443` shows the route a web client's packets take (PORT:
/// the first of the lab's `ip_local_port_range`), the traffic a monitor asks about by default. A lookup without the source (`ip route
/// get ADDRESS`) is not the reference: the kernel routes a connection with its source, so `ip rule
/// from ADDR` and IPv6 source-specific routes apply to it and not to such a lookup.
package enum RouteTruth: Equatable, CustomStringConvertible {
    case route(device: String, gateway: IPAddress?, source: IPAddress?, linkdown: Bool)
    /// The kernel refused or found nothing: what `connect` or `ip` said ("Network is unreachable").
    case error(String)

    /// An address that stands for "the internet" in the labs: no lab routes it apart from the rest
    /// (the monitor's own lookup addresses are not used, so a test may route those apart). Never
    /// contacted.
    package static func lookupAddress(_ family: NetnsLab.Family) -> String {
        family == .ipv4 ? "203.0.113.77" : "2001:db8:ffff::77"
    }

    /// Whether traffic of this family can leave: a route out of a link with carrier and a source
    /// address that is not link-local, nor loopback (the kernel's pick while every global IPv6
    /// address is tentative or DAD-failed, from which no connection completes), nor unspecified (the
    /// pick for a device route when no interface has an IPv4 address): the monitor's rule
    /// for "supports the family". (The lab's lookups are of addresses beyond the host.)
    package var isUsable: Bool {
        guard case .route(_, _, let source, let linkdown) = self, let source else { return false }
        return !linkdown && !source.isLinkLocal && !source.isLoopback && source != IPAddress("0.0.0.0")
            && source != IPAddress("::")
    }

    package var description: String {
        switch self {
        case .route(let device, let gateway, let source, let linkdown):
            "dev \(device)" + (gateway.map { " via \($0)" } ?? "") + (source.map { " src \($0)" } ?? " no src")
                + (linkdown ? " linkdown" : "")
        case .error(let message): "error: \(message)"
        }
    }
}

extension NetnsLab {
    /// What a program in the lab gets for a connection to the family's internet address (bound to
    /// `oif` when given).
    package func routeGet(_ family: Family, oif: String? = nil) async throws -> RouteTruth {
        try await routeGet(to: RouteTruth.lookupAddress(family), oif: oif)
    }

    /// What a program in the lab gets for a connection to `address` (`port` over `transport`): the
    /// source from a connected UDP socket, then `ip -n LAB -d -j route get ADDRESS from SOURCE
    /// ipproto TRANSPORT sport PORT dport PORT`. Bound to `oif` (as with `SO_BINDTODEVICE`): the
    /// source `ip route get ADDRESS oif DEVICE ipproto TRANSPORT dport PORT` picks, then the same
    /// lookup from it. The answer says nothing of carrier (no `linkdown` flag), so the device's
    /// `ip link` flags are read too.
    package func routeGet(
        to address: String, oif: String? = nil, transport: String = "tcp", port: UInt16 = 443
    ) async throws -> RouteTruth {
        let family: Family = address.contains(":") ? .ipv6 : .ipv4
        let sourcePort = try await firstLocalPort()
        let packet = ["ipproto", transport, "dport", "\(port)"]
        let source: String
        if let oif {
            let entry: RouteEntry
            switch try await ipRouteGet(address, family: family, extra: ["oif", oif] + packet) {
            case .entry(let found): entry = found
            case .failed(let message): return .error(message)
            }
            guard let chosen = entry.prefsrc else { return try await truth(of: entry) }
            source = chosen
        } else {
            switch try await connectedSource(address, port: port) {
            case .success(let chosen): source = chosen
            case .failure(let failure): return .error(failure.message)
            }
        }
        switch try await ipRouteGet(
            address, family: family,
            extra: ["from", source] + (oif.map { ["oif", $0] } ?? []) + packet + ["sport", "\(sourcePort)"])
        {
        case .entry(var entry):
            entry.prefsrc = entry.prefsrc ?? source
            return try await truth(of: entry)
        case .failed(let message):
            return .error(message)
        }
    }

    /// The first port of the lab's `ip_local_port_range`: the source port a monitor asks about.
    package func firstLocalPort() async throws -> UInt16 {
        let range = try await LabCommand.ip(
            ["netns", "exec", name, "cat", "/proc/sys/net/ipv4/ip_local_port_range"])
        guard let first = range.split(whereSeparator: \.isWhitespace).first, let port = UInt16(first) else {
            throw LabError.systemCall("read ip_local_port_range in \(name)", range)
        }
        return port
    }

    /// The source address a connected UDP socket to `address` (at `port`) gets in the lab, or
    /// `connect`'s error.
    package func connectedSource(_ address: String, port: UInt16 = 443) async throws -> Result<String, ConnectError> {
        let script = """
            import socket, sys
            family = socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET
            s = socket.socket(family, socket.SOCK_DGRAM)
            try:
                s.connect((sys.argv[1], int(sys.argv[2])))
                print("source", s.getsockname()[0])
            except OSError as error:
                print("error", error.errno, error.strerror)
            """
        let output = try await LabCommand.ip(["netns", "exec", name, "python3", "-c", script, address, "\(port)"])
            .trimmingCharacters(in: .whitespacesAndNewlines)
        if output.hasPrefix("source ") { return .success(String(output.dropFirst("source ".count))) }
        return .failure(
            ConnectError(
                message: output.split(separator: " ", maxSplits: 2).dropFirst(2).first.map(String.init) ?? output))
    }

    package struct ConnectError: Error, Equatable {
        package var message: String
    }

    private struct RouteEntry: Decodable {
        package var dev: String
        package var gateway: String?
        package var via: Via?
        package var prefsrc: String?
        package var table: String?
        package struct Via: Decodable { var host: String }
    }

    private enum RouteAnswer {
        case entry(RouteEntry)
        case failed(String)
    }

    private func ipRouteGet(_ address: String, family: Family, extra: [String]) async throws -> RouteAnswer {
        let output: String
        do {
            output = try await LabCommand.ip(["-n", name, "-d", "-j", family.flag, "route", "get", address] + extra)
        } catch LabError.commandFailed(_, _, let standardError) {
            return .failed(standardError.replacingOccurrences(of: "RTNETLINK answers: ", with: ""))
        }
        guard let entry = try JSONDecoder().decode([RouteEntry].self, from: Data(output.utf8)).first else {
            return .failed("no answer in \(output)")
        }
        // Bound to a device with no route, the kernel answers "on-link" from no table at all.
        guard entry.table != nil else { return .failed("no route (answered as on-link, from no table)") }
        return .entry(entry)
    }

    private func truth(of entry: RouteEntry) async throws -> RouteTruth {
        struct Link: Decodable { var flags: [String] }
        let link = try JSONDecoder().decode(
            [Link].self, from: Data(try await ip("-j", "link", "show", "dev", entry.dev).utf8)
        ).first
        let hasCarrier = link.map { $0.flags.contains("UP") && !$0.flags.contains("NO-CARRIER") } ?? false
        return .route(
            device: entry.dev, gateway: (entry.gateway ?? entry.via?.host).flatMap(IPAddress.init),
            source: entry.prefsrc.flatMap(IPAddress.init), linkdown: !hasCarrier)
    }

    /// Writes a network sysctl of the lab (`/proc/sys/net/...` as seen from inside it; no
    /// `sysctl` binary needed).
    package func setSysctl(_ path: String, _ value: String) async throws {
        try await LabCommand.ip(["netns", "exec", name, "sh", "-c", "echo \(value) > /proc/sys/\(path)"])
    }

    /// The kernel's answers for both families.
    package func routeTruth() async throws -> [Family: RouteTruth] {
        [.ipv4: try await routeGet(.ipv4), .ipv6: try await routeGet(.ipv6)]
    }

    /// Adds a second uplink: `veth2` here (with `address`), its peer `veth3` up in the peer
    /// namespace, and waits for carrier.
    package func addUplink(
        _ device: String = "veth2", peer: String = "veth3", address: String = "10.124.0.2/24"
    ) async throws {
        try await ip("link", "add", device, "type", "veth", "peer", "name", peer, "netns", peerName)
        try await ip("addr", "add", address, "dev", device)
        try await peerIP("link", "set", peer, "up")
        try await ip("link", "set", device, "up")
        let deadline = ContinuousClock.now + .seconds(15)
        while !(try await ip("-o", "link", "show", "dev", device)).contains("state UP") {
            guard ContinuousClock.now < deadline else {
                throw LabError.timedOut("\(device) in \(name) never got carrier")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }
}

/// Whether a path says what the kernel says; `nil` when it does, else what differs.
package func disagreement(_ path: NetworkPath, _ truth: [NetnsLab.Family: RouteTruth]) -> String? {
    var problems: [String] = []
    for family in [NetnsLab.Family.ipv4, .ipv6] {
        guard let answer = truth[family] else { continue }
        let supported = family == .ipv4 ? path.supportsIPv4 : path.supportsIPv6
        if supported != answer.isUsable { problems.append("\(family): path supports=\(supported), kernel: \(answer)") }
        guard answer.isUsable, case .route(let device, let gateway, _, _) = answer else { continue }
        if !path.availableInterfaces.map(\.name).contains(device) {
            problems.append("\(family): \(device) not among \(path.availableInterfaces)")
        }
        if let gateway, !path.gateways.contains(gateway) {
            problems.append("\(family): gateway \(gateway) not among \(path.gateways)")
        }
        let primaryFamily = family == .ipv4 || !(truth[.ipv4]?.isUsable ?? false)
        // Over a multipath route each flow hashes to one leg: the reference's flow may take
        // another leg than the monitor's lookup, and both are listed.
        if primaryFamily, !path.isMultipath, path.primaryInterface?.name != device {
            problems.append("\(family): primary \(path.primaryInterface?.name ?? "none"), kernel uses \(device)")
        }
    }
    let satisfied = truth.values.contains { $0.isUsable }
    if (path.status == .satisfied) != satisfied {
        problems.append("status \(path.status), kernel usable: \(satisfied)")
    }
    return problems.isEmpty ? nil : problems.joined(separator: "; ") + " — path: \(path)"
}

/// Asks `ip route get` in the lab, then waits (bounded) until the monitor's current path agrees,
/// and checks that a brand-new monitor's first path agrees too. Returns the kernel's answers.
@discardableResult
package func expectAgreement(
    _ monitor: PathMonitor, in lab: NetnsLab, sourceLocation: SourceLocation = #_sourceLocation
) async throws -> [NetnsLab.Family: RouteTruth] {
    let truth = try await lab.routeTruth()
    let agreed = await LabPoll.until("the monitor agrees with ip route get (\(truth))", sourceLocation: sourceLocation)
    {
        disagreement(monitor.currentPath, truth) == nil
    }
    if !agreed, let problem = disagreement(monitor.currentPath, truth) {
        Issue.record("monitor: \(problem)", sourceLocation: sourceLocation)
    }
    if let problem = disagreement(PathMonitor.freshPath(in: lab), truth) {
        Issue.record("fresh monitor: \(problem)", sourceLocation: sourceLocation)
    }
    return truth
}
