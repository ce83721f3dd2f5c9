#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One update of a monitor: its path, what the kernel said the path was judged from, when it was
/// computed and where it stands in the monitor's order. A ``PathMonitor`` hands these to its
/// ``PathMonitor/updateObserver`` on the thread that computed them.
///
/// An update is published when the path changes, and also when only what it was judged from
/// changed: a route moved to another table, or an interface the path does not use went down. So
/// two updates in a row may carry equal paths; ``NetworkPath`` alone (``PathMonitor/paths``,
/// ``PathMonitor/pathUpdateHandler``) is change-only.
///
/// ```swift
/// let monitor = PathMonitor()
/// monitor.updateObserver = { update in
///     guard case .route(let route) = update.routes[.ipv4] else { return }
///     let name = update.interface(at: route.interfaceIndex)?.name ?? "?"
///     print(update.sequence, update.path.status, "via", name, route.gateway.map { "\($0)" } ?? "on-link")
/// }
/// monitor.start(queue: .main)
/// ```
public struct PathUpdate: Sendable, Hashable {
    /// The monitor's path.
    public var path: NetworkPath
    /// The kernel's answer per family that the path was judged from (``RouteLookup/noRoute`` and
    /// the other refusals included): for the path to the internet, the route of the monitored
    /// traffic to the internet, both families (``SystemSnapshot/routeLookup(for:)``); for a
    /// per-destination monitor, the route to its first address of each family it has. Empty when
    /// the system could not be read.
    public var routes: [IPAddress.Family: RouteLookup]
    /// Every interface of the namespace when the path was computed, by index: the ones the path
    /// does not use too, up or not.
    public var links: [Int: SystemSnapshot.Link]
    /// How the monitor classifies interfaces, which ``interface(at:)`` applies.
    public var classification: InterfaceClassification
    /// When the update was computed (the wall clock, for timestamps; order by ``sequence``).
    public var time: Date
    /// 1 for a monitor's first update, then one more for each: a gap never happens, so two
    /// consumers of the same monitor can tell which update is newer.
    public var sequence: UInt64

    /// Creates an update; a ``PathMonitor`` makes them, tests and simulated sources may too.
    public init(
        path: NetworkPath, routes: [IPAddress.Family: RouteLookup] = [:], links: [Int: SystemSnapshot.Link] = [:],
        classification: InterfaceClassification = .automatic, time: Date = Date(), sequence: UInt64 = 1
    ) {
        self.path = path
        self.routes = routes
        self.links = links
        self.classification = classification
        self.time = time
        self.sequence = sequence
    }

    /// The interface with `index` (a route's ``RouteLookup/KernelRoute/interfaceIndex``), typed as
    /// the monitor types it; `nil` when the namespace has no such interface.
    public func interface(at index: Int) -> NetworkInterface? {
        links[index].map { NetworkInterface(name: $0.name, index: $0.index, type: classification.type(of: $0)) }
    }

    /// Whether `other` carries what this update carries (path, routes and interfaces), whatever
    /// its time and sequence.
    func hasSameContent(as other: PathUpdate) -> Bool {
        path == other.path && routes == other.routes && links == other.links
    }
}
