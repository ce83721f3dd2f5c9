import ArgumentParser
import NetReach
import NetReachConnectivity
import NetReachServe
import Synchronization

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `netreach serve`: the paths of chosen destinations in chosen namespaces, for Prometheus
/// (`/metrics`), for programs (`/api/v1/path`, `/api/v1/events`) and for health checkers
/// (`/livez`, `/readyz`, `/health`), until SIGTERM or SIGINT.
package struct ServeCommand: NetreachSubcommand {
    package static let configuration = CommandConfiguration(
        commandName: "serve",
        _superCommandName: NetreachCommand.commandName,
        abstract: "Serve the network path over HTTP: Prometheus metrics, events and health endpoints.",
        usage: """
            netreach serve [--listen <host:port>] [--to <name=host> ...] [--port <port>] [--protocol tcp|udp]
                [--namespace <name|pid|path> ...]
                [--all-namespaces] [--ready-when started|satisfied|to=<name>] [--config <file>]
                [--enable-lifecycle] [--max-connections <n>] [--idle-timeout <duration>]
                [--header-timeout <duration>]
              netreach serve --internet --probe <url[=expect]> ... [--quorum <n>] [--family 4|6]
                [--probe-timeout <duration>] [--probe-interval <duration>]
                [--max-probe-backoff <duration>] [--proxy <url>] [--ready-when internet] ...
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
            netreach_probe_results_total. While the internet does not answer, it probes again \
            after 1 s, doubling to 30 s (--max-probe-backoff, or max_probe_backoff in the \
            --config file), and at once on every path change. The probes leave from this namespace, so --internet \
            cannot be combined with --namespace: run serve inside the namespace instead \
            (`ip netns exec NAME netreach serve --internet ...`).

            Labels: namespace is the --namespace argument as given (empty for this namespace), \
            destination the --to NAME (empty for the internet).

            Traffic: the path to a destination is the path of one kind of packet, TCP to port \
            443 unless --port and --protocol (or a destination's port and protocol keys in the \
            --config file) name another, as `status --to HOST --port 53 --protocol udp` does; \
            policy rules can send them apart (`ip rule ... ipproto udp dport 53`). The path to the \
            internet is always a web client's, TCP to 443: /health, --ready-when and the probes \
            read it. netreach_path_traffic_info{protocol,port} (one series per path) and the \
            port and protocol keys of each path event say which packet a path is of.

            --all-namespaces also watches every namespace `ip netns` names (/run/netns), as they \
            come and go; a namespace that goes is withdrawn (its series unregistered, a \
            `namespace` event with "watched":false), while a --namespace that goes stays, with \
            netreach_namespace_available 0.

            --config FILE reads listen, to, namespaces, all_namespaces and ready_when from a YAML \
            or JSON file (a destination under to: is a host, or {host, port, protocol}); flags \
            are added to it (--listen, --ready-when, --port and --protocol replace its values). \
            SIGHUP reads it again and watches what it says from then on; so does POST /-/reload \
            with --enable-lifecycle (otherwise 403: nothing else changes state). A file that \
            cannot be read or is not valid keeps the running configuration \
            (netreach_config_last_reload_successful 0); listen changes need a restart.

            --web.config.file FILE turns on TLS and basic authentication as the Prometheus \
            exporters' web configuration file says (tls_server_config: cert_file, key_file, \
            client_auth_type, client_ca_file, min_version, max_version; basic_auth_users: bcrypt \
            hashes, as htpasswd -B writes them; http_server_config.headers). Every endpoint asks \
            for the password except /livez and /readyz without a query, which the kubelet and \
            systemd call. SIGHUP reads it again with --config, and so does a change to it or to a \
            file it names (a renewed certificate): new certificates and users apply to new \
            connections and requests; turning TLS on or off needs a restart.

            It listens on 127.0.0.1:9817 unless --listen names another address; it says where on \
            standard error once it listens. An IPv6 address goes in brackets ([fd00::7]:9817: \
            without them fd00::7:9817 could be fd00::7 port 9817 or fd00::7:9817 with none, so it \
            is refused); brackets may enclose an IPv4 address too, so a template that fills in an \
            address of either family, such as a DaemonSet's [$(NODE_IP)]:9817, always brackets it.

            Connections: serve raises its open-files limit to the hard limit at start and holds \
            at most --max-connections (default 1000, fewer when the limit leaves less room). A \
            connection beyond that takes the place of the one idle longest (between requests, or \
            still sending its first header); when every connection is in a request or an event \
            stream, it is answered 503 and closed. A connection with no request under way is \
            closed after --idle-timeout (75s), and a request's header must be complete \
            --header-timeout (10s) after its first byte. An event-stream client is dropped as \
            soon as it closes its connection. SIGTERM or SIGINT stops it: event streams end with \
            `event: shutdown`, requests under way finish, and it exits 0.

            \(ExitStatusTable.help(for: "serve"))
            """
    )

    @Option(
        help: ArgumentHelp(
            "The address to listen on: HOST:PORT or [ADDRESS]:PORT, brackets needed around IPv6 and allowed around IPv4 (so [$(NODE_IP)]:9817 serves either family); port 0 picks a free one. Only loopback unless given. (default: 127.0.0.1:9817)",
            valueName: "host:port"))
    var listen: String?

    @Option(
        name: .customLong("to"),
        help: ArgumentHelp(
            "Also watch the path to this destination, exported as destination=NAME: an IP address or a host name. Repeatable.",
            valueName: "name=host"))
    var destinations: [String] = []

    // Arrays only so that a repeated --port or --protocol can be refused (SingleValuedOption).
    @Option(
        name: .customLong("port"),
        help: ArgumentHelp(
            "The destination port of the traffic whose path to each destination is watched, the --config file's included (replacing its port keys). Policy rules can send traffic apart by port (`ip rule ... dport 443`). The path to the internet is always a web client's, TCP to 443. (default: 443)",
            valueName: "port"))
    var ports: [UInt16] = []

    @Option(
        name: .customLong("protocol"),
        help: ArgumentHelp(
            "The transport protocol of that traffic, the --config file's destinations included (replacing their protocol keys): --protocol udp --port 53 watches what a DNS query to each destination gets. (default: tcp)",
            valueName: "tcp|udp"))
    var protocols: [TransportProtocol] = []

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

    @Flag(
        name: .customLong("all-namespaces"),
        help: "Also watch every namespace `ip netns` names, as they come and go (needs root).")
    var allNamespaces = false

    @Option(
        help: ArgumentHelp(
            "Read listen, to (NAME: HOST, or NAME: {host, port, protocol}), namespaces, all_namespaces and ready_when from this YAML or JSON file; again on SIGHUP.",
            valueName: "file"))
    var config: String?

    @Option(
        name: .customLong("web.config.file"),
        help: ArgumentHelp(
            "TLS and basic authentication from this web configuration file, the one Prometheus exporters read; again on SIGHUP.",
            valueName: "file"))
    var webConfigFile: String?

    @Flag(
        name: .customLong("enable-lifecycle"),
        help: "Let POST /-/reload reload the configuration, as SIGHUP does.")
    var enableLifecycle = false

    @Option(
        name: .customLong("max-connections"),
        help: ArgumentHelp(
            "Connections held at once; beyond it a new one replaces the one idle longest, or gets 503 when all are busy. Read at start. (default: 1000, fewer if the open-files limit is lower)",
            valueName: "n"))
    var maxConnections: Int?

    @Option(
        name: .customLong("idle-timeout"), parsing: .unconditional,
        help: ArgumentHelp(
            "Close a connection with no request under way after this long: 75s, 500ms, or seconds. Read at start. (default: 75s)",
            valueName: "duration"),
        transform: { try WaitDuration(parsing: $0) })
    var idleTimeout: WaitDuration?

    @Option(
        name: .customLong("header-timeout"), parsing: .unconditional,
        help: ArgumentHelp(
            "Close a connection whose request header is not complete this long after its first byte. Read at start. (default: 10s)",
            valueName: "duration"),
        transform: { try WaitDuration(parsing: $0) })
    var headerTimeout: WaitDuration?

    /// The event stream's keep-alive comment interval; for tests that show a client's departure
    /// is noticed without it.
    @Option(
        name: .customLong("event-keep-alive"), parsing: .unconditional, help: .hidden,
        transform: { try WaitDuration(parsing: $0) })
    var eventKeepAlive: WaitDuration?

    @OptionGroup var internetOptions: InternetOptions

    package init() {}

    package func validate() throws {
        if let listen {
            _ = try ConditionArguments.address(listen, option: "--listen", allowsName: false, allowsZeroPort: true)
        }
        if config?.isEmpty == true { throw ValidationError("--config needs a file.") }
        if webConfigFile?.isEmpty == true { throw ValidationError("--web.config.file needs a file.") }
        if let maxConnections, maxConnections < 1 { throw ValidationError("--max-connections must be at least 1.") }
        if try SingleValuedOption.value(of: "--port", in: ports) == 0 {
            throw ValidationError("--port needs a port from 1 to 65535.")
        }
        _ = try SingleValuedOption.value(of: "--protocol", in: protocols)
        // Said rather than ignored: in status and watch they change the path to the internet.
        if !(ports.isEmpty && protocols.isEmpty), destinations.isEmpty, config == nil {
            throw ValidationError(
                "--port and --protocol name the traffic of the --to destinations (and the --config file's); give a --to NAME=HOST. The path to the internet is always a web client's, TCP to 443."
            )
        }
        for (option, value) in [("--idle-timeout", idleTimeout), ("--header-timeout", headerTimeout)] {
            if let value, value.duration <= .zero { throw ValidationError("\(option) must be longer than 0.") }
        }
        // With --config, what the flags say together with the file is checked once it is read.
        do {
            _ = try flags.targets(file: config == nil ? ServeConfigFile() : nil)
        } catch {
            throw ValidationError(error.message)
        }
    }

    /// The flags as plain values, for serve to combine with the `--config` file, at start and on
    /// each reload.
    var flags: ServeFlags {
        var flags = ServeFlags()
        flags.listen = listen
        flags.destinations = destinations
        flags.namespaces = namespaces
        flags.allNamespaces = allNamespaces
        flags.readyWhen = readyWhen
        flags.judgesInternet = internetOptions.internet
        flags.port = ports.last
        flags.transportProtocol = protocols.last
        flags.maxConnections = maxConnections
        flags.idleTimeout = idleTimeout?.duration
        flags.headerTimeout = headerTimeout?.duration
        flags.eventKeepAlive = eventKeepAlive?.duration
        return flags
    }

    package func run(_ capabilities: Capabilities) async throws {
        let flags = self.flags
        var file = ServeConfigFile()
        var configuration: ServeConfiguration
        do {
            if let config { file = try ServeConfigFile.read(config) }
            configuration = try flags.configuration(file: file, path: config, version: NetreachCommand.version)
        } catch {
            StandardStream.complain("serve: \(error)")
            throw CLIExitCode.configInvalid
        }
        if let webConfigFile {
            do {
                configuration.web = try WebSecurity(
                    path: webConfigFile, log: { StandardStream.complain("serve: \($0)") })
            } catch {
                StandardStream.complain("serve: --web.config.file \(error)")
                throw CLIExitCode.configInvalid
            }
            StandardStream.complain("serve: \(webConfigFile): \(WebSecurity.summary(configuration.web!.configuration))")
        }
        // Before any monitor is made: the library's series join serve's in /metrics.
        ServeMetricsBootstrap.bootstrap(configuration.registry)
        configuration.environment = ProcessInfo.processInfo.environment
        configuration.enablesLifecycle = enableLifecycle
        configuration.onWarning = { StandardStream.complain("serve: \($0)") }
        configuration.onInfo = { StandardStream.complain("serve: \($0)") }
        configuration.reload = flags.reloading(path: config, startListen: file.listen) {
            StandardStream.complain("serve: \($0)")
        }
        if internetOptions.internet {
            configuration.connectivity = ConnectivitySetup(
                configuration: try internetConfiguration(file: file),
                prober: capabilities.makeProber(internetOptions.probing.transportSettings()))
        }
        let listening = Atomic(false)
        let scheme = configuration.web?.usesTLS == true ? "https" : "http"
        do {
            try await ServeServer.run(configuration) { host, port in
                listening.store(true, ordering: .releasing)
                let shown = host.contains(":") ? "[\(host)]" : host
                StandardStream.complain("serve: listening on \(scheme)://\(shown):\(port)")
            }
        } catch {
            guard !listening.load(ordering: .acquiring) else { throw error }
            StandardStream.complain(
                "cannot listen on \(configuration.host):\(configuration.port): \(error)")
            throw CLIExitCode.cannotListen
        }
    }

    /// The probes' configuration: the flags, with `--max-probe-backoff` else the file's
    /// `max_probe_backoff` (read at start only) else 30 s.
    func internetConfiguration(file: ServeConfigFile) throws -> ConnectivityMonitor.Configuration {
        let fallback: Duration?
        do {
            fallback = try ServeFlags.maximumProbeBackOff(file: file, path: config)
        } catch {
            StandardStream.complain("serve: \(error)")
            throw CLIExitCode.configInvalid
        }
        return try internetOptions.configuration(
            fallbackMaximumBackOff: fallback ?? InternetOptions.defaultMaximumBackOff)
    }
}
