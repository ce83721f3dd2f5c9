import Foundation
import MetricsTestKit
import NetReachTestSupport
import Testing

@testable import NetReach

/// The engine's metrics against the kernel in a namespace lab, read from a factory of the test's
/// own: each notification read counted by kind (a route that covers nothing watched is not
/// read), the kernel asked again only when its answer may have changed, and an overrun counted as
/// a resync.
@Suite("Netlink engine metrics (integration)", .offPool, .needsNamespaceRoot)
struct NetlinkMetricsIntegrationTests {
    static func count(_ metrics: TestMetrics, _ label: String, _ dimensions: [(String, String)] = []) -> Int64 {
        (try? metrics.expectCounter(label, dimensions).totalValue) ?? 0
    }

    static func routeMessages(_ metrics: TestMetrics) -> Int64 {
        count(metrics, "netreach_netlink_messages_total", [("kind", "route")])
    }

    @Test func onlyACoveringRouteIsReadAndAsksTheKernelAgain() async throws {
        try await NetnsLab.withLab(.init(ipv4: true, ipv6: false)) { lab in
            let metrics = TestMetrics()
            let source = SystemPathSource(configuration: .init(namespace: lab.namespace), metricsFactory: metrics)
            let monitor = PathMonitor(source: source, metricsFactory: metrics)
            monitor.start(queue: DispatchQueue(label: "engine metrics"))
            defer { monitor.cancel() }
            #expect(Self.count(metrics, "netreach_netlink_snapshots_published_total") == 1, "the initial dump")
            let routesBefore = Self.routeMessages(metrics)
            let lookupsBefore = Self.count(metrics, "netreach_route_lookups_total")
            #expect(lookupsBefore > 0, "the first snapshot asked the kernel")

            // Cover none of the addresses that stand for the internet: the events socket's filter
            // drops them in the kernel, so the engine never wakes for them.
            try await lab.batch(
                (0..<500).map { "route add 198.51.\($0 >> 8).\($0 & 255)/32 via \(NetnsLab.ipv4Gateway)" })
            // Covers 8.8.8.8: one message, and the kernel is asked again. The notifications arrive in
            // order, so once these questions are seen, any of the 500 kept would have been read.
            _ = try await lab.ip("route", "add", "8.8.8.8/32", "via", NetnsLab.ipv4Gateway)
            await LabPoll.until("the engine asked the kernel again") {
                Self.count(metrics, "netreach_route_lookups_total") > lookupsBefore
            }
            #expect(Self.routeMessages(metrics) == routesBefore + 1)
            #expect(Self.count(metrics, "netreach_netlink_malformed_messages_total") == 0)
            #expect(metrics.counterTotal(label: "netreach_netlink_resyncs_total") == 0)
        }
    }

    /// More addresses than a filter program may hold: the socket reads every route, as it did
    /// before filters, and a covering one still asks again.
    @Test func withTooManyAddressesForAFilterEveryRouteIsRead() async throws {
        try await NetnsLab.withLab(.init(ipv4: true, ipv6: false)) { lab in
            let metrics = TestMetrics()
            // 8.8.8.8 first: a default route carries it, so the IPv6 ones (no IPv6 here) are never
            // reached by a question that could succeed.
            let many = (0..<400).map { IPAddress("2001:db8::\(String($0, radix: 16))")! }
            let addresses = [IPAddress("8.8.8.8")!] + many
            #expect(RouteNotificationFilter(watching: addresses) == nil)
            let configuration = SystemPathSource.Configuration(
                namespace: lab.namespace, routeLookupAddresses: addresses)
            let monitor = PathMonitor(source: SystemPathSource(configuration: configuration, metricsFactory: metrics))
            monitor.start(queue: DispatchQueue(label: "unfiltered"))
            defer { monitor.cancel() }
            let routesBefore = Self.routeMessages(metrics)
            try await lab.batch((0..<20).map { "route add 198.51.100.\($0)/32 via \(NetnsLab.ipv4Gateway)" })
            // At least: a route message of the lab's own set-up may still arrive after the count
            // above (seen once, under a full parallel run); a filter would have dropped all 20.
            await LabPoll.until("the engine read all 20 routes") { Self.routeMessages(metrics) >= routesBefore + 20 }
            let routesRead = Self.routeMessages(metrics)
            let lookupsBefore = Self.count(metrics, "netreach_route_lookups_total")
            _ = try await lab.ip("route", "add", "8.8.8.8/32", "via", NetnsLab.ipv4Gateway)
            await LabPoll.until("the engine asked the kernel again") {
                Self.count(metrics, "netreach_route_lookups_total") > lookupsBefore
            }
            #expect(Self.routeMessages(metrics) >= routesRead + 1)
        }
    }

    @Test func aChangeOfOneFamilyAsksTheKernelAboutThatFamilyOnly() async throws {
        try await NetnsLab.withLab(.init(ipv4: true, ipv6: true)) { lab in
            // A link-local address finishes DAD on its own time, and that asks IPv6 again: without
            // one, nothing but this test's changes happens in the namespace.
            _ = try await lab.ip("-6", "addr", "flush", "dev", NetnsLab.interface, "scope", "link")
            let metrics = TestMetrics()
            // One address per family, so each family's refresh is exactly one question.
            let configuration = SystemPathSource.Configuration(
                namespace: lab.namespace,
                routeLookupAddresses: [IPAddress("8.8.8.8")!, IPAddress("2001:4860:4860::8888")!])
            let monitor = PathMonitor(source: SystemPathSource(configuration: configuration, metricsFactory: metrics))
            monitor.start(queue: DispatchQueue(label: "per-family lookups"))
            defer { monitor.cancel() }
            await LabPoll.until("both families usable") {
                monitor.currentPath.supportsIPv4 && monitor.currentPath.supportsIPv6
            }
            func lookups() -> Int64 { Self.count(metrics, "netreach_route_lookups_total") }
            for (family, routes, gateway) in [
                ("-4", ["8.8.8.8/32", "8.8.8.0/24", "8.8.0.0/16", "8.0.0.0/8"], NetnsLab.ipv4Gateway),
                (
                    "-6", ["2001:4860:4860::8888/128", "2001:4860:4860::/48", "2001:4860::/32", "2001::/16"],
                    NetnsLab.ipv6Gateway
                ),
            ] {
                let before = lookups()
                for route in routes {
                    let messages = Self.routeMessages(metrics)
                    let asked = lookups()
                    // An addition is announced after the kernel made it: no recheck follows.
                    _ = try await lab.ip(family, "route", "add", route, "via", gateway)
                    await LabPoll.until("the engine read \(route)") { Self.routeMessages(metrics) > messages }
                    await LabPoll.until("the engine asked again") { lookups() > asked }
                }
                // One question per change, its own family's; asking both would be twice as many.
                // One more is allowed for anything the kernel does on its own meanwhile.
                let delta = lookups() - before
                #expect(
                    delta >= 4 && delta <= 5,
                    "\(family): \(delta) questions for 4 changes; messages \(metrics.counters.map { "\($0.label)\($0.dimensions)=\($0.totalValue)" })"
                )
            }
        }
    }

    /// IPv4 announces a route's deletion before it unlinks the route, so a lookup made on the
    /// message may still find it, and removals are asked about again 20 and 200 ms later. A deleted
    /// route no answer can be (the second default route, through another gateway) is asked about
    /// once; an address's removal, whose end no answer shows, still gets both rechecks.
    @Test func aDeletedRouteNoAnswerCanBeIsAskedAboutOnceAnAddressTwiceMore() async throws {
        try await NetnsLab.withLab(.init(ipv4: true, ipv6: false)) { lab in
            let metrics = TestMetrics()
            // One address, so each round of questions is one question.
            let configuration = SystemPathSource.Configuration(
                namespace: lab.namespace, routeLookupAddresses: [IPAddress("8.8.8.8")!])
            let monitor = PathMonitor(source: SystemPathSource(configuration: configuration, metricsFactory: metrics))
            monitor.start(queue: DispatchQueue(label: "rechecks"))
            defer { monitor.cancel() }
            await LabPoll.until("IPv4 usable") { monitor.currentPath.supportsIPv4 }
            func lookups() -> Int64 { Self.count(metrics, "netreach_route_lookups_total") }

            let messages = Self.routeMessages(metrics)
            _ = try await lab.ip(
                "route", "add", "default", "via", NetnsLab.otherIPv4Gateway, "dev", NetnsLab.interface, "metric", "200")
            await LabPoll.until("the engine read the second default route") { Self.routeMessages(metrics) > messages }
            // Its own 20 and 200 ms are long past once the rechecks of anything before have run.
            try await Task.sleep(for: .milliseconds(600))
            let beforeDelete = lookups()
            let messagesBeforeDelete = Self.routeMessages(metrics)
            _ = try await lab.ip(
                "route", "del", "default", "via", NetnsLab.otherIPv4Gateway, "dev", NetnsLab.interface, "metric", "200")
            await LabPoll.until("the engine asked about the deletion") {
                Self.routeMessages(metrics) > messagesBeforeDelete && lookups() > beforeDelete
            }
            // Long past both rechecks' times; a recheck would only come later, never go away.
            try await Task.sleep(for: .milliseconds(600))
            // Once, and the rechecks would make it three. One more is allowed for the gateway's
            // neighbour entry changing on its own meanwhile (it asks again, with no rechecks).
            let asked = lookups() - beforeDelete
            #expect(asked >= 1 && asked <= 2, "the answer is the first default route: \(asked) questions")

            _ = try await lab.ip("addr", "add", "10.123.0.99/24", "dev", NetnsLab.interface)
            try await Task.sleep(for: .milliseconds(600))
            let beforeAddress = lookups()
            _ = try await lab.ip("addr", "del", "10.123.0.99/24", "dev", NetnsLab.interface)
            await LabPoll.until("the address's removal was asked about, then rechecked twice") {
                lookups() - beforeAddress >= 3
            }
        }
    }

    @Test func anOverrunIsCountedAsAResync() async throws {
        try await NetnsLab.withLab(.init(ipv4: true, ipv6: true)) { lab in
            let metrics = TestMetrics()
            // A tiny receive buffer makes a burst overrun the socket.
            let source = SystemPathSource(
                configuration: .init(namespace: lab.namespace, receiveBufferSize: 4096), metricsFactory: metrics)
            let monitor = PathMonitor(source: source)
            monitor.start(queue: DispatchQueue(label: "overrun metrics"))
            defer { monitor.cancel() }
            let v4 = "default via \(NetnsLab.ipv4Gateway) dev \(NetnsLab.interface)"
            let v6 = "default via \(NetnsLab.ipv6Gateway) dev \(NetnsLab.interface)"
            try await lab.batch(
                (0..<2_500).flatMap { _ in
                    ["route del \(v4)", "route del \(v6)", "route add \(v4)", "route add \(v6)"]
                })
            await LabPoll.until("the engine resynced after the overrun") {
                Self.count(metrics, "netreach_netlink_resyncs_total", [("reason", "overrun")]) > 0
            }
            #expect(Self.count(metrics, "netreach_netlink_resyncs_total", [("reason", "malformed")]) == 0)
            let fresh = PathMonitor.freshPath(in: lab)
            await LabPoll.until("the monitor reaches the fresh monitor's path") { monitor.currentPath == fresh }
        }
    }
}
