import Dispatch
import Foundation
import NetReachTestSupport
import Testing

@testable import NetReach

/// The system source on this machine's own namespace: needs no root (netlink dumps and
/// notifications are open to every user).
@Suite("SystemPathSource sharing")
struct SystemPathSourceTests {
    @Test func monitorsShareOneEngineThatStopsWithTheLastOne() async {
        let source = SystemPathSource(configuration: .init())
        let monitors = (0..<5).map { _ in PathMonitor(source: source) }
        for monitor in monitors { monitor.start(queue: DispatchQueue(label: "test")) }
        #expect(source.engineStatistics.launches == 1)
        #expect(source.engineStatistics.running)
        let paths = Set(monitors.map(\.currentPath))
        #expect(paths.count == 1)
        for monitor in monitors { monitor.cancel() }
        #expect(!source.engineStatistics.running)

        let again = PathMonitor(source: source)
        again.start(queue: DispatchQueue(label: "test"))
        #expect(source.engineStatistics.launches == 2)
        #expect(again.currentPath == paths.first)
        again.cancel()
    }

    @Test func theDefaultMonitorUsesTheProcessWideSource() {
        let first = SystemPathSource.shared()
        #expect(first === SystemPathSource.shared())
        #expect(first !== SystemPathSource.shared(namespace: .named("elsewhere")))
    }

    @Test func sharedMonitorIsStartedAndIgnoresCancel() async {
        let fresh = PathMonitor()
        fresh.start(queue: DispatchQueue(label: "test"))
        defer { fresh.cancel() }
        let shared = PathMonitor.shared
        #expect(shared.failure == nil)
        #expect(shared.currentPath == fresh.currentPath)
        shared.cancel()
        var iterator = shared.paths.makeAsyncIterator()
        #expect(await iterator.next() == fresh.currentPath)
    }

    @Test func systemPathIsEvaluatedAtStart() {
        let monitor = PathMonitor()
        monitor.start(queue: DispatchQueue(label: "test"))
        defer { monitor.cancel() }
        #expect(monitor.failure == nil)
        #expect(monitor.currentPath.unsatisfiedReason != .monitorUnavailable)
    }
}
