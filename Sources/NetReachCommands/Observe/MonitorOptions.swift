import ArgumentParser
import Dispatch
import NetReach

/// The options every command shares: which network to observe, and the path to where.
struct MonitorOptions: ParsableArguments {
    // An array only so that a repeated --to can be refused (SingleValuedOption).
    @Option(
        name: .customLong("to"),
        help: ArgumentHelp(
            "The path to this destination instead of to the internet: an IP address or a host name (resolved at start and after each change; a name without addresses is 'destination not resolved'). Loopback and on-link destinations need no default route.",
            valueName: "host"))
    var destinations: [String] = []

    // Arrays only so that a repeated --port or --protocol can be refused (SingleValuedOption).
    @Option(
        name: .customLong("port"),
        help: ArgumentHelp(
            "The destination port of the traffic whose path is followed (default 443). Policy rules can send traffic apart by port (`ip rule ... dport 443`); the source port asked about is the first of the namespace's ip_local_port_range.",
            valueName: "port"))
    var ports: [UInt16] = []

    @Option(
        name: .customLong("protocol"),
        help: ArgumentHelp(
            "The transport protocol of that traffic (default tcp). Policy rules can send TCP and UDP apart (`ip rule ... ipproto tcp`): --protocol udp --port 53 follows what a DNS query gets.",
            valueName: "tcp|udp"))
    var protocols: [TransportProtocol] = []

    // An array only so that a repeated --namespace can be refused (SingleValuedOption).
    @Option(
        name: .customLong("namespace"),
        help: ArgumentHelp(
            "Observe another network namespace: an `ip netns` name or a namespace file such as /proc/PID/ns/net (needs root).",
            valueName: "name|path"))
    var namespaces: [String] = []

    func validate() throws {
        if let destination = try SingleValuedOption.value(of: "--to", in: destinations), destination.isEmpty {
            throw ValidationError("--to needs an IP address or a host name.")
        }
        if try SingleValuedOption.value(of: "--port", in: ports) == 0 {
            throw ValidationError("--port needs a port from 1 to 65535.")
        }
        _ = try SingleValuedOption.value(of: "--protocol", in: protocols)
        // An empty name would become the directory /var/run/netns/ and fail later as exit 2,
        // when it is plainly a usage mistake.
        if let namespace = try SingleValuedOption.value(of: "--namespace", in: namespaces), namespace.isEmpty {
            throw ValidationError("--namespace needs an `ip netns` name or a path such as /proc/PID/ns/net.")
        }
    }

    /// The `--namespace` given (``validate()`` has made sure there is at most one).
    var namespace: String? { namespaces.last }

    /// The namespace to observe; `nil` for this process's own.
    var networkNamespace: NetworkNamespace? { namespace.map(NetworkNamespace.init(argument:)) }

    /// `--to`, if given.
    var destination: PathDestination? { destinations.last.map { PathDestination($0) } }

    /// `--port`, or 443 (a web client's).
    var port: UInt16 { ports.last ?? 443 }

    /// `--protocol`, or TCP (a web client's).
    var transportProtocol: TransportProtocol { protocols.last ?? .tcp }

    /// A monitor of the chosen network (and destination, and traffic), not started.
    func makeMonitor(requiredInterfaceType: InterfaceType? = nil) -> PathMonitor {
        if let destination {
            return PathMonitor(
                destination: destination, port: port, protocol: transportProtocol,
                requiredInterfaceType: requiredInterfaceType, namespace: networkNamespace)
        }
        return PathMonitor(
            port: port, protocol: transportProtocol, requiredInterfaceType: requiredInterfaceType,
            namespace: networkNamespace)
    }

    /// Creates and starts a monitor of the chosen network, so its `currentPath` is exact.
    ///
    /// Throws ``CLIExitCode/monitorUnavailable`` (after saying why on standard error) when the
    /// monitor could not observe the system: its path would be a placeholder, not the network.
    /// A `--to` name that does not resolve is said on standard error; the path says it too.
    func startMonitor(requiredInterfaceType: InterfaceType? = nil) throws(ExitCode) -> PathMonitor {
        let monitor = makeMonitor(requiredInterfaceType: requiredInterfaceType)
        monitor.start(queue: DispatchQueue(label: "netreach.monitor"))
        try Self.checkStarted(monitor)
        return monitor
    }

    /// Throws ``CLIExitCode/monitorUnavailable`` if `monitor` could not observe the system.
    static func checkStarted(_ monitor: PathMonitor) throws(ExitCode) {
        if let unresolved = monitor.resolutionFailure {
            StandardStream.complain("cannot resolve the destination: \(unresolved)")
        }
        guard let failure = monitor.failure else { return }
        monitor.cancel()
        throw stoppedObserving(failure)
    }

    /// For a monitor that could not observe the system, or stopped being able to (it delivered
    /// ``UnsatisfiedReason/monitorUnavailable``, as when a watched namespace is deleted): says why
    /// on standard error (`netreach: cannot observe the network: …`) and returns
    /// ``CLIExitCode/monitorUnavailable`` to exit with. Such a monitor reports no further change.
    static func stoppedObserving(
        _ failure: PathMonitorError?, complain: (String) -> Void = StandardStream.complain
    ) -> ExitCode {
        complain("cannot observe the network: \(failure.map { "\($0)" } ?? "the monitor stopped observing it")")
        return CLIExitCode.monitorUnavailable
    }
}
