import Foundation

#if canImport(Network)
import Network
#else
import NetReachNetwork
#endif

// The offline-overlay singleton: one shared monitor, flags the app reads anywhere, and a
// notification when the path changes.

extension Notification.Name {
    static let connectivityStatusChanged = Notification.Name("connectivityStatusChanged")
}

// Apple's InterfaceType is not CaseIterable; apps add it (NetReachNetwork's is not either, so this
// compiles on both).
extension NWInterface.InterfaceType: CaseIterable {
    public static let allCases: [NWInterface.InterfaceType] = [.other, .wifi, .cellular, .loopback, .wiredEthernet]
}

final class NetworkMonitor: @unchecked Sendable {
    static let shared = NetworkMonitor()

    private let monitor: NWPathMonitor
    private let queue = DispatchQueue(label: "NetworkMonitor")
    private let lock = NSLock()
    private var connected = false
    private var expensive = false
    private var connectionType: NWInterface.InterfaceType?

    init(monitor: NWPathMonitor = NWPathMonitor()) {
        self.monitor = monitor
    }

    var isConnected: Bool { lock.withLock { connected } }
    var isExpensive: Bool { lock.withLock { expensive } }
    var currentConnectionType: NWInterface.InterfaceType? { lock.withLock { connectionType } }

    func startMonitoring() {
        monitor.pathUpdateHandler = { [weak self] path in
            guard let self else { return }
            self.lock.withLock {
                self.connected = path.status == .satisfied
                self.expensive = path.isExpensive
                self.connectionType = NWInterface.InterfaceType.allCases.first { path.usesInterfaceType($0) }
            }
            NotificationCenter.default.post(name: .connectivityStatusChanged, object: self)
        }
        monitor.start(queue: queue)
    }

    func stopMonitoring() {
        monitor.cancel()
    }
}
