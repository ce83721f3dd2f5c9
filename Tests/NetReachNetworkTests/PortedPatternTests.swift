import Dispatch
import Foundation
import NetReach
import NetReachNetwork
import NetReachSystem
import NetReachTestSupport
import NetReachTesting
import Testing

// PortedPatterns/ holds code in the shapes people write against Network.framework, written here
// from Apple's public API, each file behind the import switch (`#if canImport(Network)`). The
// folder is compiled twice: by this target in the Swift 6 language mode and, through a symbolic
// link, by NetReachNetworkSwift5Tests in the Swift 5 mode. These tests run that code on a
// simulated network.

@Suite("Network.framework patterns, ported by changing the import")
struct PortedPatternTests {
    @Test("The offline-overlay singleton: flags and connection type follow the path, with a notification per change")
    func singleton() async throws {
        let network = SimulatedNetwork.connected(.wifi)
        let monitor = NetworkMonitor(monitor: NWPathMonitor(source: network))
        let posted = Counter()
        let observer = NotificationCenter.default.addObserver(
            forName: .connectivityStatusChanged, object: monitor, queue: nil
        ) { _ in
            posted.increment()
        }
        defer { NotificationCenter.default.removeObserver(observer) }
        monitor.startMonitoring()
        defer { monitor.stopMonitoring() }
        try await until { posted.value == 1 }
        #expect(monitor.isConnected)
        #expect(!monitor.isExpensive)
        #expect(monitor.currentConnectionType == .wifi)

        network.setLinkUp("wlan0", false)
        try await until { posted.value == 2 }
        #expect(!monitor.isConnected)
        #expect(monitor.currentConnectionType == nil)

        network.addInterface("wwan0", type: .cellular)
        try await until { posted.value == 3 }
        #expect(monitor.isConnected && monitor.isExpensive)
        #expect(monitor.currentConnectionType == .cellular)
    }

    @Test("Reachability-style closures run on transitions only, on the monitor's queue")
    func reachability() async throws {
        let network = SimulatedNetwork.connected(.wiredEthernet)
        let reachability = Reachability(monitor: NWPathMonitor(source: network))
        let events = Events()
        reachability.queue.sync {
            reachability.whenReachable = { _ in events.append("reachable") }
            reachability.whenUnreachable = { _ in events.append("unreachable") }
        }
        reachability.startNotifier()
        defer { reachability.stopNotifier() }
        try await until { events.all == ["reachable"] }
        network.removeDefaultRoutes("eth0")
        network.setNameservers([]) // a change that keeps it unreachable: no closure
        network.addDefaultRoute("eth0", gateway: NetReach.IPAddress("192.0.2.1")!)
        try await until { events.all.count == 3 }
        #expect(events.all == ["reachable", "unreachable", "reachable"])
        #expect(reachability.isConnected)
    }

    @Test("The protocol seam: NWPathMonitor conforms to an app's own monitoring protocol")
    func protocolSeam() {
        let network = SimulatedNetwork.connected(.wiredEthernet)
        let monitoring: any PathMonitoring = NWPathMonitor(source: network)
        monitoring.start(queue: DispatchQueue(label: "seam"))
        defer { monitoring.cancel() }
        #expect(monitoring.currentPath.status == .satisfied)
        #expect(gatewayList(monitoring.currentPath) == ["192.0.2.1:0"])
        #expect(statusText(monitoring.currentPath.status) == "online")
    }

    @Test("An app's AsyncStream wrapper yields the path, then each change, and cancels the monitor when dropped")
    func streamWrapper() async throws {
        let network = SimulatedNetwork.connected(.wiredEthernet)
        let monitor = NWPathMonitor(source: network)
        var iterator = monitor.pathStream(queue: DispatchQueue(label: "stream")).makeAsyncIterator()
        #expect(await iterator.next()?.status == .satisfied)
        network.setLinkUp("eth0", false)
        #expect(await iterator.next()?.status == .unsatisfied)
    }

    @Test("for await over NWPathMonitor() needs no start: the first element is the current path")
    func oneShot() async {
        let network = SimulatedNetwork.connected(.wiredEthernet)
        #expect(await isOnline(NWPathMonitor(source: network)))
        network.setLinkUp("eth0", false)
        #expect(await isOnline(NWPathMonitor(source: network)) == false)
        // Released as each loop's monitor goes away, which may finish on another thread just after.
        await LabPoll.until("each loop's monitor was released", timeout: .seconds(10)) { network.subscriberCount == 0 }
    }

    @Test("Many threads read usesInterfaceType(.wifi) while the path flaps; each answer belongs to a path that existed")
    func readersWhileFlapping() async {
        let network = SimulatedNetwork.connected(.wifi)
        let observer = WiFiObserver(monitor: NWPathMonitor(source: network))
        let stop = Counter()
        // Each reader has read once before the flaps begin: on a busy machine a thread started
        // now may not run before 2,000 in-memory flaps end, and would then have read nothing.
        let reading = DispatchSemaphore(value: 0)
        let readers = (0..<4).map { _ in
            Worker.start {
                var reads = 0
                var inconsistent = 0
                while reads == 0 || stop.value == 0 {
                    if reads == 1 { reading.signal() }
                    // On this network the path is satisfied exactly when it is on Wi-Fi.
                    let path = observer.monitor.currentPath
                    if path.usesInterfaceType(.wifi) != (path.status == .satisfied) { inconsistent += 1 }
                    _ = observer.isOnWiFi
                    reads += 1
                }
                return (reads: reads, inconsistent: inconsistent)
            }
        }
        for _ in 0..<4 where reading.wait(timeout: .now() + 30) == .timedOut {
            Issue.record("a reader thread did not run within 30 s")
        }
        for flap in 0..<2_000 { network.setCarrier("wlan0", flap % 2 == 1) }
        stop.increment()
        let results = readers.map { $0.join() }
        #expect(results.allSatisfy { $0.reads > 0 })
        #expect(results.map(\.inconsistent) == [0, 0, 0, 0])
        #expect(observer.isOnWiFi, "the last flap brought carrier back")
    }

    @Test("A file with only the import switch: DispatchQueue, Network.NWPath names, linkQuality and isUltraConstrained")
    func importSwitchOnly() async throws {
        let network = SimulatedNetwork.connected()
        let watcher = QueueOnlyWatcher(monitor: NWPathMonitor(source: network))
        let seen = Events()
        watcher.start { seen.append($0) }
        defer { watcher.stop() }
        try await until { seen.all.count >= 1 }
        #expect(seen.all.first == "usable 192.0.2.1", "\(seen.all)")
        let path = try #require(watcher.current)
        #expect(path.linkQuality == .unknown, "Linux keeps no link quality estimate")
        #expect(!path.isUltraConstrained)
        #expect(LinkTuning.initialWindow(for: path) == 16)
        let good = Network.NWPath(status: .satisfied, linkQuality: .good)
        #expect(LinkTuning.initialWindow(for: good) == 64)
        #expect(Network.NWPath.Status.unsatisfied.isUsable == false)
    }
}

// MARK: Helpers

/// Waits (bounded: 10 s) until `condition` holds.
func until(_ condition: () -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(10)
    while !condition() {
        guard ContinuousClock.now < deadline else {
            Issue.record("condition not met within 10 s")
            return
        }
        try await Task.sleep(for: .milliseconds(2))
    }
}

final class Counter: Sendable {
    // Locked (a pthread mutex), not Mutex: these tests also run under ThreadSanitizer.
    private let count = Locked(0)
    func increment() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}

final class Events: Sendable {
    private let events = Locked([String]())
    func append(_ event: String) { events.withLock { $0.append(event) } }
    var all: [String] { events.withLock { $0 } }
}

/// A thread of its own whose result can be waited for.
final class Worker<Result: Sendable>: Sendable {
    private let result = Locked<Result?>(nil)
    private let done = DispatchSemaphore(value: 0)

    static func start(_ body: @escaping @Sendable () -> Result) -> Worker<Result> {
        let thread = Worker<Result>()
        Thread {
            let value = body()
            thread.result.withLock { $0 = value }
            thread.done.signal()
        }.start()
        return thread
    }

    func join() -> Result {
        done.wait()
        return result.withLock { $0! }
    }
}
