import Dispatch
import Foundation
import NetReach
import NetReachTestSupport
import Testing

/// The kernel changes LinuxPathSemantics.md names, made in a real namespace and watched
/// through `PathMonitor(namespace:)`.
@Suite("Path changes in a network namespace (integration)", .offPool, .needsNamespaceRoot)
struct PathChangeIntegrationTests {
    @Test func currentPathIsSatisfiedWhenStartReturnsAndIsTheFirstDelivery() async throws {
        try await NetnsLab.withLab { lab in
            let handlerLog = PathLog()
            let monitor = PathMonitor(namespace: lab.namespace)
            defer { monitor.cancel() }
            monitor.pathUpdateHandler = handlerLog.append
            monitor.start(queue: DispatchQueue(label: "start"))
            let atStart = monitor.currentPath // read at once: no waiting
            let streamLog = PathLog.consuming(monitor.paths)

            #expect(atStart.isLabIPv4Satisfied, "\(atStart)")
            #expect(!atStart.supportsIPv6)
            await LabPoll.until("the handler and the stream got a path") {
                handlerLog.count >= 1 && streamLog.count >= 1
            }
            #expect(handlerLog.paths.first == atStart)
            #expect(streamLog.paths.first == atStart)
        }
    }

    @Test func deletingTheDefaultRouteIsNoDefaultRouteAndAddingItBackSatisfies() async throws {
        try await NetnsLab.withLab { lab in
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            let log = PathLog.consuming(monitor.paths)
            let initial = monitor.currentPath

            try await lab.deleteDefaultRoute()
            await LabPoll.until("the path is unsatisfied(noDefaultRoute)") {
                log.last?.unsatisfiedReason == .noDefaultRoute
            }
            try await lab.addDefaultRoute()
            await LabPoll.until("the path is satisfied again") { log.count >= 3 }

            #expect(log.steps == [.satisfied, .unsatisfied(.noDefaultRoute), .satisfied])
            #expect(log.last == initial)
        }
    }

    @Test func linkDownIsLinkDownAndLinkUpWithoutTheFlushedRouteIsNoDefaultRoute() async throws {
        try await NetnsLab.withLab { lab in
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            let log = PathLog.consuming(monitor.paths)

            try await lab.setLink(up: false)
            await LabPoll.until("the path is unsatisfied(linkDown)") { log.last?.unsatisfiedReason == .linkDown }
            let linkDownAt = log.count

            try await lab.setLink(up: true)
            await LabPoll.until("the path is unsatisfied(noDefaultRoute)") {
                log.last?.unsatisfiedReason == .noDefaultRoute
            }
            // The kernel flushed the IPv4 default route without RTM_DELROUTE: link up alone is not enough.
            #expect(try await lab.hasDefaultRoute(.ipv4) == false)
            await LabPoll.settle()
            #expect(monitor.currentPath.unsatisfiedReason == .noDefaultRoute)
            #expect(!log.paths.dropFirst(linkDownAt).contains { $0.status == .satisfied })
            #expect(PathMonitor.freshPath(in: lab) == monitor.currentPath)

            try await lab.addDefaultRoute()
            await LabPoll.until("the path is satisfied again") { log.last?.isLabIPv4Satisfied == true }
            #expect(log.steps.first == .satisfied)
            #expect(log.steps.dropFirst().first == .unsatisfied(.linkDown))
        }
    }

    @Test func carrierLossIsLinkDownAndCarrierBackSatisfiesWithTheSurvivingRoute() async throws {
        try await NetnsLab.withLab { lab in
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            let log = PathLog.consuming(monitor.paths)

            try await lab.setPeer(up: false)
            await LabPoll.until("the path is unsatisfied(linkDown)") { log.last?.unsatisfiedReason == .linkDown }
            #expect(try await lab.hasDefaultRoute(.ipv4), "routes survive carrier loss")

            try await lab.setPeer(up: true)
            await LabPoll.until("the path is satisfied again") { log.last?.isLabIPv4Satisfied == true }
            #expect(log.steps == [.satisfied, .unsatisfied(.linkDown), .satisfied])
        }
    }

    @Test func removingTheOnlyAddressIsNoAddress() async throws {
        try await NetnsLab.withLab(.init(ipv4: true, ipv6: false)) { lab in
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            let log = PathLog.consuming(monitor.paths)

            try await lab.deleteAddress(.ipv4)
            await LabPoll.until("the path is unsatisfied(noAddress)") { log.last?.unsatisfiedReason == .noAddress }
            #expect(log.steps == [.satisfied, .unsatisfied(.noAddress)])
            #expect(PathMonitor.freshPath(in: lab) == monitor.currentPath)
        }
    }

    /// Deleting an interface's last IPv4 address makes the kernel flush every IPv4 route through
    /// it, default route included, without RTM_DELROUTE (as on link down; checked here with
    /// `ip monitor`). Adding the address back does not restore the route, so the path must say
    /// noDefaultRoute, as a fresh dump does.
    @Test func addressAddedBackWithoutTheFlushedRouteIsNoDefaultRoute() async throws {
        try await NetnsLab.withLab(.init(ipv4: true, ipv6: false)) { lab in
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            let log = PathLog.consuming(monitor.paths)

            try await lab.deleteAddress(.ipv4)
            await LabPoll.until("the path is unsatisfied(noAddress)") { log.last?.unsatisfiedReason == .noAddress }
            try await lab.addAddress(.ipv4)
            #expect(
                try await lab.hasDefaultRoute(.ipv4) == false, "the kernel flushed the default route with the address")
            let fresh = PathMonitor.freshPath(in: lab)
            #expect(fresh.unsatisfiedReason == .noDefaultRoute)
            await LabPoll.until("the monitor leaves noAddress") { log.last?.unsatisfiedReason != .noAddress }
            await LabPoll.settle()

            #expect(monitor.currentPath == fresh)
            #expect(log.steps == [.satisfied, .unsatisfied(.noAddress), .unsatisfied(.noDefaultRoute)])
        }
    }

    /// Only the last IPv4 address takes the routes with it: with another address left, the kernel
    /// keeps the default route even when the gateway's subnet is gone.
    @Test func removingOneOfTwoIPv4AddressesKeepsThePathSatisfied() async throws {
        try await NetnsLab.withLab { lab in
            try await lab.ip("addr", "add", "10.124.0.2/24", "dev", NetnsLab.interface)
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            let log = PathLog.consuming(monitor.paths)

            try await lab.deleteAddress(.ipv4)
            #expect(try await lab.hasDefaultRoute(.ipv4), "the kernel keeps the route while an address is left")
            let fresh = PathMonitor.freshPath(in: lab)
            #expect(fresh.isLabIPv4Satisfied, "\(fresh)")
            await LabPoll.settle()
            #expect(monitor.currentPath == fresh)
            #expect(log.steps == [.satisfied])
        }
    }

    @Test func ipv6OnlyWithADefaultRouteIsSatisfiedOverIPv6Alone() async throws {
        try await NetnsLab.withLab(.init(ipv4: false, ipv6: true)) { lab in
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            let path = monitor.currentPath

            #expect(path.status == .satisfied, "\(path)")
            #expect(path.supportsIPv6 && !path.supportsIPv4)
            #expect(path.availableInterfaces.map(\.name) == [NetnsLab.interface])
            #expect(path.gateways == [IPAddress(NetnsLab.ipv6Gateway)!])
        }
    }

    @Test func ipv6DefaultRouteDeletedIsNoDefaultRoute() async throws {
        try await NetnsLab.withLab(.init(ipv4: false, ipv6: true)) { lab in
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            let log = PathLog.consuming(monitor.paths)

            try await lab.deleteDefaultRoute(.ipv6)
            await LabPoll.until("the path is unsatisfied(noDefaultRoute)") {
                log.last?.unsatisfiedReason == .noDefaultRoute
            }
            try await lab.addDefaultRoute(.ipv6)
            await LabPoll.until("the path is satisfied again") { log.count >= 3 }
            #expect(log.steps == [.satisfied, .unsatisfied(.noDefaultRoute), .satisfied])
        }
    }
}
