// `import Network` brings Dispatch on Apple platforms (its headers include <dispatch/dispatch.h>),
// and ported files use `DispatchQueue` with no other import: this module brings it too. Not
// Foundation: Network does not re-export it.
@_exported import Dispatch
import NetReach
import NetReachSystem

/// Watches the network path, as Network.framework's `NWPathMonitor`, backed by NetReach's
/// ``NetReach/PathMonitor``: code written for Apple platforms compiles on Linux by changing its
/// import.
///
/// ```swift
/// #if canImport(Network)
/// import Network
/// #else
/// import NetReachNetwork
/// #endif
///
/// let monitor = NWPathMonitor()
/// monitor.pathUpdateHandler = { path in
///     print(path.status == .satisfied ? "online" : "offline")
/// }
/// monitor.start(queue: DispatchQueue(label: "network"))
/// ```
///
/// With NetReach's guarantees on top of Apple's contract: ``currentPath`` is exact as soon as
/// ``start(queue:)`` returns (Apple's is not valid until the first callback) and may be read from
/// any thread; a second `start`, or one after ``cancel()``, is ignored; `cancel()` is safe from
/// inside the handler.
///
/// In tests, drive it with a simulated network (`NetReachTesting`) instead of the kernel:
///
/// ```swift
/// let network = SimulatedNetwork.connected(.wifi)
/// let monitor = NWPathMonitor(source: network)
/// monitor.start(queue: .main)
/// network.setLinkUp("wlan0", false)
/// #expect(monitor.currentPath.status == .unsatisfied)
/// ```
public final class NWPathMonitor: Sendable, CustomDebugStringConvertible {
    /// The NetReach monitor behind this one: its ``NetReach/PathMonitor/currentPath`` has the Linux
    /// details (reasons, gateways as addresses), its ``NetReach/PathMonitor/failure`` says why the
    /// system could not be observed.
    public let pathMonitor: PathMonitor
    private let state = Locked(State())

    private struct State {
        var handler: (@Sendable (NWPath) -> Void)?
        var queue: DispatchQueue?
    }

    /// A monitor of the path to the internet over any interface.
    public convenience init() {
        self.init(pathMonitor: PathMonitor())
    }

    /// A monitor of paths over interfaces of one type only.
    public convenience init(requiredInterfaceType: NWInterface.InterfaceType) {
        self.init(pathMonitor: PathMonitor(requiredInterfaceType: requiredInterfaceType.netReachType))
    }

    /// A monitor of paths over any interface except those of the given types.
    public convenience init(prohibitedInterfaceTypes: [NWInterface.InterfaceType]) {
        self.init(pathMonitor: PathMonitor(prohibitedInterfaceTypes: prohibitedInterfaceTypes.map(\.netReachType)))
    }

    /// A monitor fed by another source of paths, such as `SimulatedNetwork` in tests.
    public convenience init(
        source: any PathSource, requiredInterfaceType: NWInterface.InterfaceType? = nil,
        prohibitedInterfaceTypes: [NWInterface.InterfaceType] = []
    ) {
        let requirements = PathRequirements(
            requiredInterfaceType: requiredInterfaceType?.netReachType,
            prohibitedInterfaceTypes: Set(prohibitedInterfaceTypes.map(\.netReachType)))
        self.init(pathMonitor: PathMonitor(requirements: requirements, source: source))
    }

    /// Network.framework's spelling of a NetReach monitor you configured yourself (another
    /// namespace, your own interface classification, a destination). Start and cancel it through
    /// this object.
    public init(pathMonitor: PathMonitor) {
        self.pathMonitor = pathMonitor
    }

    /// Called on the start queue with the first path and then with every change. Set it before
    /// ``start(queue:)`` to see the first path.
    @preconcurrency
    public var pathUpdateHandler: (@Sendable (NWPath) -> Void)? {
        get { state.withLock { $0.handler } }
        set {
            state.withLock { $0.handler = newValue }
            if let newValue {
                pathMonitor.pathUpdateHandler = { @Sendable path in newValue(NWPath(path)) }
            } else {
                pathMonitor.pathUpdateHandler = nil
            }
        }
    }

    /// The latest path; exact from the moment ``start(queue:)`` returns, and safe to read from any
    /// thread. Before start it is unsatisfied.
    public var currentPath: NWPath { NWPath(pathMonitor.currentPath) }

    /// The queue given to ``start(queue:)``; `nil` before.
    public var queue: DispatchQueue? { state.withLock { $0.queue } }

    /// Starts monitoring; the handler runs on `queue`. Returns once the system state has been read.
    /// Calls after the first, or after ``cancel()``, are ignored.
    public func start(queue: DispatchQueue) {
        if pathMonitor.isIdle { state.withLock { if $0.queue == nil { $0.queue = queue } } }
        pathMonitor.start(queue: queue)
    }

    /// Stops monitoring for good: no handler runs after it (called on the start queue or from the
    /// handler), and every `for await` loop over the monitor ends.
    public func cancel() {
        pathMonitor.cancel()
    }

    /// The current path's description.
    public var debugDescription: String { "NWPathMonitor: \(currentPath.debugDescription)" }
}

extension NWPathMonitor: AsyncSequence {
    public typealias Element = NWPath
    public typealias AsyncIterator = Iterator

    /// Yields the current path first, then each change, until the monitor is cancelled or the
    /// iterating task is. Iterating starts a monitor that was not started (on a queue of its own).
    public struct Iterator: AsyncIteratorProtocol {
        // Holds the monitor: `for await path in NWPathMonitor()` keeps it alive while it loops.
        private let monitor: NWPathMonitor
        private var paths: AsyncStream<NetworkPath>.Iterator

        init(_ monitor: NWPathMonitor) {
            self.monitor = monitor
            paths = monitor.pathMonitor.paths.makeAsyncIterator()
        }

        public mutating func next() async -> NWPath? {
            await paths.next().map(NWPath.init)
        }
    }

    /// An iterator over the monitor's paths.
    ///
    /// ```swift
    /// for await path in NWPathMonitor() where path.status == .satisfied {
    ///     print("online over", path.availableInterfaces.first?.name ?? "?")
    ///     break
    /// }
    /// ```
    public func makeAsyncIterator() -> Iterator {
        if pathMonitor.isIdle {
            let queue = DispatchQueue(label: "NetReachNetwork.NWPathMonitor")
            state.withLock { if $0.queue == nil { $0.queue = queue } }
            pathMonitor.startIfIdle(queue: queue)
        }
        return Iterator(self)
    }
}
