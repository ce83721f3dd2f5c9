// The guard that works on both: `canImport(Network)` alone is false on Linux, and the whole file
// would compile to nothing there.
#if canImport(Network) || canImport(NetReachNetwork)
#if canImport(Network)
import Network
#else
import NetReachNetwork
#endif

// A file whose only import is Network, as ported code has it: `DispatchQueue` comes with it on
// Apple platforms (and with NetReachNetwork here), and names are qualified with the module's name,
// as VPN code does to tell them from NetworkExtension's older NWPath.

extension Network.NWPath.Status {
    var isUsable: Bool { self == .satisfied }
}

enum LinkTuning {
    /// Apple's advice for `linkQuality`: tune initial values, never gate a connection on it.
    static func initialWindow(for path: Network.NWPath) -> Int {
        switch path.linkQuality {
        case .good: return 64
        case .moderate: return 32
        case .minimal: return 8
        case .unknown: return 16
        @unknown default: return 16
        }
    }

    static func describe(_ path: Network.NWPath) -> String {
        var words = [path.status.isUsable ? "usable" : "unusable"]
        if path.isUltraConstrained { words.append("ultra-constrained") }
        for gateway in path.gateways {
            if case .hostPort(let host, _) = gateway { words.append("\(host)") }
        }
        return words.joined(separator: " ")
    }
}

/// A monitor on a queue of its own, its paths handed on from that queue.
final class QueueOnlyWatcher: @unchecked Sendable {
    // @unchecked: `latest` is touched only on `queue`.
    let queue = DispatchQueue(label: "QueueOnlyWatcher")
    private let monitor: Network.NWPathMonitor
    private var latest: Network.NWPath?

    init(monitor: Network.NWPathMonitor = Network.NWPathMonitor(requiredInterfaceType: .wiredEthernet)) {
        self.monitor = monitor
    }

    func start(onChange: @escaping @Sendable (String) -> Void) {
        monitor.pathUpdateHandler = { [weak self] path in
            self?.latest = path
            onChange(LinkTuning.describe(path))
        }
        monitor.start(queue: queue)
    }

    var current: Network.NWPath? { queue.sync { latest } }

    func stop() { monitor.cancel() }
}
#endif
