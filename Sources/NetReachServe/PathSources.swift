import NetReach

/// Where ``NetworkWatch``'s monitors read the network from, per namespace: the kernel's
/// (``system``), or any ``PathSource`` per namespace, such as `NetReachTesting`'s
/// `SimulatedNetwork`, so that the watch's reconcile, reload and namespace logic run in tests
/// without root.
///
/// ```swift
/// let network = SimulatedNetwork.connected()
/// let watch = NetworkWatch(targets: targets, state: state, sources: .each { _ in network })
/// ```
package struct PathSources: Sendable {
    /// A monitor of `destination` (`nil`: the internet) for `traffic` in `namespace` (`nil`: the
    /// server's own), not started.
    package let monitor:
        @Sendable (_ destination: PathDestination?, _ traffic: PathTraffic, _ namespace: NetworkNamespace?) ->
            PathMonitor

    package init(
        monitor: @escaping @Sendable (PathDestination?, PathTraffic, NetworkNamespace?) -> PathMonitor
    ) {
        self.monitor = monitor
    }

    /// The kernel's: each namespace's shared ``SystemPathSource`` for the traffic asked about
    /// (its engine asks the kernel for that packet's routes); a destination's host name is
    /// resolved inside its namespace.
    package static let system = PathSources { destination, traffic, namespace in
        guard let destination else {
            return PathMonitor(port: traffic.port, protocol: traffic.transportProtocol, namespace: namespace)
        }
        return PathMonitor(
            destination: destination, port: traffic.port, protocol: traffic.transportProtocol, namespace: namespace)
    }

    /// How a watch's monitor resolves a destination's host name in a namespace (`nil`: the
    /// server's own): the namespace's own resolver by default, as `.system` resolves.
    package typealias Resolver =
        @Sendable (_ host: String, _ timeout: Duration, _ namespace: NetworkNamespace?) -> Result<
            [IPAddress], HostResolutionError
        >

    /// `source(namespace)` for every monitor in that namespace, whatever its traffic (a
    /// simulated network answers every packet alike). A destination's host name is resolved by
    /// `resolve` for the monitor's namespace: by default inside it, with its `/etc/netns/NAME`
    /// files, as ``system`` resolves (``HostResolver/resolve(_:family:timeout:in:)``), never by
    /// this process's resolver for another namespace.
    ///
    /// ```swift
    /// let sources = PathSources.each { namespace in networks[namespace?.path ?? ""]! }
    /// ```
    package static func each(
        _ source: @escaping @Sendable (NetworkNamespace?) -> any PathSource,
        resolve: @escaping Resolver = { HostResolver.resolve($0, timeout: $1, in: $2) }
    ) -> PathSources {
        PathSources { destination, _, namespace in
            guard let destination else { return PathMonitor(source: source(namespace)) }
            return PathMonitor(
                destination: destination, source: source(namespace),
                resolve: { host, timeout in resolve(host, timeout, namespace) })
        }
    }
}
