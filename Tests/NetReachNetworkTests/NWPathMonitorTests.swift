import Dispatch
import NetReach
import NetReachNetwork
import NetReachSystem
import NetReachTesting
import Testing

@Suite("NWPathMonitor's contract, on a simulated network")
struct NWPathMonitorTests {
    @Test("Before start the path is unsatisfied and there is no queue; after start the path is exact at once")
    func exactAfterStart() {
        let network = SimulatedNetwork.connected(.wifi)
        let monitor = NWPathMonitor(source: network)
        #expect(monitor.currentPath.status == .unsatisfied)
        #expect(monitor.queue == nil)
        let queue = DispatchQueue(label: "exact")
        monitor.start(queue: queue)
        defer { monitor.cancel() }
        #expect(monitor.queue === queue)
        #expect(monitor.currentPath.status == .satisfied)
        #expect(monitor.currentPath.usesInterfaceType(.wifi))
        #expect(monitor.currentPath.availableInterfaces.map(\.name) == ["wlan0"])
    }

    @Test("The handler runs on the start queue: the first path, then each change, never the same twice")
    func handler() async throws {
        let network = SimulatedNetwork.connected(.wiredEthernet)
        let monitor = NWPathMonitor(source: network)
        let queue = DispatchQueue(label: "handler")
        let key = DispatchSpecificKey<Bool>()
        queue.setSpecific(key: key, value: true)
        let seen = Locked([(NWPath.Status, Bool)]())
        monitor.pathUpdateHandler = { path in
            seen.withLock { $0.append((path.status, DispatchQueue.getSpecific(key: key) == true)) }
        }
        #expect(monitor.pathUpdateHandler != nil)
        monitor.start(queue: queue)
        defer { monitor.cancel() }
        network.setCarrier("eth0", false)
        network.setCarrier("eth0", false) // no change: no call
        network.setCarrier("eth0", true)
        try await until { seen.withLock { $0.count } == 3 }
        queue.sync {}
        let calls = seen.withLock { $0 }
        #expect(calls.map(\.0) == [.satisfied, .unsatisfied, .satisfied])
        #expect(calls.allSatisfy { $0.1 }, "every call on the start queue")
    }

    @Test("A second start is ignored (the first queue stays); cancel is final, and a start after it is ignored")
    func lifecycle() {
        let network = SimulatedNetwork.connected(.wiredEthernet)
        let monitor = NWPathMonitor(source: network)
        let first = DispatchQueue(label: "first")
        monitor.start(queue: first)
        monitor.start(queue: DispatchQueue(label: "second"))
        #expect(monitor.queue === first)
        #expect(network.subscriberCount == 1)
        monitor.cancel()
        monitor.cancel()
        #expect(network.subscriberCount == 0)
        monitor.start(queue: first)
        #expect(network.subscriberCount == 0)
    }

    @Test("cancel() from inside the handler is safe, and no handler runs after it")
    func cancelInsideHandler() async throws {
        let network = SimulatedNetwork.connected(.wiredEthernet)
        let monitor = NWPathMonitor(source: network)
        let calls = Locked(0)
        monitor.pathUpdateHandler = { _ in
            calls.withLock { $0 += 1 }
            monitor.cancel()
        }
        let queue = DispatchQueue(label: "cancel-inside")
        monitor.start(queue: queue)
        try await until { calls.withLock { $0 } == 1 }
        network.setLinkUp("eth0", false)
        queue.sync {}
        #expect(calls.withLock { $0 } == 1)
    }

    @Test("Required and prohibited interface types, as Network.framework's initializers")
    func requirements() {
        let network = SimulatedNetwork.connected(.wiredEthernet)
        network.addInterface("wlan0", type: .wifi, metric: 600)
        let wifiOnly = NWPathMonitor(source: network, requiredInterfaceType: .wifi)
        let noWired = NWPathMonitor(source: network, prohibitedInterfaceTypes: [.wiredEthernet])
        let cellularOnly = NWPathMonitor(source: network, requiredInterfaceType: .cellular)
        for monitor in [wifiOnly, noWired, cellularOnly] { monitor.start(queue: DispatchQueue(label: "requirements")) }
        defer { for monitor in [wifiOnly, noWired, cellularOnly] { monitor.cancel() } }
        #expect(wifiOnly.currentPath.availableInterfaces.map(\.name) == ["wlan0"])
        #expect(noWired.currentPath.usesInterfaceType(.wifi))
        #expect(cellularOnly.currentPath.status == .unsatisfied)
        #expect(cellularOnly.currentPath.linuxUnsatisfiedReason == .excludedByRequirements)
    }

    @Test("for await: the current path first, then changes; several loops at once; cancelling the task ends its loop")
    func asyncSequence() async throws {
        let network = SimulatedNetwork.connected(.wiredEthernet)
        let monitor = NWPathMonitor(source: network)
        monitor.start(queue: DispatchQueue(label: "sequence"))
        defer { monitor.cancel() }
        let loops = (0..<3).map { _ in
            Task { () -> [NWPath.Status] in
                var statuses: [NWPath.Status] = []
                for await path in monitor {
                    statuses.append(path.status)
                    if statuses.count == 2 { break }
                }
                return statuses
            }
        }
        try await Task.sleep(for: .milliseconds(50))
        network.setLinkUp("eth0", false)
        for loop in loops { #expect(await loop.value == [.satisfied, .unsatisfied]) }

        let endless = Task { () -> Int in
            var count = 0
            for await _ in monitor { count += 1 }
            return count
        }
        try await Task.sleep(for: .milliseconds(50))
        endless.cancel()
        #expect(await endless.value == 1, "the loop ended when its task was cancelled")
    }

    @Test("Iterating an unstarted monitor starts it; cancelling the monitor ends every loop")
    func iterationStarts() async throws {
        let network = SimulatedNetwork.connected(.wiredEthernet)
        let monitor = NWPathMonitor(source: network)
        let loop = Task { () -> Int in
            var count = 0
            for await _ in monitor { count += 1 }
            return count
        }
        try await until { network.subscriberCount == 1 }
        #expect(monitor.queue != nil)
        monitor.cancel()
        #expect(await loop.value == 1)
    }

    @Test("The NetReach monitor behind it stays reachable, with the Linux details")
    func underlyingMonitor() {
        let network = SimulatedNetwork.connected(.wiredEthernet)
        let monitor = NWPathMonitor(source: network)
        monitor.start(queue: DispatchQueue(label: "underlying"))
        defer { monitor.cancel() }
        #expect(monitor.pathMonitor.currentPath.gateways == [NetReach.IPAddress("192.0.2.1")!])
        #expect(monitor.debugDescription.hasPrefix("NWPathMonitor: satisfied (interface: eth0"))
    }
}
