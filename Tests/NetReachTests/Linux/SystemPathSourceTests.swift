import Dispatch
import Foundation
import NetReachSystem
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

    /// Each snapshot reaches the subscribers in the order they subscribed, in every run (not a
    /// hash table's order, which changes from process to process), a cancelled one left out.
    @Test(.offPool) func subscribersAreHandedEachSnapshotInTheOrderTheySubscribed() async throws {
        let source = SystemPathSource(configuration: .init())
        let order = Locked<[Int]>([])
        var subscriptions: [PathSubscription] = []
        for index in 0..<6 {
            subscriptions.append(try source.subscribe { _ in order.withLock { $0.append(index) } })
        }
        defer { subscriptions.forEach { $0.cancel() } }
        subscriptions[2].cancel()
        // A new destination to look up makes the engine publish a snapshot with its answer (a
        // lookup only: nothing is sent).
        order.withLock { $0 = [] }
        let routes = source.lookUpRoutes(to: [IPAddress("192.0.2.201")!])
        defer { routes.cancel() }
        await LabPoll.until("a snapshot reached every subscriber") { order.withLock { $0.count >= 5 } }
        #expect(order.withLock { Array($0.prefix(5)) } == [0, 1, 3, 4, 5])
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
