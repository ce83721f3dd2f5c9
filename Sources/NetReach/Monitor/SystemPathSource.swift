import CoreMetrics
import Logging
import NetReachSystem

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The operating system as a ``PathSource``: on Linux, rtnetlink (links, addresses, routes, rules and
/// nexthops of both families, and the kernel's own route lookups), an inotify watch on resolv.conf
/// and sysfs facts about interfaces.
///
/// One source serves any number of monitors; ``shared(namespace:)`` returns the process-wide one
/// for a namespace, so a process keeps one netlink socket per namespace however many monitors it
/// has. The socket and its thread exist only while some monitor is started, and go away when the
/// last one is cancelled. Each snapshot reaches the subscribers in the order they subscribed.
///
/// Make your own instance to read another resolv.conf or sysfs (tests, unusual containers), or to
/// give its engine a logger and a metrics factory of its own:
///
/// ```swift
/// let source = SystemPathSource(configuration: .init(resolvConfPath: "/run/my/resolv.conf"))
/// let monitor = PathMonitor(source: source)
/// ```
///
/// The engine logs to a `Logger` labelled `netreach.path` and counts what it reads in the
/// `netreach_netlink_*` and `netreach_route_lookups_total` metrics (<doc:MetricsAndLogging>).
public final class SystemPathSource: PathSource {
    /// Where the source looks.
    public struct Configuration: Sendable, Hashable {
        /// The network namespace to observe; `nil` for the process's own.
        public var namespace: NetworkNamespace?
        /// The resolv.conf whose nameservers decide ``NetworkPath/supportsDNS``: the one given, or
        /// the namespace's resolv.conf at the time the configuration was made. Without an explicit
        /// path the source follows the namespace's candidates as they come and go
        /// (``NetworkNamespace/resolvConfCandidates``).
        public var resolvConfPath: String
        /// systemd-resolved's upstream server list: when resolv.conf names only resolved's stub
        /// (127.0.0.53/127.0.0.54), these servers decide ``NetworkPath/supportsDNS``. `nil` takes
        /// the stub at its word.
        public var resolvedUpstreamPath: String?
        /// What the source reads and watches for nameservers.
        var nameserverSource: NameserverSource {
            NameserverSource(candidates: resolvConfCandidates, resolvedUpstreamPath: resolvedUpstreamPath)
        }
        private var resolvConfCandidates: [String]
        /// The sysfs directory of network interfaces. Only read for the process's own namespace:
        /// sysfs shows the namespace that mounted it, so other namespaces' interfaces are
        /// classified from netlink facts and names alone.
        public var sysfsPath: String
        /// The netlink socket's receive buffer in bytes. Bursts beyond it are an overrun, which
        /// costs a full re-dump but never a stale state.
        public var receiveBufferSize: Int32
        /// Global addresses whose routes stand for "the internet" (``SystemSnapshot/routeLookups``),
        /// per family in order of preference. For each family the kernel is asked how a connected
        /// socket to the first would leave; when a route more specific than a default one decides
        /// that address (a VPN's host route to its DNS server, a `blackhole 8.8.8.8/32`), the next
        /// is asked, and the one with the broadest route stands for the family. They are only
        /// looked up (a UDP `connect`, `RTM_GETROUTE`), never contacted: nothing is sent to them.
        public var routeLookupAddresses: [IPAddress]
        /// The transport protocol of the traffic whose path the source follows: the kernel is asked
        /// where a client's packet of this protocol goes (`ip route get ... ipproto tcp`), so
        /// policy rules that match the protocol (`ip rule add ipproto tcp ...`) are followed.
        public var transportProtocol: TransportProtocol
        /// The destination port of that traffic (`ip rule ... dport 443`). The source port asked
        /// with is the first of the namespace's `ip_local_port_range`, where a client's ports come
        /// from (`ip rule ... sport 32768-60999`).
        public var port: UInt16
        /// How long after its first path the engine starts watching the nameserver files
        /// (reading them again then, so nothing written meanwhile is missed). An inotify instance
        /// with watches costs its process a grace period of the kernel's (5-8 ms here) when it is
        /// closed, at the latest at exit: a monitor stopped sooner (`netreach status`, a `wait`
        /// already met) never makes one.
        var nameserverWatchDelay: Duration = .milliseconds(25)
        /// `false` behaves as when `inotify_init1` fails with EMFILE, as it does once the user's
        /// `fs.inotify.max_user_instances` (128 by default) are all taken: the engine then reads
        /// the nameserver files and checks a namespace's path every ``NetlinkEngine/unwatchedRecheck``.
        /// For tests, which cannot take every instance of the machine's user from its other tests.
        var inotifyAvailable = true

        /// Four public resolvers' addresses per family, from four operators (Google, Cloudflare,
        /// Quad9, OpenDNS): addresses the internet routes like any other, so that one of them is
        /// routed apart (a split tunnel's host route, a network that blocks a hard-coded resolver)
        /// leaves the others to tell where everything else goes. Only looked up, never contacted.
        public static let defaultRouteLookupAddresses: [IPAddress] = [
            "8.8.8.8", "1.1.1.1", "9.9.9.9", "208.67.222.222",
            "2001:4860:4860::8888", "2606:4700:4700::1111", "2620:fe::fe", "2620:119:35::35",
        ].map { IPAddress($0)! }

        /// Creates a configuration. `resolvConfPath` defaults to the namespace's resolv.conf
        /// candidates (see ``NetworkNamespace/resolvConfCandidates``); `followsResolvedStub: false`
        /// takes systemd-resolved's stub at its word (set ``resolvedUpstreamPath`` to read the
        /// upstream list from elsewhere). The traffic asked about is a web client's, TCP to port 443,
        /// unless `port` and `transportProtocol` name another.
        public init(
            namespace: NetworkNamespace? = nil, resolvConfPath: String? = nil,
            sysfsPath: String = "/sys/class/net", receiveBufferSize: Int32 = 4 << 20,
            routeLookupAddresses: [IPAddress] = Configuration.defaultRouteLookupAddresses,
            followsResolvedStub: Bool = true, port: UInt16 = 443, transportProtocol: TransportProtocol = .tcp
        ) {
            self.port = port
            self.transportProtocol = transportProtocol
            self.namespace = namespace
            self.resolvConfPath = resolvConfPath ?? namespace?.resolvConfPath ?? "/etc/resolv.conf"
            resolvConfCandidates =
                resolvConfPath.map { [$0] } ?? namespace?.resolvConfCandidates ?? ["/etc/resolv.conf"]
            resolvedUpstreamPath =
                followsResolvedStub
                ? namespace?.resolvedUpstreamPath ?? "/run/systemd/resolve/resolv.conf" : nil
            self.sysfsPath = sysfsPath
            self.receiveBufferSize = receiveBufferSize
            self.routeLookupAddresses = routeLookupAddresses
        }
    }

    /// What this source observes.
    public let configuration: Configuration
    /// Where the engine logs: trouble at warning, each read of the kernel's state at debug.
    public let logger: Logger
    /// The factory of the engine's metrics; `nil`: `MetricsSystem.factory` when an engine starts.
    private let metricsFactory: (any MetricsFactory)?

    private static let registry = Locked<[Configuration: SystemPathSource]>([:])

    /// The process-wide source for a namespace (`nil`: the process's own) and traffic: one per
    /// namespace, protocol and port.
    ///
    /// ```swift
    /// let dns = PathMonitor(source: SystemPathSource.shared(port: 53, protocol: .udp))
    /// ```
    public static func shared(
        namespace: NetworkNamespace? = nil, port: UInt16 = 443, protocol transportProtocol: TransportProtocol = .tcp
    ) -> SystemPathSource {
        let configuration = Configuration(namespace: namespace, port: port, transportProtocol: transportProtocol)
        return registry.withLock { sources in
            if let source = sources[configuration] { return source }
            let source = SystemPathSource(configuration: configuration)
            sources[configuration] = source
            return source
        }
    }

    /// A monitor's receiver, under the id it unsubscribes with.
    private typealias Subscriber = (id: UInt64, receive: @Sendable (SystemSnapshot) -> Void)

    private struct State {
        #if os(Linux)
        var engine: NetlinkEngine?
        #endif
        /// Subscribers plus subscriptions still being set up, of the current engine: it stops when
        /// this drops to 0.
        var holders = 0
        /// In the order they subscribed (ids only grow): each snapshot reaches them in that order,
        /// the same in every run, not in a hash table's order.
        var subscribers: [Subscriber] = []
        var nextID: UInt64 = 0
        var latest = SystemSnapshot()
        /// How many engines this source has launched (tests check that monitors share one).
        var launches = 0
        /// Destinations per-destination monitors asked for, with how many ask for each.
        var destinationCounts: [IPAddress: Int] = [:]
    }
    /// Signalled at each delivery, for ``lookUpRoutes(to:)`` waiting for its first answers.
    private let delivered = Wakeup()

    private let state = Locked(State())
    /// Held while snapshots are handed out, so a subscriber's first snapshot never overtakes a later one.
    private let deliveries = Locked(())

    /// Creates a source of its own (not shared with other monitors).
    ///
    /// - Parameters:
    ///   - configuration: what to observe.
    ///   - logger: where the engine logs; by default a `Logger` labelled `netreach.path`.
    ///   - metricsFactory: makes the engine's counters; `nil` takes the factory bootstrapped in
    ///     `MetricsSystem` when an engine starts (a no-op one unless the program bootstrapped one).
    public init(
        configuration: Configuration = Configuration(), logger: Logger? = nil,
        metricsFactory: (any MetricsFactory)? = nil
    ) {
        self.configuration = configuration
        var logger = logger ?? PathMonitor.defaultLogger
        if let namespace = configuration.namespace { logger[metadataKey: "namespace"] = "\(namespace.path)" }
        self.logger = logger
        self.metricsFactory = metricsFactory
    }

    public func subscribe(
        _ receiver: @escaping @Sendable (SystemSnapshot) -> Void
    ) throws(PathMonitorError) -> PathSubscription {
        #if os(Linux)
        let engine = state.withLock { state -> NetlinkEngine in
            if let engine = state.engine {
                state.holders += 1
                return engine
            }
            // The engine is not created yet when the closure is made: it is handed over by identity.
            let sender = EngineReference()
            let engine = NetlinkEngine(
                configuration: configuration,
                destinations: Set(state.destinationCounts.keys),
                metrics: NetlinkEngineMetrics(factory: metricsFactory ?? MetricsSystem.factory), logger: logger,
                publish: { [weak self] snapshot in
                    guard let engine = sender.engine else { return }
                    self?.deliver(snapshot, from: engine)
                })
            sender.engine = engine
            state.holders = 1
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
        let id = deliveries.withLock { _ in
            let (id, latest) = state.withLock { state in
                let id = state.nextID
                state.nextID += 1
                // An engine that failed meanwhile has nothing more to send: its failure is the last word.
                if state.engine === engine { state.subscribers.append((id, receiver)) }
                return (id, state.latest)
            }
            receiver(latest)
            return id
        }
        return PathSubscription { [weak self] in self?.unsubscribe(id, engine: engine) }
        #else
        throw .unsupportedPlatform
        #endif
    }

    /// Keeps the kernel's routes to `destinations` in the snapshots (``SystemSnapshot/destinationLookups``)
    /// until the returned subscription is cancelled. When an engine already runs, returns once its
    /// snapshot has the answers (at most 5 s), so a monitor started next gets an exact first path;
    /// otherwise the engine's first snapshot has them.
    public func lookUpRoutes(to destinations: [IPAddress]) -> PathSubscription {
        #if os(Linux)
        // The engine is told inside the lock, so two callers' sets cannot arrive in the wrong order.
        let engine = state.withLock { state -> NetlinkEngine? in
            for destination in destinations { state.destinationCounts[destination, default: 0] += 1 }
            state.engine?.setDestinations(Set(state.destinationCounts.keys))
            return state.engine
        }
        if let engine {
            delivered.wait(until: .now + .seconds(5)) {
                state.withLock { state in
                    state.engine !== engine || destinations.allSatisfy { state.latest.destinationLookups[$0] != nil }
                }
            }
        }
        return PathSubscription { [weak self] in
            guard let self else { return }
            self.state.withLock { state in
                for destination in destinations {
                    let count = (state.destinationCounts[destination] ?? 1) - 1
                    state.destinationCounts[destination] = count > 0 ? count : nil
                }
                state.engine?.setDestinations(Set(state.destinationCounts.keys))
            }
        }
        #else
        return PathSubscription {}
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
    private func deliver(_ snapshot: SystemSnapshot, from engine: NetlinkEngine) {
        deliveries.withLock { _ in deliverInOrder(snapshot, from: engine) }
        delivered.broadcast()
    }

    /// `deliver`'s work, while `deliveries` is held.
    private func deliverInOrder(_ snapshot: SystemSnapshot, from engine: NetlinkEngine) {
        // The subscribers' list itself (shared, not copied: no array made per snapshot).
        let receivers = state.withLock { state -> [Subscriber] in
            // A stopped (or detached) engine may finish a batch after a new one started: its late
            // snapshot is older than the new engine's and must reach no one.
            guard state.engine === engine else { return [] }
            state.latest = snapshot
            let receivers = state.subscribers
            if snapshot.observationFailure != nil {
                // The engine has stopped for good (its namespace is gone). Its subscribers keep
                // the failure; a monitor started from now on gets an engine of its own, which opens
                // whatever the path names then (or fails to).
                state.engine = nil
                state.holders = 0
                state.subscribers = []
            }
            return receivers
        }
        for receiver in receivers { receiver.receive(snapshot) }
    }

    private func unsubscribe(_ id: UInt64, engine: NetlinkEngine) {
        state.withLock { $0.subscribers.removeAll { $0.id == id } }
        release(engine: engine)
    }

    private func release(engine: NetlinkEngine) {
        let stopping = state.withLock { state -> NetlinkEngine? in
            // An engine that failed was detached and stopped by itself: nothing to count.
            guard state.engine === engine else { return nil }
            state.holders -= 1
            guard state.holders == 0 else { return nil }
            state.engine = nil
            return engine
        }
        stopping?.stop()
    }
    #endif
}

#if os(Linux)
/// The engine a publish closure speaks for, set once right after the engine is made (the closure
/// must exist first). Weak: the source's state owns the engine.
private final class EngineReference: @unchecked Sendable {
    // @unchecked: written once, under the source's state lock, before the engine's thread starts
    // (`launch()` comes after), and only read afterwards on that thread.
    weak var engine: NetlinkEngine?
}
#endif
