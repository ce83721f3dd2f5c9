import Dispatch
import Foundation
import NetReach
import NetReachTestSupport
import Testing

/// The monitor against what a program gets, in setups where a stand-in answers wrongly: a lookup
/// without the source the kernel picks (`ip route get ADDRESS`), one address standing for the
/// internet, a route's old lifetime, a router the kernel no longer uses, a setting with no route
/// message. The reference is ``RouteTruth``: a connected UDP socket's source in the lab, then
/// `ip route get ADDRESS from SOURCE`.
@Suite("Ask what connect() gets (integration)", .offPool, .needsNamespaceRoot)
struct ConnectTruthIntegrationTests {
    private static let ipv6Only = NetnsLab.Setup(ipv4: false, ipv6: true, defaultRoutes: false)

    // MARK: The source decides the route

    @Test func anIPv6SourceRuleWithTheOnlyDefaultInItsTableSatisfies() async throws {
        try await NetnsLab.withLab(Self.ipv6Only) { lab in
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            try await lab.ip(
                "-6", "route", "add", "default", "via", NetnsLab.ipv6Gateway, "dev", "veth0", "table", "100")
            try await lab.ip("-6", "rule", "add", "from", "2001:db8:123::/64", "table", "100")
            // The stand-in: a lookup with no source matches no rule and finds no route...
            let sourceless = try? await lab.ip("-6", "route", "get", RouteTruth.lookupAddress(.ipv6))
            #expect(sourceless == nil, "ip route get without a source found a route: \(sourceless ?? "")")
            // ...while a program's socket gets its source first and is routed by table 100.
            let truth = try await expectAgreement(monitor, in: lab)
            #expect(truth[.ipv6]?.isUsable == true, "\(truth)")
            #expect(monitor.currentPath.supportsIPv6 && monitor.currentPath.primaryInterface?.name == "veth0")
        }
    }

    @Test func anIPv6SourceSpecificDefaultSatisfies() async throws {
        // How odhcp6c, hnetd and babeld multihome: `default from PREFIX via ROUTER`.
        try await NetnsLab.withLab(Self.ipv6Only) { lab in
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            try await lab.ip(
                "-6", "route", "add", "default", "from", "2001:db8:123::/64", "via", NetnsLab.ipv6Gateway, "dev",
                "veth0")
            let truth = try await expectAgreement(monitor, in: lab)
            #expect(truth[.ipv6]?.isUsable == true, "\(truth)")
            #expect(monitor.currentPath.supportsIPv6)
            #expect(monitor.currentPath.gateways == [IPAddress(NetnsLab.ipv6Gateway)!])
            // Deleting it is seen as well.
            try await lab.ip(
                "-6", "route", "del", "default", "from", "2001:db8:123::/64", "via", NetnsLab.ipv6Gateway, "dev",
                "veth0")
            try await expectAgreement(monitor, in: lab)
            #expect(monitor.currentPath.unsatisfiedReason == .noDefaultRoute)
        }
    }

    @Test func anIPv4RuleFromTheChosenSourceSendsThroughTheTunnel() async throws {
        try await NetnsLab.withLab { lab in
            let tunnel = try await TunDevice.open("tun0", in: lab, address: "10.9.0.2/24")
            defer { tunnel.close() }
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            try await lab.ip("-4", "route", "add", "default", "dev", "tun0", "table", "100")
            try await lab.ip("-4", "rule", "add", "from", "10.123.0.2", "table", "100")
            // `ip route get` without a source says veth0; a connection from 10.123.0.2 goes through tun0.
            #expect(try await lab.ip("-4", "route", "get", RouteTruth.lookupAddress(.ipv4)).contains("dev veth0"))
            let truth = try await expectAgreement(monitor, in: lab)
            #expect(
                truth[.ipv4] == .route(device: "tun0", gateway: nil, source: IPAddress("10.123.0.2"), linkdown: false),
                "\(truth)")
            #expect(monitor.currentPath.primaryInterface?.name == "tun0")
        }
    }

    // MARK: The internet is not one address

    @Test func aVPNHostRouteToItsDNSServerDoesNotMoveTheWholePath() async throws {
        try await NetnsLab.withLab { lab in
            let tunnel = try await TunDevice.open("tun0", in: lab, address: "10.9.0.2/24")
            defer { tunnel.close() }
            let classification = InterfaceClassification(typeOverrides: ["veth0": .cellular])
            let monitor = PathMonitor(classification: classification, namespace: lab.namespace)
            monitor.start(queue: DispatchQueue(label: "vpn-dns"))
            defer { monitor.cancel() }
            // A corporate VPN pushes only a route to its DNS server.
            try await lab.ip("-4", "route", "add", "8.8.8.8/32", "dev", "tun0")
            #expect(try await lab.ip("-4", "route", "get", "8.8.8.8").contains("dev tun0"))
            try await expectAgreement(monitor, in: lab)
            #expect(monitor.currentPath.primaryInterface?.name == "veth0", "\(monitor.currentPath)")
            #expect(monitor.currentPath.isExpensive, "all other traffic goes over the cellular link")
            #expect(!monitor.currentPath.usesInterfaceType(.other), "\(monitor.currentPath)")
        }
    }

    @Test func blackholedResolversDoNotUnsatisfyThePath() async throws {
        try await NetnsLab.withLab(NetnsLab.Setup(ipv4: true, ipv6: true)) { lab in
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            let log = PathLog.consuming(monitor.paths)
            // A network that blocks hard-coded DNS servers.
            try await lab.ip("-4", "route", "add", "blackhole", "8.8.8.8/32")
            try await lab.ip("-6", "route", "add", "blackhole", "2001:4860:4860::8888/128")
            #expect(try await lab.connectedSource("8.8.8.8").failureMessage == "Invalid argument")
            let truth = try await expectAgreement(monitor, in: lab)
            #expect(truth[.ipv4]?.isUsable == true && truth[.ipv6]?.isUsable == true)
            #expect(monitor.currentPath.supportsIPv4 && monitor.currentPath.supportsIPv6, "\(monitor.currentPath)")
            await LabPoll.settle()
            #expect(
                await log.steps(awaiting: 1) == [.satisfied], "nothing changed for the internet at large: \(log.paths)")
        }
    }

    // MARK: Changes without a route message

    @Test func aShortenedLifetimeIsFollowed() async throws {
        try await NetnsLab.withLab(Self.ipv6Only) { lab in
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            try await lab.ip("-6", "route", "add", "default", "via", "fe80::1", "dev", "veth0", "expires", "600")
            await LabPoll.until("IPv6 is supported") { monitor.currentPath.supportsIPv6 }
            // A new router advertisement with a short lifetime replaces the route.
            try await lab.ip("-6", "route", "replace", "default", "via", "fe80::1", "dev", "veth0", "expires", "2")
            // Expired within its new lifetime (2 s), not the old one (600 s): 30 s is a twentieth of that.
            await LabPoll.until("the route stops counting at its new lifetime", timeout: .seconds(30)) {
                monitor.currentPath.unsatisfiedReason == .noDefaultRoute
            }
            try await expectAgreement(monitor, in: lab)
        }
    }

    @Test func anIPv6RouterThatStopsAnsweringIsLeftForTheNextOne() async throws {
        try await NetnsLab.withLab(Self.ipv6Only) { lab in
            // Two routers; the kernel prefers the first (lower metric) while it may be reachable.
            try await lab.ip(
                "-6", "neigh", "replace", "fe80::1", "dev", "veth0", "lladdr", "02:00:00:00:00:01", "nud", "reachable")
            try await lab.ip(
                "-6", "neigh", "replace", "fe80::2", "dev", "veth0", "lladdr", "02:00:00:00:00:02", "nud", "reachable")
            try await lab.ip("-6", "route", "add", "default", "via", "fe80::1", "dev", "veth0", "metric", "1024")
            try await lab.ip("-6", "route", "add", "default", "via", "fe80::2", "dev", "veth0", "metric", "1025")
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            try await expectAgreement(monitor, in: lab)
            #expect(monitor.currentPath.gateways.first == IPAddress("fe80::1"))
            // Neighbour discovery gives up on the first: only its neighbour entry says so. The
            // entry is marked `extern_learn` so that the kernel's neighbour garbage collection
            // leaves it: the neighbour table is shared by every namespace, and once it holds more
            // than `gc_thresh1` (128) entries, as it can with many labs at once, a FAILED entry is
            // collected within seconds and the kernel takes the first router again (the end of
            // this test). Its route choice (`rt6_check_neigh`) reads the state alone.
            try await lab.ip(
                "-6", "neigh", "replace", "fe80::1", "dev", "veth0", "nud", "failed", "extern_learn")
            var truth = try await lab.routeTruth()
            guard case .route(_, IPAddress("fe80::2"), _, _)? = truth[.ipv6] else {
                Issue.record("this kernel does not fail over on a failed neighbour: \(truth)")
                return
            }
            try await expectAgreement(monitor, in: lab)
            #expect(monitor.currentPath.gateways.first == IPAddress("fe80::2"), "\(monitor.currentPath)")
            // The failed entry gone, as garbage collection removes it on a busy host: with no
            // entry the kernel counts the first router as reachable and goes back to it, and only
            // the neighbour's deletion says so.
            try await lab.ip("-6", "neigh", "del", "fe80::1", "dev", "veth0")
            truth = try await lab.routeTruth()
            guard case .route(_, IPAddress("fe80::1"), _, _)? = truth[.ipv6] else {
                Issue.record("this kernel does not go back to a router with no neighbour entry: \(truth)")
                return
            }
            try await expectAgreement(monitor, in: lab)
            #expect(monitor.currentPath.gateways.first == IPAddress("fe80::1"), "\(monitor.currentPath)")
        }
    }

    @Test func ignoringLinkdownRoutesFailsOverWithOnlyANetconfMessage() async throws {
        try await NetnsLab.withLab(NetnsLab.Setup(defaultRoutes: false)) { lab in
            try await lab.addUplink()
            try await lab.ip(
                "-4", "route", "add", "default", "via", NetnsLab.ipv4Gateway, "dev", "veth0", "metric", "100")
            try await lab.ip("-4", "route", "add", "default", "via", "10.124.0.1", "dev", "veth2", "metric", "200")
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            // veth0 loses carrier: its route stays and the kernel keeps using it.
            try await lab.peerIP("link", "set", NetnsLab.peerInterface, "down")
            await LabPoll.until("veth0's route is linkdown") { monitor.currentPath.unsatisfiedReason == .linkDown }
            try await expectAgreement(monitor, in: lab)
            // Now the kernel skips linkdown routes: the only message is RTM_NEWNETCONF.
            try await lab.setSysctl("net/ipv4/conf/all/ignore_routes_with_linkdown", "1")
            try await expectAgreement(monitor, in: lab)
            #expect(monitor.currentPath.primaryInterface?.name == "veth2", "\(monitor.currentPath)")
        }
    }

    @Test func anECMPRouteIsMultipathWithEveryLeg() async throws {
        try await NetnsLab.withLab(NetnsLab.Setup(defaultRoutes: false)) { lab in
            try await lab.addUplink()
            try await lab.ip(
                "-4", "route", "add", "default",
                "nexthop", "via", NetnsLab.ipv4Gateway, "dev", "veth0", "nexthop", "via", "10.124.0.1", "dev", "veth2")
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            try await expectAgreement(monitor, in: lab)
            let path = monitor.currentPath
            #expect(path.isMultipath, "\(path)")
            #expect(Set(path.availableInterfaces.map(\.name)) == ["veth0", "veth2"], "\(path)")
            #expect(Set(path.gateways) == [IPAddress(NetnsLab.ipv4Gateway)!, IPAddress("10.124.0.1")!], "\(path)")
            // One leg loses carrier: the kernel marks it linkdown and the path no longer lists it.
            try await lab.peerIP("link", "set", "veth3", "down")
            await LabPoll.until("the dead leg is gone") {
                monitor.currentPath.availableInterfaces.map(\.name) == ["veth0"]
            }
            #expect(!monitor.currentPath.isMultipath, "\(monitor.currentPath)")
        }
    }
}

extension ConnectTruthIntegrationTests {
    @Test func aMultipathLegWhoseNeighbourFailedIsLeftOutWithUseNeigh() async throws {
        try await NetnsLab.withLab(NetnsLab.Setup(defaultRoutes: false)) { lab in
            try await lab.addUplink()
            try await lab.setSysctl("net/ipv4/fib_multipath_use_neigh", "1")
            try await lab.ip(
                "-4", "route", "add", "default",
                "nexthop", "via", NetnsLab.ipv4Gateway, "dev", "veth0", "nexthop", "via", "10.124.0.1", "dev", "veth2")
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            await LabPoll.until("both legs are listed") { monitor.currentPath.isMultipath }
            // The second router answered ARP once...
            try await lab.ip(
                "-4", "neigh", "replace", "10.124.0.1", "dev", "veth2", "lladdr", "02:00:00:00:00:09", "nud",
                "reachable")
            // ...then ARP gives up on it: only its neighbour entry says so, and the kernel sends
            // every flow through the first. (An entry made FAILED that was never valid is not
            // announced at all, on 6.18: no real entry goes that way, ARP passes INCOMPLETE.)
            // `extern_learn` keeps garbage collection off it, as in the IPv6 test above.
            try await lab.ip(
                "-4", "neigh", "replace", "10.124.0.1", "dev", "veth2", "nud", "failed", "extern_learn")
            for port in 1...8 {
                let probe = try await lab.ip(
                    "-4", "route", "get", "203.0.113.\(port)", "ipproto", "udp", "sport", "\(40000 + port)", "dport",
                    "443")
                #expect(!probe.contains("veth2"), "the kernel still uses the failed leg: \(probe)")
            }
            await LabPoll.until("the failed leg is gone") { !monitor.currentPath.isMultipath }
            #expect(monitor.currentPath.gateways == [IPAddress(NetnsLab.ipv4Gateway)!], "\(monitor.currentPath)")
            #expect(monitor.currentPath.availableInterfaces.map(\.name) == ["veth0"], "\(monitor.currentPath)")
            try await expectAgreement(monitor, in: lab)
            // Reachable again: both legs.
            try await lab.ip(
                "-4", "neigh", "replace", "10.124.0.1", "dev", "veth2", "lladdr", "02:00:00:00:00:09", "nud",
                "reachable")
            await LabPoll.until("the leg is back") { monitor.currentPath.isMultipath }
        }
    }
}

extension Result where Failure == NetnsLab.ConnectError {
    /// The error's text, `nil` on success.
    var failureMessage: String? {
        if case .failure(let error) = self { return error.message }
        return nil
    }
}
