import Foundation

#if canImport(Network)
import Network
#else
import NetReachNetwork
#endif

// The protocol people put in front of NWPathMonitor so tests can swap it, and the stream
// people wrapped it in before the monitor was an AsyncSequence.

protocol PathMonitoring: AnyObject {
    var pathUpdateHandler: (@Sendable (_ newPath: NWPath) -> Void)? { get set }
    var currentPath: NWPath { get }
    func start(queue: DispatchQueue)
    func cancel()
}

extension NWPathMonitor: PathMonitoring {}

extension NWPathMonitor {
    func pathStream(queue: DispatchQueue) -> AsyncStream<NWPath> {
        AsyncStream { continuation in
            pathUpdateHandler = { path in continuation.yield(path) }
            continuation.onTermination = { [weak self] _ in self?.cancel() }
            start(queue: queue)
        }
    }
}

/// One answer: is there a usable path now? (`for await` over the monitor, iOS 17 and later.)
func isOnline(_ monitor: NWPathMonitor = NWPathMonitor()) async -> Bool {
    for await path in monitor {
        return path.status == .satisfied
    }
    return false
}

/// The gateways as apps print them.
func gatewayList(_ path: NWPath) -> [String] {
    path.gateways.map { "\($0)" }
}

/// What a status reads as in a log line.
func statusText(_ status: NWPath.Status) -> String {
    switch status {
    case .satisfied: "online"
    case .unsatisfied: "offline"
    case .requiresConnection: "on demand"
    @unknown default: "unknown" // as written for Apple's resilient enum; no warning here either
    }
}
