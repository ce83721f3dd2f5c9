import Foundation

#if canImport(Network)
import Network
#else
import NetReachNetwork
#endif

// Reachability.swift's closures on top of NWPathMonitor: called on transitions only.

final class Reachability: @unchecked Sendable {
    // Touched only on `queue`.
    var whenReachable: ((Reachability) -> Void)?
    var whenUnreachable: ((Reachability) -> Void)?
    private var reachable: Bool?

    let queue: DispatchQueue
    private let monitor: NWPathMonitor

    init(monitor: NWPathMonitor = NWPathMonitor(), queue: DispatchQueue = DispatchQueue(label: "Reachability")) {
        self.monitor = monitor
        self.queue = queue
    }

    var isConnected: Bool { queue.sync { reachable ?? false } }

    func startNotifier() {
        monitor.pathUpdateHandler = { [weak self] path in
            guard let self else { return }
            let now = path.status == .satisfied
            guard now != self.reachable else { return }
            self.reachable = now
            if now { self.whenReachable?(self) } else { self.whenUnreachable?(self) }
        }
        monitor.start(queue: queue)
    }

    func stopNotifier() {
        monitor.cancel()
    }
}
