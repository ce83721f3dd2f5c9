import CoreMetrics
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NetReach
import NetReachConnectivity
import NetReachSystem
import Prometheus
import ServiceLifecycle

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What `netreach serve` runs with.
package struct ServeConfiguration: Sendable {
    /// The address to listen on: loopback unless the operator says otherwise.
    package var host = "127.0.0.1"
    /// 0 lets the kernel choose (the bound port is reported to `onListening`).
    package var port = 9_817
    /// What is watched at start.
    package var targets = ServeTargets()
    /// Reads what to watch afresh, on SIGHUP (and `POST /-/reload`); `nil`: no reloads, and
    /// SIGHUP keeps its default action.
    package var reload: (@Sendable () throws -> ServeTargets)?
    /// Whether `POST /-/reload` may reload (Prometheus's `--web.enable-lifecycle`).
    package var enablesLifecycle = false
    /// The registry `/metrics` writes after serve's own families. The command bootstraps
    /// swift-metrics on it, so the library's own series (netlink, probes;
    /// ``ServeMetricsBootstrap``) appear beside serve's.
    package var registry = PrometheusCollectorRegistry()
    /// Where `ip netns` namespaces are followed from (`--all-namespaces`).
    package var namespaceDirectory = "/run/netns"
    /// Told why something will not work as asked (a namespace directory that cannot be followed).
    package var onWarning: @Sendable (String) -> Void = { _ in }
    /// Told, once at start, what the server set up for itself (its file limit, its connection cap).
    package var onInfo: @Sendable (String) -> Void = { _ in }
    /// Connections held at once (`--max-connections`); `nil`: 1,000, or fewer when the file limit
    /// (raised to its hard limit at start) leaves less room (``ConnectionGate/defaultCapacity(fileLimit:)``).
    package var maxConnections: Int?
    /// A connection with no request under way is closed after this long (`--idle-timeout`):
    /// longer than Prometheus's default one-minute scrape interval, so its connection is kept.
    package var idleTimeout = Duration.seconds(75)
    /// A request's header must be complete this long after its first byte (`--header-timeout`).
    package var headerTimeout = Duration.seconds(10)
    /// netreach's version: `netreach_build_info`.
    package var version: String
    /// A comment on every event stream this often, so proxies keep it open.
    package var keepAliveInterval = Duration.seconds(15)
    /// Events kept for clients that resume with `Last-Event-ID`.
    package var replayCapacity = 1_024
    /// Events one client may have waiting before it is dropped.
    package var clientBuffer = 256
    /// The process's environment: systemd's `NOTIFY_SOCKET` and `WATCHDOG_USEC` are read from it.
    package var environment: [String: String] = [:]
    /// Whether, and how, the internet is judged in the server's own namespace (`--internet --probe`).
    package var connectivity: ConnectivitySetup?
    /// TLS, basic authentication and response headers (`--web.config.file`), read again with
    /// every reload; `nil`: plain HTTP, every request answered.
    package var web: WebSecurity?

    package init(version: String = PackageVersion.current) {
        self.version = version
    }
}

/// How `serve` judges whether the internet answers: the probes and their settings, and the
/// prober that sends them.
package struct ConnectivitySetup: Sendable {
    package var configuration: ConnectivityMonitor.Configuration
    package var prober: any ConnectivityProber

    package init(configuration: ConnectivityMonitor.Configuration, prober: any ConnectivityProber) {
        self.configuration = configuration
        self.prober = prober
    }
}

/// `netreach serve`: the watch, the event hub and the HTTP server in one swift-service-lifecycle
/// `ServiceGroup`. SIGTERM or SIGINT drains it: event streams end with `event: shutdown`, the
/// monitors stop, and the server finishes the requests under way.
///
/// ```swift
/// try await ServeServer.run(configuration) { host, port in print("listening on \(host):\(port)") }
/// ```
package enum ServeServer {
    /// Runs until SIGTERM or SIGINT; `onListening` is told the address once the socket is bound.
    package static func run(
        _ configuration: ServeConfiguration,
        onListening: @escaping @Sendable (String, Int) -> Void
    ) async throws {
        var logger = Logger(label: "netreach.serve")
        logger.logLevel = .warning
        // Each connection takes a descriptor; systemd's soft limit (1,024) is for select(2)
        // programs, and the hard limit (524,288, or the unit's LimitNOFILE=) is ours to take.
        let fileLimit = FileLimit.raiseToHard()
        let gate = ConnectionGate(
            capacity: configuration.maxConnections ?? ConnectionGate.defaultCapacity(fileLimit: fileLimit?.after),
            idleTimeout: configuration.idleTimeout, headerTimeout: configuration.headerTimeout)
        let raised = fileLimit.map { $0.after > $0.before ? "raised from \($0.before) to \($0.after)" : "\($0.after)" }
        configuration.onInfo("open files limit \(raised ?? "unknown"); at most \(gate.capacity) connections")
        let hub = EventHub(replayCapacity: configuration.replayCapacity, clientBuffer: configuration.clientBuffer)
        let targets = configuration.targets
        let state = ServeState(
            keys: NetworkWatch.keys(of: targets), version: configuration.version, hub: hub,
            registry: configuration.registry, readyWhen: targets.readyWhen,
            judgesConnectivity: configuration.connectivity != nil,
            judgedFamilies: configuration.connectivity?.configuration.families ?? [])
        state.recordReload(succeeded: true, at: Date())
        let targetProbe = TargetProbe(
            namespaces: Dictionary(targets.namespaces.map { ($0.label, $0.namespace) }, uniquingKeysWith: { a, _ in a })
        )
        let watch = NetworkWatch(
            targets: targets, connectivity: configuration.connectivity, state: state,
            namespaceDirectory: configuration.namespaceDirectory,
            namespacesChanged: { targetProbe.allow($0) }, onWarning: configuration.onWarning)
        let reloader = Self.reloading(configuration, startTargets: targets).map {
            ServeReloader(load: $0, watch: watch, state: state)
        }
        var reload: (@Sendable () async -> Result<Void, ServeReloader.Failure>)?
        if configuration.enablesLifecycle, let reloader { reload = { await reloader.reload() } }
        let listening = ListeningSignal()
        let routes = ServeRoutes(state: state, targetProbe: targetProbe, reload: reload)
        let application = Application(
            router: routes.router(web: configuration.web),
            server: .init { [web = configuration.web] responder in
                let http = HTTP1Channel(
                    responder: responder,
                    configuration: .init(additionalChannelHandlers: [HeaderLimit(), ConnectionGuard(gate: gate)]))
                guard let web else { return http }
                return WebChannel(base: http, security: web)
            },
            // The kernel's own cap (net.core.somaxconn, 4096 since Linux 5.4) rather than
            // Hummingbird's 256: clients evicted under a flood reconnect at once, and a full
            // queue drops a scraper's SYN for a second.
            configuration: .init(
                address: .hostname(configuration.host, port: configuration.port), serverName: nil,
                backlog: 4096),
            onServerRunning: { channel in
                listening.markListening()
                onListening(configuration.host, channel.localAddress?.port ?? configuration.port)
            },
            logger: logger)
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [
            .init(service: application),
            .init(service: watch),
            .init(service: EventKeepAlive(hub: hub, interval: configuration.keepAliveInterval)),
        ]
        if let reloader { services.append(.init(service: reloader)) }
        if let notification = SystemdNotification.fromEnvironment(
            configuration.environment, state: state, listening: listening,
            probeWatch: { await watch.roundTrip() })
        {
            services.append(.init(service: notification))
        }
        // Shut down in reverse: systemd hears STOPPING=1, the streams end, then the monitors stop,
        // then the server drains.
        let group = ServiceGroup(
            configuration: .init(
                services: services,
                gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        try await group.run()
    }
}

extension ServeServer {
    /// What a reload reads: the web configuration file, then what to watch; either failing
    /// applies neither. `nil` when there is nothing to read again.
    private static func reloading(
        _ configuration: ServeConfiguration, startTargets: ServeTargets
    ) -> (@Sendable () throws -> ServeTargets)? {
        guard let web = configuration.web else { return configuration.reload }
        let loadTargets = configuration.reload
        let onInfo = configuration.onInfo
        let onWarning = configuration.onWarning
        return {
            let prepared: WebSecurity.Settings
            do {
                prepared = try web.prepareReload()
            } catch {
                onWarning("not reloaded, the running configuration is kept: \(error)")
                throw error
            }
            let targets = try loadTargets?() ?? startTargets
            web.apply(prepared)
            onInfo("reloaded \(web.path): \(WebSecurity.summary(prepared.configuration))")
            return targets
        }
    }
}

/// Sends the keep-alive comments, and ends every stream with `event: shutdown` when the group
/// shuts down.
struct EventKeepAlive: Service {
    let hub: EventHub
    let interval: Duration

    func run() async throws {
        try? await cancelWhenGracefulShutdown {
            while true {
                try await Task.sleep(for: interval)
                hub.sendKeepAlive()
            }
        }
        hub.shutDown()
    }
}

/// Sends every swift-metrics series of the process to `registry`: the library's (path updates,
/// netlink messages and resyncs, probe rounds; `PathMonitor`, `SystemPathSource` and
/// `ConnectivityMonitor` made afterwards), each family with its help from ``MetricFamilies``
/// (``ServeMetricsFactory``), written after serve's own. Once per process, before any monitor is
/// made: swift-metrics allows one bootstrap.
///
/// ```swift
/// var configuration = ServeConfiguration(version: "1.0")
/// ServeMetricsBootstrap.bootstrap(configuration.registry)
/// ```
package enum ServeMetricsBootstrap {
    package static func bootstrap(_ registry: PrometheusCollectorRegistry) {
        MetricsSystem.bootstrap(ServeMetricsFactory(registry: registry))
    }
}
