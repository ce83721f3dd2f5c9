import Foundation
import NetReach
import NetReachTestSupport
import Testing

/// Data flow (Docs/Architecture.md): a burst beyond the socket buffer is an overrun (ENOBUFS) that costs a full
/// re-dump but never a stale state.
@Suite("Route storm (integration)", .offPool, .needsNamespaceRoot)
struct RouteStormIntegrationTests {
    @Test func tenThousandChangesEndWithTheSamePathAFreshMonitorSees() async throws {
        try await NetnsLab.withLab(.init(ipv4: true, ipv6: true)) { lab in
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            // A tiny receive buffer makes the storm overrun the socket, forcing resyncs.
            let smallBuffer = PathMonitor(
                source: SystemPathSource(
                    configuration: .init(namespace: lab.namespace, receiveBufferSize: 4096)))
            smallBuffer.start(queue: DispatchQueue(label: "small buffer"))
            defer { smallBuffer.cancel() }
            let logs = [PathLog.consuming(monitor.paths), PathLog.consuming(smallBuffer.paths)]

            let v4 = "default via \(NetnsLab.ipv4Gateway) dev \(NetnsLab.interface)"
            let v6 = "default via \(NetnsLab.ipv6Gateway) dev \(NetnsLab.interface)"
            var lines = (0..<2_500).flatMap { _ in
                ["route del \(v4)", "route del \(v6)", "route add \(v4)", "route add \(v6)"]
            }
            // Ends in a state the storm never rested in: satisfied over IPv6 alone.
            lines.append("route del \(v4)")
            #expect(lines.count == 10_001)
            try await lab.batch(lines)

            let fresh = PathMonitor.freshPath(in: lab)
            #expect(fresh.status == .satisfied && fresh.supportsIPv6 && !fresh.supportsIPv4, "\(fresh)")
            await LabPoll.until("both monitors reach the fresh monitor's path", timeout: .seconds(20)) {
                monitor.currentPath == fresh && smallBuffer.currentPath == fresh
            }
            await LabPoll.settle()
            #expect(monitor.currentPath == fresh)
            #expect(smallBuffer.currentPath == fresh)
            for log in logs {
                await LabPoll.until("the stream ends with the final path") { log.last == fresh }
                let paths = log.paths
                #expect(zip(paths, paths.dropFirst()).allSatisfy { $0 != $1 }, "a path was delivered twice in a row")
            }
        }
    }
}
