import NetReach
import NetReachTestSupport
import Testing

/// Monitors of one namespace share one netlink engine; each monitor and each `paths` consumer must
/// still see every change, in the same order (PathMonitor's guarantees: change-only and ordered).
@Suite("Fan-out to monitors and consumers (integration)", .offPool, .needsNamespaceRoot)
struct FanOutIntegrationTests {
    @Test func twoMonitorsAndThreeStreamsSeeTheSameSequenceOverTwentyRouteFlaps() async throws {
        try await NetnsLab.withLab { lab in
            let firstHandler = PathLog()
            let secondHandler = PathLog()
            let first = PathMonitor.started(in: lab, handler: firstHandler.append)
            let second = PathMonitor.started(in: lab, handler: secondHandler.append)
            defer {
                first.cancel()
                second.cancel()
            }
            let streams = [first.paths, first.paths, second.paths].map(PathLog.consuming)
            let logs = [firstHandler, secondHandler] + streams

            for _ in 0..<20 {
                try await lab.deleteDefaultRoute()
                try await lab.addDefaultRoute()
            }
            // A final state seen nowhere before (IPv6 too): once every log ends with it, every log
            // has received everything.
            try await lab.addAddress(.ipv6)
            try await lab.addDefaultRoute(.ipv6)
            await LabPoll.until("every consumer has the final IPv4+IPv6 path") {
                logs.allSatisfy { $0.last?.supportsIPv6 == true }
            }

            let reference = streams[0].paths
            for (index, log) in logs.enumerated() {
                #expect(log.paths == reference, "consumer \(index) saw \(log.steps), not \(streams[0].steps)")
            }
            let steps = reference.map(PathStep.init)
            #expect(steps.first == .satisfied)
            // Change-only: the IPv4 flaps alternate; only the last path (IPv6 added) repeats `satisfied`.
            for (earlier, later) in zip(steps.dropLast(), steps.dropLast().dropFirst()) {
                #expect(earlier != later, "two equal steps in a row: \(steps)")
            }
            #expect(steps.dropLast().allSatisfy { $0 == .satisfied || $0 == .unsatisfied(.noDefaultRoute) })
            #expect(steps.contains(.unsatisfied(.noDefaultRoute)))
            #expect(reference.last?.supportsIPv4 == true && reference.last?.status == .satisfied)
        }
    }
}
