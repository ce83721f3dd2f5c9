import ArgumentParser
import Foundation
import NetReach
import NetReachConditioner
import NetReachServe
import Synchronization

/// `netreach serve`: the paths of chosen destinations in chosen namespaces, for Prometheus
/// (`/metrics`), for programs (`/api/v1/path`, `/api/v1/events`) and for health checkers
/// (`/livez`, `/readyz`, `/health`), until SIGTERM or SIGINT.
package struct ServeCommand: NetreachSubcommand {
    package static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve the network path over HTTP: Prometheus metrics, events and health endpoints.",
        usage: """
            netreach serve [--listen <host:port>] [--to <name=host> ...] [--namespace <name|pid|path> ...]
                [--ready-when started|satisfied|to=<name>]
              netreach serve --internet --probe <url[=expect]> ... [--quorum <n>] [--family 4|6]
                [--probe-timeout <duration>] [--probe-interval <duration>] [--ready-when internet] ...
            """,
        discussion: """
            Watches the path to the internet, and to each --to destination, in this network \
            namespace or in each --namespace, and answers over HTTP (read-only; nothing is sent \
            to any destination):
              GET /                 a status page for people (the paths, recent changes, an
                                    offline overlay), live over the event stream
              GET /metrics          Prometheus text format: netreach_path_satisfied,
                                    netreach_path_unsatisfied_reason, netreach_path_route_info,
                                    netreach_interface_up, netreach_namespace_available, ...
              GET /probe?target=HOST  one destination's path as metrics, probe_success
                                    (blackbox_exporter's multi-target pattern; &namespace=NS)
              GET /api/v1/path      the path as `status --json` prints it (?to=NAME&namespace=NS)
              GET /api/v1/connectivity  with --internet: the verdict as `check --json` prints it
              GET /api/v1/events    Server-Sent Events: the current paths, then one event per
                                    change; Last-Event-ID resumes; a comment every 15 s
              GET /livez            200 while the server runs
              GET /readyz           200 once every path was read (and --ready-when holds);
                                    ?verbose lists the checks
              GET /health           Consul's check: 200 when the path to the internet is
                                    satisfied in every namespace, 503 when not; with
                                    --internet, 200 full, 429 portal, limited or local,
                                    503 none or not judged yet

            With --internet, serve also judges whether the internet answers, with the probes you \
            name, as `watch --internet` does (the same flags; see `netreach check --help`), and \
            exports netreach_connectivity_level, netreach_probe_duration_seconds and \
            netreach_probe_results_total. The probes leave from this namespace, so --internet \
            cannot be combined with --namespace: run serve inside the namespace instead \
            (`ip netns exec NAME netreach serve --internet ...`).

            Labels: namespace is the --namespace argument as given (empty for this namespace), \
            destination the --to NAME (empty for the internet).

            It listens on 127.0.0.1:9817 unless --listen names another address; it says where on \
            standard error once it listens. SIGTERM or SIGINT stops it: event streams end with \
            `event: shutdown`, requests under way finish, and it exits 0.

            \(ExitStatusTable.help(for: "serve"))
            """
    )

    @Option(
        help: ArgumentHelp(
            "The address to listen on: HOST:PORT, [IPV6]:PORT; port 0 picks a free one. Only loopback unless given. (default: 127.0.0.1:9817)",
            valueName: "host:port"))
    var listen: String?

    @Option(
        name: .customLong("to"),
        help: ArgumentHelp(
            "Also watch the path to this destination, exported as destination=NAME: an IP address or a host name. Repeatable.",
            valueName: "name=host"))
    var destinations: [String] = []

    @Option(
        name: .customLong("namespace"),
        help: ArgumentHelp(
            "Watch this network namespace instead of this process's: an `ip netns` name, a process id or a namespace file (needs root). Repeatable.",
            valueName: "name|pid|path"))
    var namespaces: [String] = []

    @Option(
        name: .customLong("ready-when"),
        help: ArgumentHelp(
            "When /readyz says ready: started (every path read), satisfied (and the internet path satisfied in every namespace), to=NAME (and that destination's), internet (and connectivity full; needs --internet). (default: started)",
            valueName: "condition"))
    var readyWhen: String?

    @OptionGroup var internetOptions: InternetOptions

    package init() {}

    package func validate() throws {
        if let listen {
            _ = try ConditionArguments.address(listen, option: "--listen", allowsName: false, allowsZeroPort: true)
        }
        let named = try namedDestinations()
        if Set(namespaces).count != namespaces.count {
            throw ValidationError("--namespace names the same namespace twice.")
        }
        if namespaces.contains(where: \.isEmpty) {
            throw ValidationError(
                "--namespace needs an `ip netns` name, a process id or a path such as /proc/PID/ns/net.")
        }
        if let readyWhen {
            guard let condition = Health.ReadyCondition(argument: readyWhen) else {
                throw ValidationError("--ready-when must be started, satisfied or to=NAME.")
            }
            if case .destination(let name) = condition, !named.contains(where: { $0.name == name }) {
                throw ValidationError("--ready-when to=\(name): no --to \(name)=HOST is given.")
            }
            if condition == .internet, !internetOptions.internet {
                throw ValidationError("--ready-when internet needs --internet and a --probe.")
            }
        }
        if internetOptions.internet, !namespaces.isEmpty {
            throw ValidationError(
                "--internet sends probes from this namespace; to judge another, run serve inside it: ip netns exec NAME netreach serve --internet ..."
            )
        }
    }

    /// `--to NAME=HOST` pairs: names are label values, so letters, digits, '.', '_' and '-', each once.
    private func namedDestinations() throws(ValidationError) -> [NetworkWatch.NamedDestination] {
        var result: [NetworkWatch.NamedDestination] = []
        for text in destinations {
            let parts = text.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, !parts[1].isEmpty else {
                throw ValidationError("--to \(text): expected NAME=HOST, such as db=10.0.0.5.")
            }
            let name = String(parts[0])
            guard ControlRoutes.isName(name) else {
                throw ValidationError("--to \(text): a name is letters, digits, '.', '_' and '-'.")
            }
            guard !result.contains(where: { $0.name == name }) else {
                throw ValidationError("--to \(text): the name \(name) is given twice.")
            }
            result.append(.init(name: name, destination: PathDestination(String(parts[1]))))
        }
        return result
    }

    package func run(_ capabilities: Capabilities) async throws {
        let address = try listen.map {
            try ConditionArguments.address($0, option: "--listen", allowsName: false, allowsZeroPort: true)
        }
        var configuration = ServeConfiguration(
            version: NetreachCommand.version, renderPath: { PathFormatting.json($0, at: Date()) })
        configuration.host = address?.host ?? "127.0.0.1"
        configuration.port = address?.port ?? 9_817
        configuration.destinations = try namedDestinations()
        configuration.environment = ProcessInfo.processInfo.environment
        if !namespaces.isEmpty {
            configuration.namespaces = namespaces.map(NetworkWatch.WatchedNamespace.init(argument:))
        }
        configuration.readyWhen = readyWhen.flatMap(Health.ReadyCondition.init(argument:)) ?? .started
        if internetOptions.internet {
            configuration.connectivity = ConnectivitySetup(
                configuration: try internetOptions.configuration(), prober: capabilities.makeProber(),
                renderVerdict: { PathFormatting.json($0, at: Date()) })
        }
        let listening = Atomic(false)
        do {
            try await ServeServer.run(configuration) { host, port in
                listening.store(true, ordering: .releasing)
                let shown = host.contains(":") ? "[\(host)]" : host
                StandardStream.complain("serve: listening on http://\(shown):\(port)")
            }
        } catch {
            guard !listening.load(ordering: .acquiring) else { throw error }
            StandardStream.complain(
                "cannot listen on \(configuration.host):\(configuration.port): \(error)")
            throw CLIExitCode.cannotListen
        }
    }
}
