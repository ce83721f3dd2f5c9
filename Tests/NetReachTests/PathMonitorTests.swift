import Dispatch
import Foundation
import NetReach
import NetReachNotifications
import NetReachTesting
import Testing

/// Collects what a monitor delivers, from any thread.
final class Recorder: @unchecked Sendable {
    // @unchecked: `paths` is only touched while `lock` is held.
    private let lock = NSLock()
    private var paths: [NetworkPath] = []

    func append(_ path: NetworkPath) { lock.withLock { paths.append(path) } }
    var all: [NetworkPath] { lock.withLock { paths } }

    /// Waits (bounded) until `count` paths arrived.
    func waitFor(count: Int, timeout: Duration = .seconds(15)) async -> [NetworkPath] {
        let deadline = ContinuousClock.now + timeout
        while all.count < count && ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(2)) }
        return all
    }
}

/// Drains a serial queue so every block dispatched before it has run.
func flush(_ queue: DispatchQueue) { queue.sync {} }

/// A monitor on a simulated network whose handler records every path, on a serial queue.
struct Harness {
    let network: SimulatedNetwork
    let monitor: PathMonitor
    let recorder = Recorder()
    let queue = DispatchQueue(label: "test")

    init(_ network: SimulatedNetwork = .connected()) {
        self.network = network
        monitor = PathMonitor(source: network)
        monitor.pathUpdateHandler = { [recorder] in recorder.append($0) }
    }

    func start() { monitor.start(queue: queue) }
    /// Every path delivered so far, once the queue has run what was dispatched to it.
    var delivered: [NetworkPath] {
        flush(queue)
        return recorder.all
    }
}

@Suite("PathMonitor lifecycle and delivery")
struct PathMonitorTests {
    @Test func currentPathIsExactWhenStartReturns() {
        let network = SimulatedNetwork.connected(.wifi)
        let monitor = PathMonitor(source: network)
        #expect(monitor.currentPath.unsatisfiedReason == .monitorUnavailable) // not started yet
        monitor.start(queue: DispatchQueue(label: "test"))
        #expect(monitor.currentPath.status == .satisfied)
        #expect(monitor.currentPath.primaryInterfaceType == .wifi)
        monitor.cancel()
    }

    @Test func firstDeliveryCarriesTheStartPath() {
        let harness = Harness()
        harness.start()
        #expect(harness.delivered == [harness.monitor.currentPath])
        harness.monitor.cancel()
    }

    @Test func deliversOnlyChanges() {
        let harness = Harness()
        harness.start()
        // A second interface without a route changes the snapshot but not the path.
        harness.network.update { $0.links[99] = .init(index: 99, name: "eth9", isUp: false) }
        harness.network.update { _ in }
        harness.network.removeDefaultRoutes("eth0")
        harness.network.removeDefaultRoutes("eth0")
        #expect(harness.delivered.map(\.status) == [.satisfied, .unsatisfied])
        #expect(harness.delivered.last?.unsatisfiedReason == .noDefaultRoute)
        harness.monitor.cancel()
    }

    @Test func deliversInOrderEvenOnAConcurrentQueue() {
        let network = SimulatedNetwork.connected()
        let monitor = PathMonitor(source: network)
        let recorder = Recorder()
        let queue = DispatchQueue(label: "concurrent", attributes: .concurrent)
        monitor.pathUpdateHandler = { recorder.append($0) }
        monitor.start(queue: queue)
        var expected = [monitor.currentPath]
        for round in 0..<200 {
            if round.isMultiple(of: 2) {
                network.removeDefaultRoutes("eth0")
            } else {
                network.addDefaultRoute("eth0", gateway: IPAddress("192.0.2.1")!)
            }
            expected.append(monitor.currentPath)
        }
        queue.sync(flags: .barrier) {}
        #expect(recorder.all == expected)
        for (previous, next) in zip(recorder.all, recorder.all.dropFirst()) { #expect(previous != next) }
        monitor.cancel()
    }

    @Test func secondStartIsANoOp() {
        let harness = Harness()
        harness.start()
        harness.start()
        #expect(harness.network.subscriberCount == 1)
        #expect(harness.delivered.count == 1)
        harness.monitor.cancel()
    }

    @Test func startAfterCancelIsANoOp() {
        let network = SimulatedNetwork.connected()
        let monitor = PathMonitor(source: network)
        let recorder = Recorder()
        let queue = DispatchQueue(label: "test")
        monitor.start(queue: queue)
        monitor.cancel()
        monitor.pathUpdateHandler = { recorder.append($0) }
        monitor.start(queue: queue)
        network.removeDefaultRoutes("eth0")
        flush(queue)
        #expect(recorder.all.isEmpty)
        #expect(network.subscriberCount == 0)
    }

    @Test func cancelStopsDeliveryAndReleasesTheSource() {
        let harness = Harness()
        harness.start()
        #expect(harness.delivered.count == 1)
        harness.monitor.cancel()
        harness.monitor.cancel() // idempotent
        harness.network.removeDefaultRoutes("eth0")
        #expect(harness.delivered.count == 1)
        #expect(harness.network.subscriberCount == 0)
    }

    @Test func noHandlerRunsAfterCancelEvenIfAlreadyQueued() {
        let harness = Harness()
        harness.queue.suspend()
        harness.start()
        harness.network.removeDefaultRoutes("eth0") // two deliveries now wait on the suspended queue
        harness.monitor.cancel()
        harness.queue.resume()
        #expect(harness.delivered.isEmpty)
    }

    @Test(.timeLimit(.minutes(1))) func cancelFromInsideTheHandlerDoesNotDeadlock() async {
        let network = SimulatedNetwork.connected()
        let monitor = PathMonitor(source: network)
        let recorder = Recorder()
        monitor.pathUpdateHandler = { path in
            recorder.append(path)
            monitor.cancel()
        }
        monitor.start(queue: DispatchQueue(label: "test"))
        _ = await recorder.waitFor(count: 1)
        network.removeDefaultRoutes("eth0")
        try? await Task.sleep(for: .milliseconds(20))
        #expect(recorder.all.count == 1)
        #expect(network.subscriberCount == 0)
    }

    @Test(.timeLimit(.minutes(1))) func cancelFromAStreamTerminationDoesNotDeadlock() async {
        // The openhab trap: a wrapper stream whose termination cancels the monitor.
        let network = SimulatedNetwork.connected()
        let monitor = PathMonitor(source: network)
        let wrapped = AsyncStream<NetworkPath> { continuation in
            monitor.pathUpdateHandler = { continuation.yield($0) }
            continuation.onTermination = { _ in monitor.cancel() }
            monitor.start(queue: DispatchQueue(label: "test"))
        }
        let received = Recorder()
        let consumer = Task {
            for await path in wrapped { received.append(path) }
        }
        #expect(await received.waitFor(count: 1).first?.status == .satisfied)
        consumer.cancel() // terminates `wrapped`, whose onTermination cancels the monitor
        await consumer.value
        let deadline = ContinuousClock.now + .seconds(5)
        while network.subscriberCount != 0 && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(2))
        }
        #expect(network.subscriberCount == 0)
    }

    @Test(.timeLimit(.minutes(1))) func cancellingAConsumerTaskEndsOnlyItsSequence() async {
        let network = SimulatedNetwork.connected()
        let monitor = PathMonitor(source: network)
        monitor.start(queue: DispatchQueue(label: "test"))
        let first = Task { () -> Int in
            var count = 0
            for await _ in monitor.paths { count += 1 }
            return count
        }
        try? await Task.sleep(for: .milliseconds(20))
        first.cancel()
        _ = await first.value
        var iterator = monitor.paths.makeAsyncIterator()
        #expect(await iterator.next()?.status == .satisfied)
        network.removeDefaultRoutes("eth0")
        #expect(await iterator.next()?.unsatisfiedReason == .noDefaultRoute)
        monitor.cancel()
        #expect(await iterator.next() == nil)
    }

    @Test(.timeLimit(.minutes(1))) func everyStreamStartsWithTheCurrentPathAndSeesTheSameSequence() async {
        let network = SimulatedNetwork.connected()
        let monitor = PathMonitor(source: network)
        monitor.start(queue: DispatchQueue(label: "test"))
        let consumers = (0..<4).map { _ in
            let stream = monitor.paths
            return Task { () -> [NetworkPath] in
                var seen: [NetworkPath] = []
                for await path in stream { seen.append(path) }
                return seen
            }
        }
        var expected = [monitor.currentPath]
        let changes: [@Sendable () -> Void] = [
            { network.setLinkUp("eth0", false) },
            { network.setLinkUp("eth0", true) },
            { network.addDefaultRoute("eth0", gateway: IPAddress("192.0.2.1")!) },
        ]
        for round in 0..<60 {
            changes[round % changes.count]()
            if monitor.currentPath != expected.last { expected.append(monitor.currentPath) }
        }
        #expect(expected.count == 61)
        monitor.cancel()
        for consumer in consumers { #expect(await consumer.value == expected) }
    }

    @Test(.timeLimit(.minutes(1))) func pathsOfACancelledMonitorFinishAtOnce() async {
        let monitor = PathMonitor(source: SimulatedNetwork.connected())
        monitor.start(queue: DispatchQueue(label: "test"))
        monitor.cancel()
        var iterator = monitor.paths.makeAsyncIterator()
        #expect(await iterator.next() == nil)
    }

    @Test func aSourceThatCannotObserveGivesMonitorUnavailable() {
        let network = SimulatedNetwork.connected()
        network.failSubscriptions(with: .namespaceUnavailable(path: "/var/run/netns/missing", errno: 2))
        let monitor = PathMonitor(source: network)
        let recorder = Recorder()
        let queue = DispatchQueue(label: "test")
        monitor.pathUpdateHandler = { recorder.append($0) }
        monitor.start(queue: queue)
        flush(queue)
        #expect(monitor.currentPath.unsatisfiedReason == .monitorUnavailable)
        #expect(monitor.failure == .namespaceUnavailable(path: "/var/run/netns/missing", errno: 2))
        #expect(recorder.all.map(\.unsatisfiedReason) == [.monitorUnavailable])
        #expect(monitor.failure?.description.contains("/var/run/netns/missing") == true)
    }

    @Test func aSourceThatLosesTheSystemLaterSetsFailureAndMonitorUnavailable() {
        let network = SimulatedNetwork.connected()
        let monitor = PathMonitor(source: network)
        let recorder = Recorder()
        let queue = DispatchQueue(label: "test")
        monitor.pathUpdateHandler = { recorder.append($0) }
        monitor.start(queue: queue)
        #expect(monitor.failure == nil)
        network.update { $0.observationFailure = .namespaceGone(path: "/var/run/netns/blue") }
        flush(queue)
        #expect(monitor.failure == .namespaceGone(path: "/var/run/netns/blue"))
        #expect(recorder.all.map(\.unsatisfiedReason) == [nil, .monitorUnavailable])
        #expect(monitor.failure?.description.contains("/var/run/netns/blue is gone") == true)
    }

    @Test func requirementsFilterInterfaces() {
        let network = SimulatedNetwork()
        network.addInterface("eth0", type: .wiredEthernet, metric: 100)
        network.addInterface("wwan0", type: .cellular, metric: 700)
        let anything = PathMonitor(source: network)
        let cellularOnly = PathMonitor(requirements: .init(requiredInterfaceType: .cellular), source: network)
        let noCellular = PathMonitor(requirements: .init(prohibitedInterfaceTypes: [.cellular]), source: network)
        for monitor in [anything, cellularOnly, noCellular] { monitor.start(queue: DispatchQueue(label: "test")) }
        #expect(anything.currentPath.availableInterfaces.map(\.name) == ["eth0", "wwan0"])
        #expect(!anything.currentPath.isExpensive)
        #expect(cellularOnly.currentPath.availableInterfaces.map(\.name) == ["wwan0"])
        #expect(cellularOnly.currentPath.isExpensive)
        network.removeInterface("eth0")
        #expect(noCellular.currentPath.unsatisfiedReason == .excludedByRequirements)
        #expect(anything.currentPath.isExpensive)
        for monitor in [anything, cellularOnly, noCellular] { monitor.cancel() }
    }

    @Test func postsNotificationsWhenAskedTo() {
        let network = SimulatedNetwork.connected()
        let monitor = PathMonitor(source: network)
        let recorder = Recorder()
        let observer = NotificationCenter.default.addObserver(
            forName: PathMonitor.pathDidChangeNotification, object: monitor, queue: nil
        ) { note in
            if let path = note.userInfo?[PathMonitor.pathUserInfoKey] as? NetworkPath { recorder.append(path) }
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        let queue = DispatchQueue(label: "test")
        monitor.postsNotifications = true
        monitor.start(queue: queue)
        network.removeDefaultRoutes("eth0")
        flush(queue)
        #expect(recorder.all.map(\.status) == [.satisfied, .unsatisfied])
        monitor.cancel()
    }

    @Test func doesNotPostNotificationsByDefault() {
        let network = SimulatedNetwork.connected()
        let monitor = PathMonitor(source: network)
        let recorder = Recorder()
        let observer = NotificationCenter.default.addObserver(
            forName: PathMonitor.pathDidChangeNotification, object: monitor, queue: nil
        ) { _ in recorder.append(.unsatisfied(.noInterface)) }
        defer { NotificationCenter.default.removeObserver(observer) }
        let queue = DispatchQueue(label: "test")
        monitor.start(queue: queue)
        network.removeDefaultRoutes("eth0")
        flush(queue)
        #expect(recorder.all.isEmpty)
        monitor.cancel()
    }

    @Test func currentPathIsSafeFromManyThreadsWhileTheNetworkChanges() {
        let network = SimulatedNetwork.connected()
        let monitor = PathMonitor(source: network)
        monitor.start(queue: DispatchQueue(label: "test"))
        let writer = Thread {
            for round in 0..<2_000 {
                if round.isMultiple(of: 2) {
                    network.removeDefaultRoutes("eth0")
                } else {
                    network.addDefaultRoute("eth0", gateway: IPAddress("192.0.2.1")!)
                }
            }
        }
        writer.start()
        let valid = Recorder()
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<2_000 {
                let path = monitor.currentPath
                if path.status == .satisfied || path.unsatisfiedReason == .noDefaultRoute { continue }
                valid.append(path) // anything else is a torn or invalid read
            }
        }
        #expect(valid.all.isEmpty)
        monitor.cancel()
    }

    @Test func releasingAMonitorWithoutCancelReleasesTheSource() {
        let network = SimulatedNetwork.connected()
        do {
            let monitor = PathMonitor(source: network)
            monitor.start(queue: DispatchQueue(label: "test"))
            #expect(network.subscriberCount == 1)
        }
        // A delivery still queued on "test" holds the monitor until it has run; then it goes.
        let deadline = ContinuousClock.now + .seconds(5)
        while network.subscriberCount != 0 && ContinuousClock.now < deadline { usleep(1_000) }
        #expect(network.subscriberCount == 0)
    }
}
