import Foundation

/// The operating system as a ``PathSource``: on Linux, rtnetlink (links, addresses, routes, rules and
/// nexthops of both families, and the kernel's own route lookups), an inotify watch on resolv.conf
/// and sysfs facts about interfaces.
///
/// One source serves any number of monitors; ``shared(namespace:)`` returns the process-wide one
/// for a namespace, so a process keeps one netlink socket per namespace however many monitors it
/// has. The socket and its thread exist only while some monitor is started, and go away when the
/// last one is cancelled.
///
/// Make your own instance to read another resolv.conf or sysfs (tests, unusual containers):
///
/// ```swift
/// let source = SystemPathSource(configuration: .init(resolvConfPath: "/run/my/resolv.conf"))
/// let monitor = PathMonitor(source: source)
/// ```
public final class SystemPathSource: PathSource {
    /// Where the source looks.
    public struct Configuration: Sendable, Hashable {
        /// The network namespace to observe; `nil` for the process's own.
        public var namespace: NetworkNamespace?
        /// The resolv.conf whose nameservers decide ``NetworkPath/supportsDNS``.
        public var resolvConfPath: String
        /// The sysfs directory of network interfaces. Only read for the process's own namespace:
        /// sysfs shows the namespace that mounted it, so other namespaces' interfaces are
        /// classified from netlink facts and names alone.
        public var sysfsPath: String
        /// The netlink socket's receive buffer in bytes. Bursts beyond it are an overrun, which
        /// costs a full re-dump but never a stale state.
        public var receiveBufferSize: Int32
        /// One global address per family whose route the kernel is asked for, to learn how traffic
        /// to the internet leaves (``SystemSnapshot/routeLookups``). They are only looked up
        /// (`RTM_GETROUTE`, like `ip route get`), never contacted.
        public var routeLookupAddresses: [IPAddress]

        /// `8.8.8.8` and `2001:4860:4860::8888`: public addresses a split tunnel or a bogon filter
        /// is unlikely to route apart from the rest of the internet (the same ones WebRTC's
        /// default-route probe uses). Only looked up, never contacted.
        public static let defaultRouteLookupAddresses = [IPAddress("8.8.8.8")!, IPAddress("2001:4860:4860::8888")!]

        /// Creates a configuration. `resolvConfPath` defaults to the namespace's resolv.conf
        /// (see ``NetworkNamespace/resolvConfPath``).
        public init(
            namespace: NetworkNamespace? = nil, resolvConfPath: String? = nil,
            sysfsPath: String = "/sys/class/net", receiveBufferSize: Int32 = 4 << 20,
            routeLookupAddresses: [IPAddress] = Configuration.defaultRouteLookupAddresses
        ) {
            self.namespace = namespace
            self.resolvConfPath = resolvConfPath ?? namespace?.resolvConfPath ?? "/etc/resolv.conf"
            self.sysfsPath = sysfsPath
            self.receiveBufferSize = receiveBufferSize
            self.routeLookupAddresses = routeLookupAddresses
        }
    }

    /// What this source observes.
    public let configuration: Configuration

    private static let registry = Locked<[Configuration: SystemPathSource]>([:])

    /// The process-wide source for a namespace (`nil`: the process's own).
    public static func shared(namespace: NetworkNamespace? = nil) -> SystemPathSource {
        let configuration = Configuration(namespace: namespace)
        return registry.withLock { sources in
            if let source = sources[configuration] { return source }
            let source = SystemPathSource(configuration: configuration)
            sources[configuration] = source
            return source
        }
    }

    private struct State {
        #if os(Linux)
        var engine: NetlinkEngine?
        #endif
        /// Subscribers plus subscriptions still being set up: the engine stops when it drops to 0.
        var holders = 0
        var subscribers: [UInt64: @Sendable (SystemSnapshot) -> Void] = [:]
        var nextID: UInt64 = 0
        var latest = SystemSnapshot()
        /// How many engines this source has launched (tests check that monitors share one).
        var launches = 0
    }

    private let state = Locked(State())
    /// Serializes deliveries, so a subscriber's first snapshot never overtakes a later one.
    private let deliveryLock = NSLock()

    /// Creates a source of its own (not shared with other monitors).
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    public func subscribe(_ receiver: @escaping @Sendable (SystemSnapshot) -> Void) throws(PathMonitorError) -> PathSubscription {
        #if os(Linux)
        let engine = state.withLock { state -> NetlinkEngine in
            state.holders += 1
            if let engine = state.engine { return engine }
            let engine = NetlinkEngine(configuration: configuration) { [weak self] snapshot in
                self?.deliver(snapshot)
            }
            state.engine = engine
            state.launches += 1
            engine.launch()
            return engine
        }
        do {
            try engine.waitUntilReady()
        } catch {
            release(engine: engine)
            throw error
        }
        deliveryLock.lock()
        defer { deliveryLock.unlock() }
        let (id, latest) = state.withLock { state in
            let id = state.nextID
            state.nextID += 1
            state.subscribers[id] = receiver
            return (id, state.latest)
        }
        receiver(latest)
        return PathSubscription { [weak self] in self?.unsubscribe(id, engine: engine) }
        #else
        throw .unsupportedPlatform
        #endif
    }

    /// How many times a netlink engine was launched, and whether one runs now (for tests).
    var engineStatistics: (launches: Int, running: Bool) {
        #if os(Linux)
        state.withLock { ($0.launches, $0.engine != nil) }
        #else
        (0, false)
        #endif
    }

    #if os(Linux)
    private func deliver(_ snapshot: SystemSnapshot) {
        deliveryLock.lock()
        defer { deliveryLock.unlock() }
        let receivers = state.withLock { state in
            state.latest = snapshot
            return Array(state.subscribers.values)
        }
        for receiver in receivers { receiver(snapshot) }
    }

    private func unsubscribe(_ id: UInt64, engine: NetlinkEngine) {
        state.withLock { _ = $0.subscribers.removeValue(forKey: id) }
        release(engine: engine)
    }

    private func release(engine: NetlinkEngine) {
        let stopping = state.withLock { state -> NetlinkEngine? in
            state.holders -= 1
            guard state.holders == 0, state.engine === engine else { return nil }
            state.engine = nil
            return engine
        }
        stopping?.stop()
    }
    #endif
}
