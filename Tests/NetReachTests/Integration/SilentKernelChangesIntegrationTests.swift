import Dispatch
import Foundation
import NetReach
import NetReachTestSupport
import Testing

/// What the kernel changes without a route message, and what it announces in ways that are easy
/// to misread: a gateway's neighbour entry made INCOMPLETE by the first packet (IPv4's choice among
/// equal-metric defaults), a router advertisement that changes one router's preference, a member
/// leaving a nexthop group, the multipath hash policy. Each against the kernel in the same lab:
/// `ip route get`, a connected socket, a fresh monitor.
@Suite("What the kernel changes silently (integration)", .offPool, .needsNamespaceRoot, .serialized)
struct SilentKernelChangesIntegrationTests {
    /// An address on the peer namespace's loopback: the one place a test packet is sent to.
    private static let peerTarget = "198.18.0.1"

    /// Runs python3 in `namespace` with `arguments` (ip netns exec).
    private static func python(in namespace: String, _ script: String, _ arguments: String...) async throws -> String {
        try await LabCommand.ip(["netns", "exec", namespace, "python3", "-c", script] + arguments)
    }

    /// Sends one UDP datagram from the lab to `address`, as a program would.
    private static func sendDatagram(in lab: NetnsLab, to address: String) async throws {
        _ = try await python(
            in: lab.name,
            """
            import socket, sys
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.sendto(b"netreach", (sys.argv[1], 9))
            """, address)
    }

    /// The path's interfaces and gateways against a fresh monitor's: what `netreach status` says.
    private static func sameAsFresh(_ path: NetworkPath, _ fresh: NetworkPath) -> Bool {
        path.availableInterfaces.map(\.name) == fresh.availableInterfaces.map(\.name)
            && path.gateways == fresh.gateways && path.status == fresh.status
    }

    // MARK: Item 3: neighbours

    @Test func anIPv4GatewayLeftForAnEqualMetricOneOnItsFirstUnansweredPacketIsFollowed() async throws {
        try await NetnsLab.withLab(NetnsLab.Setup(defaultRoutes: false)) { lab in
            try await lab.addUplink()
            try await lab.peerIP("addr", "add", Self.peerTarget + "/32", "dev", "lo")
            // ARP asks once a minute here: the entry stays INCOMPLETE (which the kernel never
            // announces) for the whole test, so only the monitor's own look can see the change.
            try await lab.setSysctl("net/ipv4/neigh/veth0/retrans_time_ms", "60000")
            // systemd-networkd's habit: every uplink's default at the same metric.
            try await lab.ip(
                "-4", "route", "add", "default", "via", NetnsLab.ipv4Gateway, "dev", "veth0", "metric", "1024")
            try await lab.ip("-4", "route", "append", "default", "via", "10.124.0.1", "dev", "veth2", "metric", "1024")
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            try await expectAgreement(monitor, in: lab)
            #expect(monitor.currentPath.primaryInterface?.name == "veth0")
            // The first router is gone (nothing answers ARP for it): a program's first packet
            // makes its neighbour entry INCOMPLETE, and the kernel routes by the second at once.
            try await Self.sendDatagram(in: lab, to: Self.peerTarget)
            let truth = try await lab.routeGet(.ipv4)
            guard case .route("veth2", _, _, _) = truth else {
                Issue.record("this kernel kept the unanswered gateway: \(truth)")
                return
            }
            await LabPoll.until("the monitor follows to veth2") {
                monitor.currentPath.primaryInterface?.name == "veth2"
            }
            #expect(monitor.currentPath.gateways.first == IPAddress("10.124.0.1"), "\(monitor.currentPath)")
            try await expectAgreement(monitor, in: lab)
            // Still nothing announced: the entry is INCOMPLETE, not FAILED.
            let entry = try await lab.ip("-4", "neigh", "show", NetnsLab.ipv4Gateway, "dev", "veth0")
            #expect(entry.contains("INCOMPLETE"), "\(entry)")
        }
    }

    @Test func aRouterAdvertisementThatChangesOnePreferenceKeepsTheOtherRouter() async throws {
        try await NetnsLab.withLab(NetnsLab.Setup(ipv4: false, ipv6: true, defaultRoutes: false)) { lab in
            // A second link with its own router; both routers advertise from the peer namespace.
            try await lab.ip("link", "add", "veth2", "type", "veth", "peer", "name", "veth3", "netns", lab.peerName)
            try await lab.ip("-6", "addr", "add", "2001:db8:124::2/64", "dev", "veth2", "nodad")
            try await lab.peerIP("-6", "addr", "add", "fe80::1/64", "dev", NetnsLab.peerInterface, "nodad")
            try await lab.peerIP("-6", "addr", "add", "fe80::2/64", "dev", "veth3", "nodad")
            try await lab.peerIP("link", "set", "veth3", "up")
            // No duplicate address detection on the new link: its link-local address is usable at
            // once, and so is the router it hears.
            try await lab.setSysctl("net/ipv6/conf/veth2/accept_dad", "0")
            try await lab.ip("link", "set", "veth2", "up")
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            try await advertise(in: lab, from: "fe80::1", on: NetnsLab.peerInterface, preference: "medium")
            try await advertise(in: lab, from: "fe80::2", on: "veth3", preference: "low")
            await LabPoll.until("both routers' defaults are in") {
                Set(monitor.currentPath.gateways) == [IPAddress("fe80::1")!, IPAddress("fe80::2")!]
            }
            try await expectAgreement(monitor, in: lab)
            #expect(monitor.currentPath.primaryInterface?.name == "veth0")
            // The second router now says "high": the kernel updates its route in place and
            // announces it with NLM_F_REPLACE; the first router's default is untouched.
            try await advertise(in: lab, from: "fe80::2", on: "veth3", preference: "high")
            let truth = try await lab.routeGet(.ipv6)
            guard case .route("veth2", _, _, _) = truth else {
                Issue.record("this kernel did not prefer the high-preference router: \(truth)")
                return
            }
            try await expectAgreement(monitor, in: lab)
            let fresh = PathMonitor.freshPath(in: lab)
            #expect(fresh.availableInterfaces.map(\.name) == ["veth2", "veth0"], "\(fresh)")
            await LabPoll.until("the path lists the first router as a fresh monitor does") {
                Self.sameAsFresh(monitor.currentPath, fresh)
            }
            #expect(Self.sameAsFresh(monitor.currentPath, fresh), "\(monitor.currentPath) vs fresh \(fresh)")
        }
    }

    /// Sends one router advertisement (router lifetime 600 s, `preference` high/medium/low) from
    /// `source` on the peer namespace's `interface`, with a raw ICMPv6 socket (the kernel fills in
    /// the checksum).
    private func advertise(
        in lab: NetnsLab, from source: String, on interface: String, preference: String
    ) async throws {
        let deadline = ContinuousClock.now + .seconds(15)
        while true {
            try await sendAdvertisement(in: lab, from: source, on: interface, preference: preference)
            // The kernel takes it in on receipt; `ip route` shows the router's route once it has.
            for _ in 0..<25 {
                let routes = try await lab.ip("-6", "route", "show", "default")
                if routes.split(separator: "\n").contains(where: {
                    $0.contains(source) && $0.contains("pref \(preference)")
                }) {
                    return
                }
                try await Task.sleep(for: .milliseconds(20))
            }
            guard ContinuousClock.now < deadline else {
                throw LabError.timedOut("the advertisement from \(source) never showed")
            }
        }
    }

    private func sendAdvertisement(
        in lab: NetnsLab, from source: String, on interface: String, preference: String
    ) async throws {
        _ = try await Self.python(
            in: lab.peerName,
            """
            import socket, struct, sys
            source, interface, preference = sys.argv[1], sys.argv[2], sys.argv[3]
            flags = {"high": 0x08, "medium": 0x00, "low": 0x18}[preference]
            index = socket.if_nametoindex(interface)
            mac = open("/sys/class/net/%s/address" % interface).read().strip()
            option = bytes([1, 1]) + bytes(int(part, 16) for part in mac.split(":"))
            message = struct.pack("!BBHBBHII", 134, 0, 0, 64, flags, 600, 0, 0) + option
            s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_HOPS, 255)
            s.bind((source, 0, 0, index))
            s.sendto(message, ("ff02::1", 0, 0, index))
            """, source, interface, preference)
    }

    // MARK: Item 4: nexthop objects

    @Test func aGroupMemberReplacedOrDeletedLeavesThePathAsAFreshMonitorSeesIt() async throws {
        try await NetnsLab.withLab(NetnsLab.Setup(defaultRoutes: false)) { lab in
            try await lab.addUplink()
            try await lab.ip("nexthop", "add", "id", "1", "via", NetnsLab.ipv4Gateway, "dev", "veth0")
            try await lab.ip("nexthop", "add", "id", "2", "via", "10.124.0.1", "dev", "veth2")
            try await lab.ip("nexthop", "add", "id", "10", "group", "1/2")
            try await lab.ip("-4", "route", "add", "default", "nhid", "10")
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            await LabPoll.until("both legs are listed") {
                Set(monitor.currentPath.availableInterfaces.map(\.name)) == ["veth0", "veth2"]
            }
            let first = IPAddress(NetnsLab.ipv4Gateway)!
            for change in [
                ["replace", "id", "10", "group", "1"], ["replace", "id", "10", "group", "1/2"], ["del", "id", "2"],
            ] {
                try await LabCommand.ip(["-n", lab.name, "nexthop"] + change)
                let truth = try await expectAgreement(monitor, in: lab)
                let legs = try await lab.ip("-4", "route", "show", "default")
                let kernelDevices = Set(["veth0", "veth2"].filter { legs.contains("dev \($0)") })
                let fresh = PathMonitor.freshPath(in: lab)
                await LabPoll.until("after `ip nexthop \(change.joined(separator: " "))` the path is a fresh one's") {
                    Self.sameAsFresh(monitor.currentPath, fresh)
                }
                #expect(
                    Set(monitor.currentPath.availableInterfaces.map(\.name)) == kernelDevices,
                    "\(change): \(monitor.currentPath), kernel: \(legs), \(truth)")
            }
            #expect(monitor.currentPath.gateways == [first], "\(monitor.currentPath)")
            #expect(!monitor.currentPath.isMultipath)
        }
    }

    // MARK: Item 5: the multipath hash

    @Test func aDestinationOverECMPTakesTheLegsTheKernelsHashGivesItsFlows() async throws {
        try await NetnsLab.withLab(NetnsLab.Setup(defaultRoutes: false)) { lab in
            try await lab.setSysctl("net/ipv4/fib_multipath_hash_policy", "0")
            // Two routers on one link: every connection has the link's source, and the hash alone
            // picks the router (6.18 also prefers legs whose source is the connection's).
            try await lab.ip(
                "-4", "route", "add", "default",
                "nexthop", "via", NetnsLab.ipv4Gateway, "dev", "veth0",
                "nexthop", "via", NetnsLab.otherIPv4Gateway, "dev", "veth0")
            let destination = "198.51.100.7"
            let monitor = PathMonitor(destination: PathDestination(destination), namespace: lab.namespace)
            monitor.start(queue: DispatchQueue(label: "ecmp-destination"))
            defer { monitor.cancel() }
            // What a program's connections get: their source, then the route from it for each
            // source port (the ports only count under a policy that hashes them).
            let source: String
            switch try await lab.connectedSource(destination) {
            case .success(let chosen): source = chosen
            case .failure(let failure): throw LabError.timedOut("connect failed: \(failure.message)")
            }
            func gateways(ports: ClosedRange<Int>) async throws -> Set<IPAddress> {
                var found = Set<IPAddress>()
                for port in ports {
                    let answer = try await lab.ip(
                        "-4", "route", "get", destination, "from", source, "ipproto", "tcp", "sport", "\(port)",
                        "dport", "443")
                    for gateway in [NetnsLab.ipv4Gateway, NetnsLab.otherIPv4Gateway]
                    where answer.contains("via \(gateway) ") {
                        found.insert(IPAddress(gateway)!)
                    }
                }
                return found
            }
            // Policy 0 (L3): every connection to the destination takes the leg the lookup names.
            let named = try await lab.routeGet(to: destination)
            guard case .route("veth0", let gateway?, _, _) = named else {
                Issue.record("no route: \(named)")
                return
            }
            #expect(try await gateways(ports: 50001...50024) == [gateway])
            await LabPoll.until("the destination's path is the named leg alone") {
                monitor.currentPath.gateways == [gateway] && !monitor.currentPath.isMultipath
            }
            #expect(monitor.currentPath.availableInterfaces.map(\.name) == ["veth0"])
            // Policy 1 (L4): the connections spread over both routers. A sysctl write sends no message.
            try await lab.setSysctl("net/ipv4/fib_multipath_hash_policy", "1")
            let spread = try await gateways(ports: 50001...50024)
            #expect(spread.count == 2, "the kernel did not spread 24 ports: \(spread)")
            await LabPoll.until("the destination's path lists the legs its flows take") {
                Set(monitor.currentPath.gateways) == spread && monitor.currentPath.isMultipath
            }
            // Back to L3, still with no message.
            try await lab.setSysctl("net/ipv4/fib_multipath_hash_policy", "0")
            await LabPoll.until("the destination's path is one leg again") {
                !monitor.currentPath.isMultipath && monitor.currentPath.gateways.count == 1
            }
            let renamed = try await lab.routeGet(to: destination)
            if case .route(_, let again?, _, _) = renamed { #expect(monitor.currentPath.gateways == [again]) }
            // The internet stands for many destinations: every leg, under any policy.
            let internet = PathMonitor.started(in: lab)
            defer { internet.cancel() }
            await LabPoll.until("the internet path lists both routers") {
                Set(internet.currentPath.gateways).count == 2
            }
        }
    }
}
