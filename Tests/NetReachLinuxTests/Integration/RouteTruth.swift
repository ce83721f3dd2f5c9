import Foundation
import NetReachTestSupport
@testable import NetReach
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// What `ip -j route get ADDRESS` says in a lab: the reference the monitor is compared with.
/// The addresses are the ones the monitor looks up; nothing is ever sent to them.
enum RouteTruth: Equatable, CustomStringConvertible {
    case route(device: String, gateway: IPAddress?, source: IPAddress?, linkdown: Bool)
    /// The kernel refused or found nothing: `ip` printed "RTNETLINK answers: MESSAGE".
    case error(String)

    static func lookupAddress(_ family: NetnsLab.Family) -> String {
        SystemPathSource.Configuration.defaultRouteLookupAddresses.first { $0.family == (family == .ipv4 ? .ipv4 : .ipv6) }!.description
    }

    /// Whether traffic of this family can leave: a route out of a link with carrier and a source
    /// address that is not link-local (the monitor's rule for "supports the family").
    var isUsable: Bool {
        guard case .route(_, _, let source, let linkdown) = self, let source else { return false }
        return !linkdown && !source.isLinkLocal
    }

    var description: String {
        switch self {
        case .route(let device, let gateway, let source, let linkdown):
            "dev \(device)" + (gateway.map { " via \($0)" } ?? "") + (source.map { " src \($0)" } ?? " no src")
                + (linkdown ? " linkdown" : "")
        case .error(let message): "error: \(message)"
        }
    }
}

extension NetnsLab {
    /// `ip -n LAB -d -j route get <lookup address> [oif DEVICE]` for one family. The answer says
    /// nothing of carrier (no `linkdown` flag), so the device's `ip link` flags are read too.
    func routeGet(_ family: Family, oif: String? = nil) async throws -> RouteTruth {
        try await routeGet(to: RouteTruth.lookupAddress(family), oif: oif)
    }

    /// `ip -n LAB -d -j route get ADDRESS [oif DEVICE]`.
    func routeGet(to address: String, oif: String? = nil) async throws -> RouteTruth {
        let family: Family = address.contains(":") ? .ipv6 : .ipv4
        var arguments = ["-n", name, "-d", "-j", family.flag, "route", "get", address]
        if let oif { arguments += ["oif", oif] }
        let output: String
        do {
            output = try await LabCommand.ip(arguments)
        } catch LabError.commandFailed(_, _, let standardError) {
            return .error(standardError.replacingOccurrences(of: "RTNETLINK answers: ", with: ""))
        }
        struct Entry: Decodable {
            var dev: String
            var gateway: String?
            var via: Via?
            var prefsrc: String?
            var table: String?
            struct Via: Decodable { var host: String }
        }
        guard let entry = try JSONDecoder().decode([Entry].self, from: Data(output.utf8)).first else {
            return .error("no answer in \(output)")
        }
        // Bound to a device with no route, the kernel answers "on-link" from no table at all.
        guard entry.table != nil else { return .error("no route (answered as on-link, from no table)") }
        struct Link: Decodable { var flags: [String] }
        let link = try JSONDecoder().decode([Link].self, from: Data(try await ip("-j", "link", "show", "dev", entry.dev).utf8)).first
        let hasCarrier = link.map { $0.flags.contains("UP") && !$0.flags.contains("NO-CARRIER") } ?? false
        return .route(device: entry.dev, gateway: (entry.gateway ?? entry.via?.host).flatMap(IPAddress.init),
                      source: entry.prefsrc.flatMap(IPAddress.init), linkdown: !hasCarrier)
    }

    /// Writes a network sysctl of the lab (`/proc/sys/net/...` as seen from inside it; no
    /// `sysctl` binary needed).
    func setSysctl(_ path: String, _ value: String) async throws {
        try await LabCommand.ip(["netns", "exec", name, "sh", "-c", "echo \(value) > /proc/sys/\(path)"])
    }

    /// The kernel's answers for both families.
    func routeTruth() async throws -> [Family: RouteTruth] {
        [.ipv4: try await routeGet(.ipv4), .ipv6: try await routeGet(.ipv6)]
    }

    /// Adds a second uplink: `veth2` here (with `address`), its peer `veth3` up in the peer
    /// namespace, and waits for carrier.
    func addUplink(_ device: String = "veth2", peer: String = "veth3", address: String = "10.124.0.2/24") async throws {
        try await ip("link", "add", device, "type", "veth", "peer", "name", peer, "netns", peerName)
        try await ip("addr", "add", address, "dev", device)
        try await peerIP("link", "set", peer, "up")
        try await ip("link", "set", device, "up")
        let deadline = ContinuousClock.now + .seconds(15)
        while !(try await ip("-o", "link", "show", "dev", device)).contains("state UP") {
            guard ContinuousClock.now < deadline else { throw LabError.timedOut("\(device) in \(name) never got carrier") }
            try await Task.sleep(for: .milliseconds(10))
        }
    }
}

/// Whether a path says what the kernel says; `nil` when it does, else what differs.
func disagreement(_ path: NetworkPath, _ truth: [NetnsLab.Family: RouteTruth]) -> String? {
    var problems: [String] = []
    for family in [NetnsLab.Family.ipv4, .ipv6] {
        guard let answer = truth[family] else { continue }
        let supported = family == .ipv4 ? path.supportsIPv4 : path.supportsIPv6
        if supported != answer.isUsable { problems.append("\(family): path supports=\(supported), kernel: \(answer)") }
        guard answer.isUsable, case .route(let device, let gateway, _, _) = answer else { continue }
        if !path.availableInterfaces.map(\.name).contains(device) { problems.append("\(family): \(device) not among \(path.availableInterfaces)") }
        if let gateway, !path.gateways.contains(gateway) { problems.append("\(family): gateway \(gateway) not among \(path.gateways)") }
        let primaryFamily = family == .ipv4 || !(truth[.ipv4]?.isUsable ?? false)
        if primaryFamily, path.primaryInterface?.name != device {
            problems.append("\(family): primary \(path.primaryInterface?.name ?? "none"), kernel uses \(device)")
        }
    }
    let satisfied = truth.values.contains { $0.isUsable }
    if (path.status == .satisfied) != satisfied { problems.append("status \(path.status), kernel usable: \(satisfied)") }
    return problems.isEmpty ? nil : problems.joined(separator: "; ") + " — path: \(path)"
}

/// Asks `ip route get` in the lab, then waits (bounded) until the monitor's current path agrees,
/// and checks that a brand-new monitor's first path agrees too. Returns the kernel's answers.
@discardableResult
func expectAgreement(
    _ monitor: PathMonitor, in lab: NetnsLab, sourceLocation: SourceLocation = #_sourceLocation
) async throws -> [NetnsLab.Family: RouteTruth] {
    let truth = try await lab.routeTruth()
    let agreed = await LabPoll.until("the monitor agrees with ip route get (\(truth))", sourceLocation: sourceLocation) {
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

/// A tun device held open in a lab namespace, as a VPN client holds its tunnel: it has carrier
/// while this object's helper process runs (no wireguard module here; a tun is what a userspace
/// WireGuard or OpenVPN uses). Nothing reads or writes packets on it.
final class TunDevice: Sendable {
    private let helper: ChildProcess

    /// Opens `/dev/net/tun` inside the lab's namespace (`ip netns exec`) with TUNSETIFF and keeps it
    /// open until ``close()``; then brings the device up with `address` (an `ip addr` argument).
    static func open(_ name: String, in lab: NetnsLab, address: String? = nil) async throws -> TunDevice {
        let script = """
            import fcntl, os, struct, sys, time
            fd = os.open("/dev/net/tun", os.O_RDWR)
            fcntl.ioctl(fd, 0x400454ca, struct.pack("16sH", sys.argv[1].encode(), 0x0001 | 0x1000))
            print("ready", flush=True)
            while True: time.sleep(3600)
            """
        let helper = try ChildProcess(LabCommand.ipExecutable, ["netns", "exec", lab.name, "python3", "-c", script, name])
        let device = TunDevice(helper: helper)
        let line = await helper.nextLine(timeout: .seconds(30))
        guard line == "ready" else {
            device.close()
            throw LabError.systemCall("open tun \(name) in \(lab.name)", "helper said: \(line ?? "nothing") \(helper.standardError)")
        }
        try await lab.ip("link", "set", name, "up")
        if let address { try await lab.ip("addr", "add", address, "dev", name) }
        return device
    }

    private init(helper: ChildProcess) {
        self.helper = helper
    }

    /// Closes the tunnel: the helper exits and the kernel deletes the device.
    func close() {
        helper.kill()
        _ = helper.waitBlocking(timeout: .seconds(10))
    }
}
