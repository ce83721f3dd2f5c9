import ArgumentParser
import Dispatch
import NetReach
import NetReachCLI

/// The options every command shares: which network to observe.
struct MonitorOptions: ParsableArguments {
    @Option(
        name: .long,
        help: ArgumentHelp(
            "Observe another network namespace: an `ip netns` name or a namespace file such as /proc/PID/ns/net (needs root).",
            valueName: "name|path"))
    var namespace: String?

    func validate() throws {
        // An empty name would become the directory /var/run/netns/ and fail later as exit 2,
        // when it is plainly a usage mistake.
        if let namespace, namespace.isEmpty {
            throw ValidationError("--namespace needs an `ip netns` name or a path such as /proc/PID/ns/net.")
        }
    }

    /// The namespace to observe; `nil` for this process's own.
    var networkNamespace: NetworkNamespace? { namespace.map(NetworkNamespace.init(argument:)) }

    /// Creates and starts a monitor of the chosen network, so its `currentPath` is exact.
    ///
    /// Throws ``CLIExitCode/monitorUnavailable`` (after saying why on standard error) when the
    /// monitor could not observe the system: its path would be a placeholder, not the network.
    func startMonitor(requiredInterfaceType: InterfaceType? = nil) throws(ExitCode) -> PathMonitor {
        let monitor = PathMonitor(requiredInterfaceType: requiredInterfaceType, namespace: networkNamespace)
        monitor.start(queue: DispatchQueue(label: "netreach.monitor"))
        try Self.checkStarted(monitor)
        return monitor
    }

    /// Throws ``CLIExitCode/monitorUnavailable`` if `monitor` could not observe the system.
    static func checkStarted(_ monitor: PathMonitor) throws(ExitCode) {
        guard let failure = monitor.failure else { return }
        monitor.cancel()
        StandardStream.complain("cannot observe the network: \(failure)")
        throw CLIExitCode.monitorUnavailable
    }
}
