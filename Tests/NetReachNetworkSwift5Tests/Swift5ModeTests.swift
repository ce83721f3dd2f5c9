import Dispatch
import Foundation
import NetReach
import NetReachNetwork
import NetReachTesting
import Testing

// This target is built in the Swift 5 language mode. PortedPatterns/ is a link to the folder
// NetReachNetworkTests builds in the Swift 6 mode: the same files compile in both. What follows
// compiles in the Swift 5 mode only, as it does against Apple's Network: a handler that captures a
// class that is not Sendable (the handler's type is `@preconcurrency`).

/// A view model as many apps have one: plain stored state, written by the handler on the queue
/// the model lives on (the handler's type is `@preconcurrency`, so Swift 5 accepts the capture).
final class ConnectionViewModel {
    var isOffline = false
    var interfaceName = ""
    private let monitor: NWPathMonitor

    init(monitor: NWPathMonitor) {
        self.monitor = monitor
    }

    func start(queue: DispatchQueue) {
        monitor.pathUpdateHandler = { path in
            self.isOffline = path.status != .satisfied
            self.interfaceName = path.availableInterfaces.first?.name ?? ""
        }
        monitor.start(queue: queue)
    }

    func stop() { monitor.cancel() }
}

@Suite("Swift 5 language mode")
struct Swift5ModeTests {
    @Test("A handler capturing a non-Sendable class compiles in Swift 5 mode and follows the path")
    func nonSendableCapture() throws {
        let network = SimulatedNetwork.connected(.wifi)
        let queue = DispatchQueue(label: "view-model")
        let model = ConnectionViewModel(monitor: NWPathMonitor(source: network))
        model.start(queue: queue)
        defer { model.stop() }
        for _ in 0..<5_000 where queue.sync(execute: { model.interfaceName }) != "wlan0" { usleep(1_000) }
        #expect(queue.sync { model.isOffline } == false)
        #expect(queue.sync { model.interfaceName } == "wlan0")
        network.setLinkUp("wlan0", false)
        for _ in 0..<5_000 where queue.sync(execute: { !model.isOffline }) { usleep(1_000) }
        #expect(queue.sync { model.isOffline } == true)
    }

    @Test("The shared patterns, compiled in Swift 5 mode, run too")
    func sharedPatterns() async {
        let network = SimulatedNetwork.connected(.cellular)
        let monitor = NetworkMonitor(monitor: NWPathMonitor(source: network))
        monitor.startMonitoring()
        defer { monitor.stopMonitoring() }
        for _ in 0..<5_000 where monitor.currentConnectionType == nil { usleep(1_000) }
        #expect(monitor.isExpensive)
        #expect(monitor.currentConnectionType == .cellular)
        #expect(await isOnline(NWPathMonitor(source: network)))
    }
}
