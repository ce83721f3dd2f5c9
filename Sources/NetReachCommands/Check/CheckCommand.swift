import ArgumentParser
import Dispatch
import NetReach
import NetReachConnectivity
import NetReachHTTP

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `netreach check`: one verdict on whether the internet answers, with every probe's evidence.
struct CheckCommand: NetreachSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        _superCommandName: NetreachCommand.commandName,
        abstract: "Probe whether the internet really answers: full, portal, limited, local or none.",
        usage: """
            netreach check --probe <url[=expect]> [--probe ...] [--quorum <n>]
                [--family 4|6] [--probe-timeout <duration>] [--proxy <url>]
                [--noproxy <list>] [--json]
                [--namespace <name|path>]
            """,
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

            Probes go where requests go: through the proxy --proxy names, else the one \
            http_proxy, https_proxy (or HTTPS_PROXY) or all_proxy name, except for the hosts of \
            --noproxy or no_proxy, as curl and `netreach get` choose. Each probe's evidence names \
            the proxy it went through; a proxy that refused the connection, asked for credentials \
            (407) or answered 5xx for the probe is a failure (limited), not a portal. They use \
            SSL_CERT_FILE and SSL_CERT_DIR for https.

            An expected text is compared as the body arrives: the verdict comes as soon as the \
            text has arrived or a byte differs; a body that ends before the whole text is a \
            portal, and one still arriving at --probe-timeout is limited, whatever part of the \
            text came (as NetworkManager judges).

            With --namespace, check runs inside that network namespace (it needs root), as \
            `ip netns exec` would run it: for an `ip netns` name, /etc/netns/NAME/resolv.conf and \
            the namespace's /sys are seen in place of the machine's.

            \(ExitStatusTable.help(for: "check"))
            """
    )

    @OptionGroup var probing: ProbeOptions

    @Flag(
        help:
            "Print one JSON object: the path (as status --json prints it) with a \"connectivity\" key, the level overall and per family with every probe's evidence; schema: Docs/netreach-json.schema.json."
    )
    var json = false

    // An array only so that a repeated --namespace can be refused.
    @Option(
        name: .customLong("namespace"),
        help: ArgumentHelp(
            "Probe from inside another network namespace: an `ip netns` name or a namespace file such as /proc/PID/ns/net (needs root).",
            valueName: "name|path"))
    var namespaces: [String] = []

    func validate() throws {
        _ = try probing.configuration()
        guard namespaces.count <= 1 else { throw ValidationError("--namespace was given more than once.") }
        if namespaces.first?.isEmpty == true {
            throw ValidationError("--namespace needs an `ip netns` name or a path such as /proc/PID/ns/net.")
        }
    }

    func run(_ capabilities: Capabilities) async throws {
        if let namespace = namespaces.first { try capabilities.enterNamespace(namespace) }
        var configuration = try probing.configuration()
        // networkd's link state files are the machine's: their interface indexes are not the namespace's.
        if !namespaces.isEmpty { configuration.usesCaptivePortalAPI = false }
        // Asked for by a person now: the path's cost does not hold the probes back.
        configuration.allowsExpensiveProbes = true
        configuration.allowsConstrainedProbes = true
        let paths = PathMonitor()
        paths.start(queue: DispatchQueue(label: "netreach.check.paths"))
        defer { paths.cancel() }
        let monitor = ConnectivityMonitor(
            configuration: configuration, pathMonitor: paths,
            prober: capabilities.makeProber(probing.transportSettings()))
        monitor.start(queue: DispatchQueue(label: "netreach.check"))
        defer { monitor.cancel() }

        // A round ends within the probe timeout (DNS included); should anything still hang, the
        // command ends anyway with what it has, never waiting for ever.
        let updates = monitor.updates
        let limit = configuration.probeTimeout * 2 + .seconds(5)
        let watchdog = Task {
            try await Task.sleep(for: limit)
            monitor.cancel() // ends `updates`
        }
        defer { watchdog.cancel() }
        for await connectivity in updates where ProbeOptions.isFinal(connectivity, configuration) {
            break
        }
        // The levels settle with the round; the evidence of that round is in `current`.
        let verdict = monitor.current
        do throws(StandardStream.WriteError) {
            try StandardStream.output.writeLine(
                json ? ConnectivityJSON.line(verdict, at: Date()) : ConnectivityReport.text(verdict))
        } catch {
            throw CLIExitCode.outputFailed(error)
        }
        throw Self.exitCode(for: verdict.level)
    }

    static func exitCode(for level: ConnectivityLevel) -> ExitCode {
        switch level {
        case .full: .success
        case .unknown: CLIExitCode.noVerdict
        case .portal: CLIExitCode.portal
        case .limited: CLIExitCode.limited
        case .local: CLIExitCode.local
        case .none: CLIExitCode.notConnected
        }
    }
}
