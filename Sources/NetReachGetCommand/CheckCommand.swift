import ArgumentParser
#if os(Linux)
import CNetReachNamespaceEntry
import Glibc
#endif
import Dispatch
import Foundation
import NetReach
import NetReachAsyncHTTPClient
import NetReachCLI
import NetReachConnectivity
import NetReachHTTP

/// `netreach check`: one verdict on whether the internet answers, with every probe's evidence.
struct CheckCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Probe whether the internet really answers: full, portal, limited, local or none.",
        usage: "netreach check --probe <url[=expect]> [--probe ...] [--quorum <n>] [--family 4|6] [--json] [--namespace <name|path>]",
        discussion: """
            A path only says a route exists. check sends each probe over each address family the \
            path supports (in parallel; redirects are never followed) and judges the answers as \
            NetworkManager does: a 204 (or the expected status or body text) passes; a redirect, \
            another page or more than 100 KiB is a captive portal (the redirect's Location is where \
            to sign in); an https probe whose certificate is not trusted was intercepted (a portal); \
            no answer is limited. A family is full when --quorum probes pass.

            No probe is built in: nothing is contacted unless configured with --probe, with \
            NETREACH_PROBE_URLS (comma-separated URL[=EXPECT] entries), or with \
            --well-known-probes (public endpoints of Google, GNOME and Mozilla; asking them tells \
            their operators that this machine is online). EXPECT is a status (204, 200) or text the \
            body must start with.

            Probes use SSL_CERT_FILE and SSL_CERT_DIR for https, never a proxy.

            With --namespace, check runs inside that network namespace (it needs root), as \
            `ip netns exec` would run it: for an `ip netns` name, /etc/netns/NAME/resolv.conf and \
            the namespace's /sys are seen in place of the machine's.

            EXIT STATUS
              0   full: the internet answers
              1   unknown: no verdict (no probe can be sent over the path's families)
              2   portal: something answered in the probes' place (the login URL is printed when known);
                  or --namespace could not be entered (said on standard error)
              3   limited (a route, but no answer) or local (no route beyond the local network)
              4   none: no usable network path
              64  usage error (no probe configured, an invalid probe or option)
              74  the output could not be written (closed, full, or its reader gone)
            """
    )

    @Option(name: .customLong("probe"),
            help: ArgumentHelp("A probe: an http(s) URL, optionally =EXPECT (a status such as 204, or text the body starts with). Repeatable.",
                               valueName: "url[=expect]"))
    var probeTexts: [String] = []

    @Flag(name: .customLong("well-known-probes"),
          help: "Also probe public endpoints of Google, GNOME and Mozilla (opt-in: they learn that this machine is online).")
    var wellKnownProbes = false

    @Option(help: ArgumentHelp("How many probes of a family must pass for full (1 to the number of probes).", valueName: "n"))
    var quorum = 1

    @Option(help: ArgumentHelp("Judge only this address family: 4 or 6.", valueName: "4|6"))
    var family: Int?

    @Option(name: .customLong("probe-timeout"), parsing: .unconditional,
            help: ArgumentHelp("How long one probe may take: 10s, 1500ms, or seconds. (default: 10s)", valueName: "duration"),
            transform: { try WaitDuration(parsing: $0) })
    var probeTimeout: WaitDuration = .seconds(10)

    @Flag(help: "Print one JSON object: the level overall and per family, with every probe's evidence.")
    var json = false

    // An array only so that a repeated --namespace can be refused.
    @Option(name: .customLong("namespace"),
            help: ArgumentHelp("Probe from inside another network namespace: an `ip netns` name or a namespace file such as /proc/PID/ns/net (needs root).",
                               valueName: "name|path"))
    var namespaces: [String] = []

    /// The probes to send: --probe, else NETREACH_PROBE_URLS; and the well-known ones if asked.
    func probes(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> [ConnectivityProbe] {
        var probes: [ConnectivityProbe] = []
        do {
            if probeTexts.isEmpty {
                probes = try ConnectivityProbe.fromEnvironment(environment)
            } else {
                for text in probeTexts { probes.append(try ConnectivityProbe(parsing: text)) }
            }
        } catch {
            throw ValidationError("\(error)")
        }
        if wellKnownProbes { probes += ConnectivityProbe.wellKnown }
        return probes
    }

    func validate() throws {
        let probes = try probes()
        guard !probes.isEmpty else {
            throw ValidationError("""
                no probe is configured, and none is built in (nothing is contacted unless you say so). \
                Give one with --probe URL[=EXPECT] (for example --probe http://192.0.2.10/generate_204), \
                set NETREACH_PROBE_URLS, or opt in to public endpoints with --well-known-probes.
                """)
        }
        guard (1...probes.count).contains(quorum) else {
            throw ValidationError("--quorum must be between 1 and the number of probes (\(probes.count)).")
        }
        if let family, family != 4 && family != 6 {
            throw ValidationError("--family must be 4 or 6.")
        }
        guard probeTimeout.duration > .zero, probeTimeout.duration <= .seconds(600) else {
            throw ValidationError("--probe-timeout must be more than 0 and at most 10m.")
        }
        guard namespaces.count <= 1 else { throw ValidationError("--namespace was given more than once.") }
        if namespaces.first?.isEmpty == true {
            throw ValidationError("--namespace needs an `ip netns` name or a path such as /proc/PID/ns/net.")
        }
    }

    /// With `--namespace`: runs this command again inside the namespace (see
    /// CNetReachNamespaceEntry), or, in that second run, makes sure it got there.
    private func enterNamespace() throws {
        guard let argument = namespaces.first else { return }
        #if os(Linux)
        let tried = "NETREACH_ENTER_NETNS_TRIED"
        if getenv(tried) != nil {
            unsetenv(tried)
            if cnr_netns_entered() == 1 { return }
            let why = cnr_netns_entry_error().map { String(cString: $0) } ?? "the start-up code that enters it did not run"
            StandardStream.complain("cannot enter the network namespace \(argument): \(why)")
            throw CLIExitCode.monitorUnavailable
        }
        let namespace = NetworkNamespace(argument: argument)
        guard access(namespace.path, F_OK) == 0 else {
            StandardStream.complain("cannot enter the network namespace \(argument): \(namespace.path) does not exist")
            throw CLIExitCode.monitorUnavailable
        }
        setenv(CNR_NETNS_PATH_VARIABLE, namespace.path, 1)
        if let name = namespace.ipNetnsName { setenv(CNR_NETNS_NAME_VARIABLE, name, 1) }
        setenv(tried, "1", 1)
        var argv: [UnsafeMutablePointer<CChar>?] = CommandLine.arguments.map { strdup($0) }
        argv.append(nil)
        execv("/proc/self/exe", argv)
        StandardStream.complain("cannot enter the network namespace \(argument): re-running netreach-http failed: \(String(cString: strerror(errno)))")
        throw CLIExitCode.monitorUnavailable
        #else
        StandardStream.complain("--namespace needs Linux")
        throw CLIExitCode.monitorUnavailable
        #endif
    }

    func run() async throws {
        try enterNamespace()
        var configuration = ConnectivityMonitor.Configuration(probes: try probes())
        configuration.quorum = quorum
        configuration.families = family.map { $0 == 4 ? [.ipv4] : [.ipv6] } ?? [.ipv4, .ipv6]
        configuration.probeTimeout = probeTimeout.duration
        // Asked for by a person now: the path's cost does not hold the probes back.
        configuration.allowsExpensiveProbes = true
        configuration.allowsConstrainedProbes = true
        let paths = PathMonitor()
        paths.start(queue: DispatchQueue(label: "netreach.check.paths"))
        defer { paths.cancel() }
        let monitor = ConnectivityMonitor(configuration: configuration, pathMonitor: paths, prober: AsyncHTTPClientProber())
        monitor.start(queue: DispatchQueue(label: "netreach.check"))
        defer { monitor.cancel() }

        // A round ends within the probe timeout (DNS included); should anything still hang, the
        // command ends anyway with what it has, never waiting for ever.
        let updates = monitor.updates
        let limit = probeTimeout.duration * 2 + .seconds(5)
        let watchdog = Task {
            try await Task.sleep(for: limit)
            monitor.cancel()   // ends `updates`
        }
        defer { watchdog.cancel() }
        for await connectivity in updates where Self.isFinal(connectivity, configuration) {
            break
        }
        // The levels settle with the round; the evidence of that round is in `current`.
        let verdict = monitor.current
        do throws(StandardStream.WriteError) {
            try StandardStream.output.writeLine(json ? CheckReport.json(verdict) : CheckReport.text(verdict))
        } catch {
            throw CLIExitCode.outputFailed(error)
        }
        throw Self.exitCode(for: verdict.level)
    }

    /// A verdict that a round (or the path alone) decided for every family that can be judged
    /// (one that no probe can be sent over stays unknown).
    static func isFinal(_ connectivity: Connectivity, _ configuration: ConnectivityMonitor.Configuration) -> Bool {
        if connectivity.probesSuspended != nil { return true }
        return configuration.families.allSatisfy { family in
            connectivity[family].level != .unknown
                || (connectivity.path.status == .satisfied && !configuration.probes.contains { $0.canBeSent(over: family) })
        }
    }

    static func exitCode(for level: ConnectivityLevel) -> ExitCode {
        switch level {
        case .full: .success
        case .unknown: ExitCode(1)
        case .portal: ExitCode(2)
        case .limited, .local: ExitCode(3)
        case .none: ExitCode(4)
        }
    }
}
