import Dispatch
import Foundation
import NetReach
import NetReachSystem
import NetReachTestSupport
import Testing

/// The monitor against what a program gets when the packet matters beyond its addresses: a source
/// the kernel hands out while duplicate address detection runs (`::1`, which no connection from it
/// survives), a source whose DAD failed, and policy rules that split traffic by protocol and port.
/// The references: a UDP `connect()`'s source (`getsockname`), `ip route get ... ipproto P sport S
/// dport D` with and without `from SOURCE`, and a real TCP connection to a listener in the lab's
/// peer namespace.
@Suite("Ask with the app's packet and a usable source (integration)", .offPool, .needsNamespaceRoot, .serialized)
struct PacketTruthIntegrationTests {
    private static let bare = NetnsLab.Setup(ipv4: false, ipv6: false, defaultRoutes: false)
    private static let address = "2001:db8:123::2"

    /// Makes DAD on the lab's `veth0` last `transmits` seconds (one probe a second), gives the
    /// peer the gateway's address without DAD, adds the lab's global address, and brings `veth0`
    /// down and up, so that link-up starts DAD of both its addresses (link-local and global) at
    /// once, as on a host just plugged in; then a default route through the gateway.
    private static func addTentativeAddress(in lab: NetnsLab, transmits: Int) async throws {
        try await lab.setSysctl("net/ipv6/conf/veth0/dad_transmits", "\(transmits)")
        try await lab.setSysctl("net/ipv6/neigh/veth0/retrans_time_ms", "1000")
        try await lab.peerIP("addr", "add", NetnsLab.ipv6Gateway + "/64", "dev", "veth1", "nodad")
        try await lab.setLink(up: false)
        try await lab.ip("addr", "add", address + "/64", "dev", "veth0")
        try await lab.setLink(up: true)
        try await lab.ip("-6", "route", "add", "default", "via", NetnsLab.ipv6Gateway, "dev", "veth0")
    }

    /// The DAD state of the lab's global address as `ip addr` shows it: "tentative", "dadfailed"
    /// or "" (done).
    private static func dadState(in lab: NetnsLab) async throws -> String {
        let line = try await lab.ip("-6", "-o", "addr", "show", "dev", "veth0", "scope", "global")
        if line.contains("dadfailed") { return "dadfailed" }
        return line.contains("tentative") ? "tentative" : ""
    }

    @Test func whileDADRunsTheLoopbackSourceIsNoPathAndItsEndIsFollowed() async throws {
        try await NetnsLab.withLab(Self.bare) { lab in
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            let log = PathLog.consuming(monitor.paths)
            try await Self.addTentativeAddress(in: lab, transmits: 12)
            // The kernel, during DAD: connect() gets ::1, and `ip route get` says `src ::1` too.
            // All three asked before the monitor is waited for, and DAD checked after them: on a
            // busy run the wait took most of a shorter DAD, and the reference then saw its end.
            let target = RouteTruth.lookupAddress(.ipv6)
            let during = try await lab.connectedSource(target)
            let routeDuring = try await lab.ip("-6", "route", "get", target, "ipproto", "tcp", "dport", "443")
            let truthDuring = try await lab.routeGet(.ipv6)
            let stillTentative = try await Self.dadState(in: lab) == "tentative"
            try #require(stillTentative, "DAD ended before the checks ran: the machine is too slow for 12 s of DAD")
            #expect(during.sourceAddress == "::1", "connect() during DAD: \(during)")
            #expect(routeDuring.contains("src ::1"), "ip route get during DAD: \(routeDuring)")
            #expect(!truthDuring.isUsable, "the reference during DAD: \(truthDuring)")
            await LabPoll.until("the monitor says no address") { monitor.currentPath == .unsatisfied(.noAddress) }
            // Until DAD ends, the monitor never says satisfied; once it does, it follows at once
            // (RTM_NEWADDR without IFA_F_TENTATIVE asks the kernel again).
            // The monitor is read before `ip addr`: a path read while DAD still ran afterwards
            // was read during DAD (read the other way round, DAD could end in between).
            let deadline = ContinuousClock.now + .seconds(40)
            while ContinuousClock.now < deadline {
                let path = monitor.currentPath
                guard try await Self.dadState(in: lab) == "tentative" else { break }
                #expect(path.status == .unsatisfied, "satisfied during DAD: \(path)")
                try await Task.sleep(for: .milliseconds(20))
            }
            let ended = ContinuousClock.now
            #expect(try await Self.dadState(in: lab) == "", "DAD did not end within 40 s")
            await LabPoll.until("the monitor is satisfied after DAD") { monitor.currentPath.status == .satisfied }
            print("DAD ended; the monitor was satisfied \(ContinuousClock.now - ended) after `ip addr` showed it")
            #expect(try await lab.connectedSource(target).sourceAddress == Self.address)
            try await expectAgreement(monitor, in: lab)
            #expect(monitor.currentPath.primaryInterface?.name == "veth0")
            // The stream: no address (perhaps after what the bare lab said first), then satisfied.
            let steps = await log.steps(awaiting: 2)
            #expect(steps.suffix(2) == [.unsatisfied(.noAddress), .satisfied], "\(log.paths)")
        }
    }

    @Test func aSourceWhoseDADFailedIsNoPath() async throws {
        try await NetnsLab.withLab(Self.bare) { lab in
            // Someone on the link already has the address.
            try await lab.peerIP("addr", "add", Self.address + "/64", "dev", "veth1", "nodad")
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            try await Self.addTentativeAddress(in: lab, transmits: 1)
            let deadline = ContinuousClock.now + .seconds(30)
            while try await Self.dadState(in: lab) != "dadfailed", ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            try #require(try await Self.dadState(in: lab) == "dadfailed", "the duplicate was never detected")
            let source = try await lab.connectedSource(RouteTruth.lookupAddress(.ipv6))
            #expect(source.sourceAddress != Self.address, "connect() took the duplicate address: \(source)")
            await LabPoll.until("the monitor says no address") { monitor.currentPath == .unsatisfied(.noAddress) }
            try await expectAgreement(monitor, in: lab)
            #expect(PathMonitor.freshPath(in: lab) == .unsatisfied(.noAddress))
        }
    }

    @Test func anUnspecifiedIPv4SourceIsNoPath() async throws {
        // A route through a device, and no IPv4 address anywhere: connect() gets 0.0.0.0.
        try await NetnsLab.withLab(Self.bare) { lab in
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            try await lab.ip("-4", "route", "add", "default", "dev", "veth0")
            let target = RouteTruth.lookupAddress(.ipv4)
            #expect(try await lab.connectedSource(target).sourceAddress == "0.0.0.0")
            #expect(!(try await lab.ip("-4", "route", "get", target)).contains(" src "))
            await LabPoll.until("the monitor says no address") { monitor.currentPath == .unsatisfied(.noAddress) }
            try await expectAgreement(monitor, in: lab)
        }
    }

    @Test func anIPv4SourceHeldByADownInterfaceStillCarriesTraffic() async throws {
        // Weak host: the kernel keeps a downed interface's local routes, so a route whose `src`
        // is that interface's address still gets answers. A real TCP connection is the reference.
        try await NetnsLab.withLab(NetnsLab.Setup(defaultRoutes: false)) { lab in
            try await lab.addUplink("veth2", peer: "veth3", address: "10.124.0.2/24")
            try await lab.peerIP("link", "set", "lo", "up")
            try await lab.peerIP("addr", "add", "10.123.0.1/24", "dev", "veth1")
            try await lab.peerIP("addr", "add", "10.200.0.1/32", "dev", "lo")
            try await lab.peerIP("route", "add", "10.124.0.0/24", "via", "10.123.0.2", "dev", "veth1")
            try await lab.ip(
                "-4", "route", "add", "default", "via", NetnsLab.ipv4Gateway, "dev", "veth0", "src", "10.124.0.2")
            try await lab.ip("link", "set", "veth2", "down")
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            #expect(try await lab.tcpConnect(to: "10.200.0.1", port: 443) == "connected 10.124.0.2")
            try await expectAgreement(monitor, in: lab)
            #expect(monitor.currentPath.status == .satisfied && monitor.currentPath.primaryInterface?.name == "veth0")
        }
    }

    // MARK: Rules that split traffic by protocol and port

    /// Two uplinks: `veth0` (10.123.0.2, main table's default) and the "VPN" `veth2` (10.124.0.2,
    /// table 100's default); the peer holds both gateways and a server at 10.200.0.1.
    private static func twoUplinks(_ lab: NetnsLab) async throws {
        try await lab.addUplink("veth2", peer: "veth3", address: "10.124.0.2/24")
        try await lab.ip("-4", "route", "add", "default", "via", "10.124.0.1", "dev", "veth2", "table", "100")
        try await lab.peerIP("link", "set", "lo", "up")
        try await lab.peerIP("addr", "add", "10.123.0.1/24", "dev", "veth1")
        try await lab.peerIP("addr", "add", "10.124.0.1/24", "dev", "veth3")
        try await lab.peerIP("addr", "add", "10.200.0.1/32", "dev", "lo")
    }

    /// The device a reference answer names, `nil` for an error.
    private static func device(_ truth: RouteTruth) -> String? {
        if case .route(let device, _, _, _) = truth { device } else { nil }
    }

    @Test func aRuleForTCP443SendsTheWebPathThroughTheVPNAndDNSStaysOnTheUplink() async throws {
        try await NetnsLab.withLab { lab in
            try await Self.twoUplinks(lab)
            let web = PathMonitor(namespace: lab.namespace)
            let dns = PathMonitor(port: 53, protocol: .udp, namespace: lab.namespace)
            web.start(queue: DispatchQueue(label: "web"))
            dns.start(queue: DispatchQueue(label: "dns"))
            defer {
                web.cancel()
                dns.cancel()
            }
            try await lab.ip("-4", "rule", "add", "ipproto", "tcp", "dport", "443", "table", "100")
            let target = RouteTruth.lookupAddress(.ipv4)
            let tcp = try await lab.routeGet(to: target)
            let udp = try await lab.routeGet(to: target, transport: "udp", port: 53)
            #expect(Self.device(tcp) == "veth2" && Self.device(udp) == "veth0", "tcp: \(tcp), udp: \(udp)")
            // The stand-in of before, a UDP lookup to 443, says the uplink.
            #expect(
                try await lab.ip("-4", "route", "get", target, "ipproto", "udp", "dport", "443").contains("dev veth0"))
            await LabPoll.until("the web path goes through the VPN") {
                disagreement(web.currentPath, [.ipv4: tcp]) == nil
            }
            await LabPoll.until("the DNS path stays on the uplink") {
                disagreement(dns.currentPath, [.ipv4: udp]) == nil
            }
            #expect(web.currentPath.primaryInterface?.name == "veth2", "\(web.currentPath)")
            #expect(dns.currentPath.primaryInterface?.name == "veth0", "\(dns.currentPath)")
        }
    }

    @Test func aTCPConnectionGoesWhereTheMonitorSaysWithTheSourceItSays() async throws {
        try await NetnsLab.withLab { lab in
            try await Self.twoUplinks(lab)
            // The peer refuses TCP/443 that arrives over the uplink: a connection completes only
            // through the VPN. (Its local table moves behind the refusing rule.)
            try await lab.peerIP("rule", "add", "pref", "100", "table", "local")
            try await lab.peerIP("rule", "del", "pref", "0", "table", "local")
            try await lab.peerIP(
                "rule", "add", "pref", "10", "iif", "veth1", "ipproto", "tcp", "dport", "443", "prohibit")
            try await lab.ip("-4", "rule", "add", "ipproto", "tcp", "dport", "443", "table", "100")
            let server = "10.200.0.1"
            let source = SystemPathSource(configuration: .init(namespace: lab.namespace))
            let monitor = PathMonitor(destination: .address(IPAddress(server)!), source: source)
            let snapshots = Locked<SystemSnapshot?>(nil)
            let subscription = try source.subscribe { snapshot in snapshots.withLock { $0 = snapshot } }
            monitor.start(queue: DispatchQueue(label: "tcp-destination"))
            defer {
                monitor.cancel()
                subscription.cancel()
            }
            await LabPoll.until("the monitor names the VPN") { monitor.currentPath.primaryInterface?.name == "veth2" }
            let connected = try await lab.tcpConnect(to: server, port: 443)
            #expect(connected.hasPrefix("connected 10.124.0.2"), "a real TCP connect: \(connected)")
            // The monitor's source is the one the connection got, not the UDP probe's 10.123.0.2.
            let lookup = snapshots.withLock { $0?.destinationLookups[IPAddress(server)!] }
            guard case .route(let route) = lookup else {
                Issue.record("no route in the snapshot: \(String(describing: lookup))")
                return
            }
            #expect(route.source == IPAddress("10.124.0.2"), "\(route)")
            // `ip route get` from that source with the packet says the same.
            let port = try await lab.firstLocalPort()
            let answer = try await lab.ip(
                "-4", "route", "get", server, "from", "10.124.0.2", "ipproto", "tcp", "sport", "\(port)", "dport", "443"
            )
            #expect(answer.contains("dev veth2"), "\(answer)")
        }
    }

    @Test func anIPv6RuleForTCP443TakesTheVPNsSourceAsATCPConnectDoes() async throws {
        try await NetnsLab.withLab(NetnsLab.Setup(ipv4: false, ipv6: true)) { lab in
            try await lab.setSysctl("net/ipv6/conf/default/accept_dad", "0")
            try await lab.addUplink("veth2", peer: "veth3", address: "2001:db8:124::2/64")
            try await lab.ip("-6", "route", "add", "default", "via", "2001:db8:124::1", "dev", "veth2", "table", "100")
            try await lab.ip("-6", "rule", "add", "ipproto", "tcp", "dport", "443", "table", "100")
            // A host in the peer namespace (nothing listens: the SYN goes no further than the lab).
            let server = "2001:db8:200::1"
            let source = SystemPathSource(configuration: .init(namespace: lab.namespace))
            let snapshots = Locked<SystemSnapshot?>(nil)
            let subscription = try source.subscribe { snapshot in snapshots.withLock { $0 = snapshot } }
            let web = PathMonitor(destination: .address(IPAddress(server)!), source: source)
            let dns = PathMonitor(
                destination: .address(IPAddress(server)!), port: 53, protocol: .udp, namespace: lab.namespace)
            web.start(queue: DispatchQueue(label: "web6"))
            dns.start(queue: DispatchQueue(label: "dns6"))
            defer {
                web.cancel()
                dns.cancel()
                subscription.cancel()
            }
            let tcp = try await lab.routeGet(to: server)
            let udp = try await lab.routeGet(to: server, transport: "udp", port: 53)
            #expect(Self.device(tcp) == "veth2" && Self.device(udp) == "veth0", "tcp: \(tcp), udp: \(udp)")
            await LabPoll.until("the web path goes through the VPN") {
                disagreement(web.currentPath, [.ipv6: tcp]) == nil
            }
            await LabPoll.until("the DNS path stays on the uplink") {
                disagreement(dns.currentPath, [.ipv6: udp]) == nil
            }
            // The source a real TCP connect gets (non-blocking: the SYN leaves, nothing waits).
            let connected = try await lab.tcpSource(to: server, port: 443)
            #expect(connected == "2001:db8:124::2", "TCP connect's source: \(connected)")
            let lookup = snapshots.withLock { $0?.destinationLookups[IPAddress(server)!] }
            guard case .route(let route) = lookup else {
                Issue.record("no route in the snapshot: \(String(describing: lookup))")
                return
            }
            #expect(route.source.map { "\($0)" } == connected, "\(route)")
        }
    }

    @Test func aSourcePortRuleMovesTheRouteButNotTheSourceOfTCP() async throws {
        // `sport` rules see a TCP connection's port only after its source is chosen (from no
        // source port): the kernel routes it through table 100 from the uplink's address.
        try await NetnsLab.withLab { lab in
            try await Self.twoUplinks(lab)
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            let port = try await lab.firstLocalPort()
            try await lab.ip("-4", "rule", "add", "sport", "\(port)-\(port)", "table", "100")
            let target = RouteTruth.lookupAddress(.ipv4)
            let truth = try await lab.routeGet(to: target)
            #expect(Self.device(truth) == "veth2", "\(truth)")
            // Without the port the kernel says the uplink: the stand-in of before.
            #expect(
                try await lab.ip("-4", "route", "get", target, "ipproto", "tcp", "dport", "443").contains("dev veth0"))
            try await expectAgreement(monitor, in: lab)
            #expect(monitor.currentPath.primaryInterface?.name == "veth2", "\(monitor.currentPath)")
        }
    }
}

extension NetnsLab {
    /// Connects a TCP socket from the lab to `address`:`port` (5 s at most) and says
    /// `connected SOURCE` (its `getsockname`) or `error ERRNO MESSAGE`.
    fileprivate func tcpConnect(to address: String, port: UInt16) async throws -> String {
        let listener = try ChildProcess(
            LabCommand.ipExecutable,
            [
                "netns", "exec", peerName, "python3", "-c",
                """
                import socket, sys
                s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind((sys.argv[1], int(sys.argv[2]))); s.listen(1); print("ready", flush=True)
                s.settimeout(30); c, _ = s.accept(); c.close()
                """, address, "\(port)",
            ])
        defer { listener.kill() }
        guard await listener.nextLine(timeout: .seconds(30)) == "ready" else {
            throw LabError.systemCall("listen on \(address):\(port)", listener.standardError)
        }
        let script = """
            import socket, sys
            s = socket.socket(); s.settimeout(5)
            try:
                s.connect((sys.argv[1], int(sys.argv[2]))); print("connected", s.getsockname()[0])
            except OSError as error:
                print("error", error.errno, error.strerror)
            """
        return try await LabCommand.ip(["netns", "exec", name, "python3", "-c", script, address, "\(port)"])
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

extension NetnsLab {
    /// The source a TCP socket in the lab gets from `connect` to `address`:`port`, read with
    /// `getsockname` right after a non-blocking `connect` (its SYN goes to the lab's peer only).
    fileprivate func tcpSource(to address: String, port: UInt16) async throws -> String {
        let script = """
            import socket, sys
            family = socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET
            s = socket.socket(family, socket.SOCK_STREAM); s.setblocking(False)
            try:
                s.connect((sys.argv[1], int(sys.argv[2])))
            except BlockingIOError:
                pass
            except OSError as error:
                print("error", error.errno, error.strerror); sys.exit()
            print(s.getsockname()[0])
            """
        return try await LabCommand.ip(["netns", "exec", name, "python3", "-c", script, address, "\(port)"])
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

extension Result<String, NetnsLab.ConnectError> {
    /// The source address, or `nil` when `connect` failed.
    fileprivate var sourceAddress: String? { if case .success(let source) = self { source } else { nil } }
}
