import Dispatch
import Foundation
import NetReach
import NetReachTestSupport
import Testing

/// Differential tests: each setup from a real machine is built in a namespace, and the monitor's
/// interface, gateway and status must equal what `ip -j route get` says there for the same
/// address, for IPv4 and IPv6; then the setup changes and the emitted sequence is checked.
/// VPN interfaces are tun devices held open by the test (no wireguard module here).
@Suite("Route truth: the monitor against ip route get (integration)", .offPool, .needsNamespaceRoot)
struct RouteTruthIntegrationTests {
    private static let dualStack = NetnsLab.Setup(ipv4: true, ipv6: true)

    @Test func plainDualStackAgrees() async throws {
        try await NetnsLab.withLab(Self.dualStack) { lab in
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            let truth = try await expectAgreement(monitor, in: lab)
            #expect(truth[.ipv4]?.isUsable == true && truth[.ipv6]?.isUsable == true)
        }
    }

    @Test func wgQuickFullTunnelShowsTheTunnelAndRuleChangesEmit() async throws {
        try await NetnsLab.withLab { lab in
            let tunnel = try await TunDevice.open("wg0", in: lab, address: "10.9.0.2/32")
            defer { tunnel.close() }
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            let log = PathLog.consuming(monitor.paths)
            try await expectAgreement(monitor, in: lab)
            #expect(monitor.currentPath.primaryInterface?.name == "veth0")

            // What wg-quick up does for AllowedIPs = 0.0.0.0/0.
            try await lab.ip("-4", "route", "add", "default", "dev", "wg0", "table", "51820")
            try await lab.ip("-4", "rule", "add", "not", "fwmark", "51820", "table", "51820")
            try await lab.ip("-4", "rule", "add", "table", "main", "suppress_prefixlength", "0")
            try await expectAgreement(monitor, in: lab)
            #expect(
                monitor.currentPath.primaryInterface?.name == "wg0"
                    && monitor.currentPath.primaryInterfaceType == .other)

            // wg-quick down removes the rules first: that alone must move the path back.
            try await lab.ip("-4", "rule", "del", "not", "fwmark", "51820", "table", "51820")
            try await lab.ip("-4", "rule", "del", "table", "main", "suppress_prefixlength", "0")
            try await expectAgreement(monitor, in: lab)
            // The stream delivers after `currentPath` changed, on its consumer's task: wait for it too.
            await LabPoll.until("the stream delivered the change back") { log.paths.count >= 3 }
            #expect(log.paths.map { $0.primaryInterface?.name ?? "-" } == ["veth0", "wg0", "veth0"])
        }
    }

    @Test func anExitNodeTableWithItsOwnRuleIsFollowed() async throws {
        try await NetnsLab.withLab { lab in
            let tunnel = try await TunDevice.open("tun0", in: lab, address: "100.64.0.2/32")
            defer { tunnel.close() }
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            try await lab.ip("-4", "route", "add", "default", "dev", "tun0", "table", "52")
            try await lab.ip("-4", "rule", "add", "pref", "5270", "table", "52")
            try await expectAgreement(monitor, in: lab)
            #expect(monitor.currentPath.primaryInterface?.name == "tun0")
        }
    }

    @Test func openVPNDef1RoutesWinOverTheDefault() async throws {
        try await NetnsLab.withLab { lab in
            let tunnel = try await TunDevice.open("tun0", in: lab, address: "10.8.0.6/24")
            defer { tunnel.close() }
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            // redirect-gateway def1: two /1 routes, more specific than the default they leave alone.
            try await lab.ip("-4", "route", "add", "0.0.0.0/1", "via", "10.8.0.5", "dev", "tun0")
            try await lab.ip("-4", "route", "add", "128.0.0.0/1", "via", "10.8.0.5", "dev", "tun0")
            try await expectAgreement(monitor, in: lab)
            #expect(monitor.currentPath.primaryInterface?.name == "tun0")
            #expect(monitor.currentPath.gateways.first == IPAddress("10.8.0.5"))
        }
    }

    @Test func aDefaultRouteOnlyInAnotherTableSatisfies() async throws {
        try await NetnsLab.withLab(NetnsLab.Setup(defaultRoutes: false)) { lab in
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            #expect(monitor.currentPath.unsatisfiedReason == .noDefaultRoute)
            try await lab.ip(
                "-4", "route", "add", "default", "via", NetnsLab.ipv4Gateway, "dev", "veth0", "table", "200")
            try await lab.ip("-4", "rule", "add", "pref", "200", "table", "200")
            try await expectAgreement(monitor, in: lab)
            #expect(monitor.currentPath.isLabIPv4Satisfied, "\(monitor.currentPath)")
        }
    }

    @Test(arguments: ["unreachable", "blackhole", "prohibit"])
    func aRefusingDefaultRouteWithABetterMetricIsRouteRefused(_ type: String) async throws {
        try await NetnsLab.withLab { lab in
            try await lab.ip(
                "-4", "route", "replace", "default", "via", NetnsLab.ipv4Gateway, "dev", "veth0", "metric", "100")
            try await lab.ip(
                "-4", "route", "del", "default", "via", NetnsLab.ipv4Gateway, "dev", "veth0", "metric", "0")
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            let log = PathLog.consuming(monitor.paths)
            try await lab.ip("-4", "route", "add", type, "default", "metric", "10")
            let truth = try await expectAgreement(monitor, in: lab)
            #expect(!(truth[.ipv4]?.isUsable ?? true))
            #expect(monitor.currentPath.unsatisfiedReason == .routeRefused)
            try await lab.ip("-4", "route", "del", type, "default", "metric", "10")
            try await expectAgreement(monitor, in: lab)
            #expect(await log.steps(awaiting: 3) == [.satisfied, .unsatisfied(.routeRefused), .satisfied])
        }
    }

    @Test func killSwitchRulesAreRouteRefused() async throws {
        try await NetnsLab.withLab(Self.dualStack) { lab in
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            // A prohibit rule for IPv4, a table holding `unreachable default` for IPv6.
            try await lab.ip("-4", "rule", "add", "pref", "100", "prohibit")
            try await lab.ip("-6", "route", "add", "unreachable", "default", "table", "300")
            try await lab.ip("-6", "rule", "add", "pref", "300", "table", "300")
            let truth = try await expectAgreement(monitor, in: lab)
            #expect(truth.values.allSatisfy { !$0.isUsable })
            #expect(monitor.currentPath.unsatisfiedReason == .routeRefused)
            try await lab.ip("-4", "rule", "del", "pref", "100")
            try await expectAgreement(monitor, in: lab)
            #expect(monitor.currentPath.supportsIPv4 && !monitor.currentPath.supportsIPv6)
        }
    }

    @Test func equalMetricsUseTheFirstInsertedRouteAndItDecidesExpensive() async throws {
        try await NetnsLab.withLab(NetnsLab.Setup(defaultRoutes: false)) { lab in
            try await lab.addUplink()
            let classification = InterfaceClassification(typeOverrides: ["veth2": .cellular])
            let monitor = PathMonitor(classification: classification, namespace: lab.namespace)
            monitor.start(queue: DispatchQueue(label: "equal-metrics"))
            defer { monitor.cancel() }
            // systemd-networkd gives every DHCP link metric 1024; the cellular one came up first.
            try await lab.ip("-4", "route", "add", "default", "via", "10.124.0.1", "dev", "veth2", "metric", "1024")
            // IPv4 keeps a second route of equal metric only when appended (NLM_F_APPEND).
            try await lab.ip(
                "-4", "route", "append", "default", "via", NetnsLab.ipv4Gateway, "dev", "veth0", "metric", "1024")
            try await expectAgreement(monitor, in: lab)
            #expect(monitor.currentPath.primaryInterfaceType == .cellular)
            #expect(monitor.currentPath.isExpensive)
        }
    }

    @Test func aLinkdownRouteTheKernelStillUsesIsLinkDownThoughAnotherUplinkWorks() async throws {
        try await NetnsLab.withLab { lab in
            try await lab.addUplink()
            try await lab.ip("-4", "route", "add", "default", "via", "10.124.0.1", "dev", "veth2", "metric", "500")
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            try await lab.setPeer(up: false) // veth0 loses carrier; its metric-0 route stays, linkdown
            let truth = try await expectAgreement(monitor, in: lab)
            #expect(
                truth[.ipv4]
                    == .route(
                        device: "veth0", gateway: IPAddress(NetnsLab.ipv4Gateway), source: IPAddress("10.123.0.2"),
                        linkdown: true))
            #expect(monitor.currentPath.unsatisfiedReason == .linkDown)
        }
    }

    @Test func deletingANexthopObjectUnsatisfiesAndAGroupMemberMovesTheGateway() async throws {
        try await NetnsLab.withLab(NetnsLab.Setup(defaultRoutes: false)) { lab in
            try await lab.ip("nexthop", "add", "id", "1", "via", NetnsLab.ipv4Gateway, "dev", "veth0")
            try await lab.ip("nexthop", "add", "id", "2", "via", "10.123.0.3", "dev", "veth0")
            try await lab.ip("nexthop", "add", "id", "10", "group", "1/2")
            try await lab.ip("-4", "route", "add", "default", "nhid", "10")
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            let log = PathLog.consuming(monitor.paths)
            let before = try await expectAgreement(monitor, in: lab)
            guard case .route(_, let chosen?, _, _) = before[.ipv4] else {
                Issue.record("no gateway in \(before)")
                return
            }
            // Delete the member the kernel chose: only RTM_DELNEXTHOP (and a group change) says so.
            try await lab.ip("nexthop", "del", "id", chosen == IPAddress(NetnsLab.ipv4Gateway) ? "1" : "2")
            let after = try await expectAgreement(monitor, in: lab)
            guard case .route(_, let remaining?, _, _) = after[.ipv4] else {
                Issue.record("no gateway in \(after)")
                return
            }
            #expect(remaining != chosen)
            #expect(monitor.currentPath.gateways == [remaining])
            // Deleting the last member removes the group and the route with it.
            try await lab.ip("nexthop", "del", "id", remaining == IPAddress(NetnsLab.ipv4Gateway) ? "1" : "2")
            try await expectAgreement(monitor, in: lab)
            #expect(monitor.currentPath.unsatisfiedReason == .noDefaultRoute)
            #expect(await log.steps(awaiting: 3) == [.satisfied, .satisfied, .unsatisfied(.noDefaultRoute)])
        }
    }

    @Test func nexthopRoutesCountWithCompatModeOff() async throws {
        try await NetnsLab.withLab(NetnsLab.Setup(defaultRoutes: false)) { lab in
            try await lab.setSysctl("net/ipv4/nexthop_compat_mode", "0")
            try await lab.ip("nexthop", "add", "id", "7", "via", NetnsLab.ipv4Gateway, "dev", "veth0")
            try await lab.ip("-4", "route", "add", "default", "nhid", "7")
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            try await expectAgreement(monitor, in: lab)
            #expect(monitor.currentPath.isLabIPv4Satisfied, "\(monitor.currentPath)")
            try await lab.ip("nexthop", "del", "id", "7")
            try await expectAgreement(monitor, in: lab)
            #expect(monitor.currentPath.unsatisfiedReason == .noDefaultRoute)
        }
    }

    @Test func anUnnumberedLinkSendsWithTheLoopbackAddress() async throws {
        try await NetnsLab.withLab(NetnsLab.Setup(ipv4: false, defaultRoutes: false)) { lab in
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            try await lab.ip("addr", "add", "192.0.2.77/32", "dev", "lo")
            try await lab.ip("-4", "route", "add", "default", "via", NetnsLab.ipv4Gateway, "dev", "veth0", "onlink")
            let truth = try await expectAgreement(monitor, in: lab)
            #expect(
                truth[.ipv4]
                    == .route(
                        device: "veth0", gateway: IPAddress(NetnsLab.ipv4Gateway), source: IPAddress("192.0.2.77"),
                        linkdown: false))
            #expect(monitor.currentPath.primaryInterface?.name == "veth0")
        }
    }

    @Test func anIPv4DefaultViaAnIPv6LinkLocalGatewaySatisfies() async throws {
        // RFC 5549 / BGP unnumbered: `default via inet6 fe80::1`.
        try await NetnsLab.withLab(NetnsLab.Setup(ipv4: false, defaultRoutes: false)) { lab in
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            try await lab.ip("addr", "add", "192.0.2.77/32", "dev", "lo")
            try await lab.ip("-4", "route", "add", "default", "via", "inet6", "fe80::1", "dev", "veth0")
            try await expectAgreement(monitor, in: lab)
            #expect(monitor.currentPath.supportsIPv4)
            #expect(monitor.currentPath.gateways == [IPAddress("fe80::1")!])
        }
    }

    @Test func aPrefixDelegationRouterSendsWithTheLANAddress() async throws {
        // The WAN link has only its link-local address; the delegated prefix sits on the LAN bridge.
        try await NetnsLab.withLab(NetnsLab.Setup(ipv4: false, defaultRoutes: false)) { lab in
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            try await lab.ip("link", "add", "br0", "type", "bridge")
            try await lab.ip("link", "set", "br0", "up")
            try await lab.ip("-6", "addr", "add", "2001:db8:99::1/64", "dev", "br0", "nodad")
            try await lab.ip("-6", "route", "add", "default", "via", "fe80::1", "dev", "veth0")
            let truth = try await expectAgreement(monitor, in: lab)
            #expect(truth[.ipv6]?.isUsable == true)
            #expect(monitor.currentPath.supportsIPv6 && monitor.currentPath.primaryInterface?.name == "veth0")
        }
    }

    @Test func anOptimisticAddressStillInDADIsAlreadyASource() async throws {
        try await NetnsLab.withLab(NetnsLab.Setup(ipv4: false, defaultRoutes: false)) { lab in
            for name in ["accept_dad", "optimistic_dad", "use_optimistic"] {
                try await lab.setSysctl("net/ipv6/conf/veth0/\(name)", "1")
            }
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            // Tentative (DAD runs about a second) but optimistic (RFC 4429): the kernel sends from it.
            try await lab.ip("-6", "addr", "add", "2001:db8:123::2/64", "dev", "veth0", "optimistic")
            try await lab.ip("-6", "route", "add", "default", "via", "fe80::1", "dev", "veth0")
            let truth = try await expectAgreement(monitor, in: lab)
            #expect(
                truth[.ipv6]
                    == .route(
                        device: "veth0", gateway: IPAddress("fe80::1"), source: IPAddress("2001:db8:123::2"),
                        linkdown: false))
            #expect(monitor.currentPath.supportsIPv6)
        }
    }

    @Test func anExpiredRouterAdvertisementRouteStopsCountingWhenItExpires() async throws {
        try await NetnsLab.withLab(NetnsLab.Setup(ipv4: false, ipv6: true, defaultRoutes: false)) { lab in
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            let log = PathLog.consuming(monitor.paths)
            try await lab.ip("-6", "route", "add", "default", "via", "fe80::1", "dev", "veth0", "expires", "2")
            await LabPoll.until("IPv6 is supported") { monitor.currentPath.supportsIPv6 }
            // The stream delivers after `currentPath`: wait for it to show the route too, so the
            // next wait is for the expiry and not for the first, unsatisfied path.
            await LabPoll.until("the stream saw the route") { log.last?.status == .satisfied || log.paths.count >= 3 }
            // The kernel stops using the route at once but deletes it only at its next garbage
            // collection, 20 s or more later, with no message before: the monitor must not wait.
            await LabPoll.until("the expired route no longer counts", timeout: .seconds(10)) {
                log.last?.unsatisfiedReason == .noDefaultRoute
            }
            try await expectAgreement(monitor, in: lab)
            #expect(log.steps == [.unsatisfied(.noDefaultRoute), .satisfied, .unsatisfied(.noDefaultRoute)])
        }
    }

    @Test func aProhibitedKernelChoiceIsJudgedAsTrafficBoundToAnAllowedInterface() async throws {
        try await NetnsLab.withLab(NetnsLab.Setup(defaultRoutes: false)) { lab in
            try await lab.addUplink()
            try await lab.ip("-4", "route", "add", "default", "via", "10.124.0.1", "dev", "veth2", "metric", "100")
            try await lab.ip(
                "-4", "route", "add", "default", "via", NetnsLab.ipv4Gateway, "dev", "veth0", "metric", "600")
            let classification = InterfaceClassification(typeOverrides: ["veth2": .cellular])
            let noCellular = PathMonitor(
                prohibitedInterfaceTypes: [.cellular], classification: classification, namespace: lab.namespace)
            noCellular.start(queue: DispatchQueue(label: "no-cellular"))
            defer { noCellular.cancel() }
            // What a socket bound to veth0 would get, as Network.framework scopes such a connection.
            let bound = try await lab.routeGet(.ipv4, oif: "veth0")
            #expect(bound.isUsable)
            await LabPoll.until("the monitor uses veth0") { noCellular.currentPath.primaryInterface?.name == "veth0" }
            #expect(!noCellular.currentPath.isExpensive)
            // A kill switch refuses bound traffic too: the bound lookup is asked again.
            try await lab.ip("-4", "rule", "add", "pref", "100", "oif", "veth0", "prohibit")
            #expect(!(try await lab.routeGet(.ipv4, oif: "veth0").isUsable))
            await LabPoll.until("veth0 no longer counts") { noCellular.currentPath.status == .unsatisfied }
        }
    }
}
