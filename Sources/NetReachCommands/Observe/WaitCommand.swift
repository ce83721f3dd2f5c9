import ArgumentParser
import Dispatch
import NetReach
import NetReachConnectivity

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `netreach wait`: exit 0 as soon as the network is usable, 1 if it is not within the timeout.
/// For systemd units, container entrypoints and CI scripts, like `systemd-networkd-wait-online`.
package struct WaitCommand: NetreachSubcommand {
    package static let configuration = CommandConfiguration(
        commandName: "wait",
        _superCommandName: NetreachCommand.commandName,
        abstract: "Wait until the network path is satisfied, then exit 0.",
        // Written out: generated from the array-backed options, it would end each with "...", as if
        // they could be repeated.
        usage: """
            netreach wait [--timeout <duration>] [--interface-type <type>]
                [--ipv4] [--ipv6] [--dns] [--quiet] [--json] [--to <host>]
                [--port <port>] [--protocol tcp|udp] [--namespace <name|path>]
              netreach wait --internet [--probe <url[=expect]> ...]
                [--well-known-probes] [--quorum <n>] [--family 4|6]
                [--probe-timeout <duration>] [--probe-interval <duration>]
                [--max-probe-backoff <duration>] [--proxy <url>] [--noproxy <list>]
                [--timeout <duration>] [--ipv4] [--ipv6] [--dns] [--quiet]
                [--json] [--namespace <name|path>]
            """,
        discussion: """
            Exits as soon as the path is satisfied with the given requirements, at once if it \
            already is, and prints the path on standard output. If the path is not satisfied \
            in time, prints why on standard error and exits 1:
              netreach: timed out after 30s: unsatisfied (no default route)

            A duration is a number with a unit (h, m, s, ms), or several from the largest down \
            (1m30s, 1h2m3.5s, 2m500ms); a bare number is seconds.

            With --internet, waits until the internet answers too (full), judged with probes as \
            `netreach check` judges (the same probe flags; see `netreach check --help`), probing \
            at once, after every path change and, while it does not answer, every second \
            (--max-probe-backoff), so that a recovery is noticed within about a second. On timeout it says the verdict and why:
              netreach: timed out after 30s: satisfied eth0(wiredEthernet) ipv4 gw 192.0.2.1; internet limited (ipv4 limited, ipv6 local)
            --timeout 0 waits for the first verdict only. With --namespace, the probes leave \
            from inside that namespace.

            With --json, the path (with --internet, the path and its "connectivity") is printed \
            as one JSON object, as status --json prints it, also on timeout: the exit status \
            says whether it met the requirements.

            Examples:
              netreach wait --timeout 2m --ipv4 --dns && exec my-daemon
              netreach wait --internet --probe http://192.0.2.10/generate_204 --timeout 1m
              netreach wait --interface-type wiredEthernet --timeout 500ms --quiet
              netreach wait --timeout 1m30s
              netreach wait --timeout infinity   # no limit: until the path is satisfied
              netreach wait --timeout 0          # check once, do not wait

            \(ExitStatusTable.help(for: "wait"))
            """
    )

    // Options given as arrays only so that repeating one is refused (SingleValuedOption).
    @Option(
        name: .customLong("timeout"),
        parsing: .unconditionalSingleValue, // so `--timeout -3` reaches the parser and gets a clear error
        help: ArgumentHelp(
            "How long to wait: 30s, 500ms, 2m, 1h, 1.5s, 1m30s, or a number of seconds; infinity waits without limit; 0 checks once without waiting. (default: 30s)",
            valueName: "duration"),
        transform: { try WaitTimeout(parsing: $0) })
    var timeouts: [WaitTimeout] = []

    @Option(
        name: .customLong("interface-type"),
        help: ArgumentHelp("Only count interfaces of this type.", valueName: "type"))
    var interfaceTypes: [InterfaceType] = []

    @Flag(help: "Also require IPv4: an IPv4 address and an IPv4 default route.")
    var ipv4 = false

    @Flag(help: "Also require IPv6: a global IPv6 address and an IPv6 default route. With --ipv4, require both.")
    var ipv6 = false

    @Flag(help: "Also require a nameserver in resolv.conf.")
    var dns = false

    @Flag(
        name: [.short, .long],
        help: "Print nothing on success and no NetReach diagnostics; errors still go to standard error.")
    var quiet = false

    @Flag(
        help:
            "Print the path (with --internet, the verdict) as one JSON object, also when the wait timed out; schema: Docs/netreach-json.schema.json."
    )
    var json = false

    @OptionGroup var monitorOptions: MonitorOptions

    @OptionGroup var internetOptions: InternetOptions

    package init() {}

    package func validate() throws {
        _ = try SingleValuedOption.value(of: "--timeout", in: timeouts)
        _ = try SingleValuedOption.value(of: "--interface-type", in: interfaceTypes)
        if internetOptions.internet {
            if monitorOptions.destination != nil {
                throw ValidationError("--internet judges the path to the internet; it cannot be combined with --to.")
            }
            if interfaceType != nil {
                throw ValidationError(
                    "--internet probes over the system's routes, whatever the interface; it cannot be combined with --interface-type."
                )
            }
        }
    }

    /// `--timeout`, 30 s when not given.
    var timeout: WaitTimeout { timeouts.last ?? .limited(.seconds(30)) }

    /// `--interface-type`, if given.
    var interfaceType: InterfaceType? { interfaceTypes.last }

    private var condition: WaitCondition {
        WaitCondition(requiresIPv4: ipv4, requiresIPv6: ipv6, requiresDNS: dns)
    }

    package func run(_ capabilities: Capabilities) async throws {
        if quiet { NetReachDiagnostics.handler = nil }
        if internetOptions.internet { return try await waitForInternet(capabilities) }
        let monitor = try monitorOptions.startMonitor(requiredInterfaceType: interfaceType)
        defer { monitor.cancel() }

        let initial = monitor.currentPath
        if condition.isMet(by: initial) { return try succeed(with: initial) }
        if timeout.isZero { try timeOut(lastPath: initial) }

        // When time is up, cancelling the monitor ends `paths`, and so the loop. No limit, no task.
        let deadline = timeout.duration.map { limit in
            Task {
                guard (try? await Task.sleep(for: limit)) != nil else { return }
                monitor.cancel()
            }
        }
        defer { deadline?.cancel() }
        var last = initial
        for await path in monitor.paths {
            last = path
            if condition.isMet(by: path) { return try succeed(with: path) }
            // A monitor that can no longer observe the network will never see it come back.
            if path.unsatisfiedReason == .monitorUnavailable {
                throw MonitorOptions.stoppedObserving(monitor.failure)
            }
        }
        try timeOut(lastPath: last)
    }

    /// `wait --internet`: until the path meets the condition and the internet answers.
    private func waitForInternet(_ capabilities: Capabilities) async throws {
        if let namespace = monitorOptions.namespace { try capabilities.enterNamespace(namespace) }
        // Probing each second while it waits: a recovery is noticed within a second or so, not
        // after a back-off grown to minutes; the wait is bounded by --timeout.
        var configuration = try internetOptions.configuration(
            inNamespace: monitorOptions.namespace != nil, fallbackMaximumBackOff: .seconds(1))
        // Waited for now: the path's cost does not hold the probes back (as with check).
        configuration.allowsExpensiveProbes = true
        configuration.allowsConstrainedProbes = true
        let paths = try monitorOptions.startMonitor()
        defer { paths.cancel() }
        let monitor = ConnectivityMonitor(
            configuration: configuration, pathMonitor: paths,
            prober: capabilities.makeProber(internetOptions.probing.transportSettings()))
        defer { monitor.cancel() }
        let verdicts = monitor.verdicts
        monitor.start(queue: DispatchQueue(label: "netreach.connectivity"))

        // When time is up, cancelling the monitor ends `verdicts`, and so the loop. `--timeout 0`
        // waits for the first verdict (a round ends within the probe timeout); no limit, no task.
        let limit = timeout.isZero ? configuration.probeTimeout * 2 + .seconds(5) : timeout.duration
        let deadline = limit.map { limit in
            Task {
                guard (try? await Task.sleep(for: limit)) != nil else { return }
                monitor.cancel()
            }
        }
        defer { deadline?.cancel() }
        var last = Connectivity.unknown
        last.path = paths.currentPath
        for await verdict in verdicts {
            last = verdict
            if condition.isMet(by: verdict.path), verdict.level == .full {
                if !quiet {
                    try CommandOutput.writeLine(
                        json ? ConnectivityJSON.line(verdict, at: Date()) : PathFormatting.line(verdict))
                }
                return
            }
            if verdict.path.unsatisfiedReason == .monitorUnavailable {
                throw MonitorOptions.stoppedObserving(paths.failure)
            }
            if timeout.isZero, ProbeOptions.isFinal(verdict, configuration) { break }
        }
        let shortfall =
            condition.isMet(by: last.path) || last.path.status != .satisfied
            ? PathFormatting.line(last)
            : "\(condition.shortfall(of: last.path)); internet \(ConnectivityReport.summary(last))"
        StandardStream.complain("timed out after \(timeout): \(shortfall)")
        if json && !quiet { try CommandOutput.writeLine(ConnectivityJSON.line(last, at: Date())) }
        throw CLIExitCode.timedOut
    }

    private func succeed(with path: NetworkPath) throws(ExitCode) {
        if !quiet {
            try CommandOutput.writeLine(json ? PathJSON.line(path, at: Date()) : PathFormatting.line(path))
        }
    }

    private func timeOut(lastPath: NetworkPath) throws(ExitCode) -> Never {
        if json && !quiet { try CommandOutput.writeLine(PathJSON.line(lastPath, at: Date())) }
        StandardStream.complain("timed out after \(timeout): \(condition.shortfall(of: lastPath))")
        throw CLIExitCode.timedOut
    }
}
