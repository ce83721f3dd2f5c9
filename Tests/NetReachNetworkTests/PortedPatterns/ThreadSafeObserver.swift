import Foundation

#if canImport(Network)
import Network
#else
import NetReachNetwork
#endif

// Reads the monitor's current path from whichever thread asks, with no queue hop.

final class WiFiObserver: Sendable {
    let monitor: NWPathMonitor

    init(monitor: NWPathMonitor = NWPathMonitor()) {
        self.monitor = monitor
        monitor.start(queue: DispatchQueue(label: "WiFiObserver"))
    }

    var isOnWiFi: Bool { monitor.currentPath.usesInterfaceType(.wifi) }
    var isOnline: Bool { monitor.currentPath.status == .satisfied }

    deinit { monitor.cancel() }
}
