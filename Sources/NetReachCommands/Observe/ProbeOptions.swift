import ArgumentParser
import NetReach
import NetReachConnectivity
import NetReachHTTP

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The probe flags `check`, `watch --internet` and `wait --internet` share: which probes, how
/// many must pass, over which family, for how long.
package struct ProbeOptions: ParsableArguments {
    @Option(
        name: .customLong("probe"),
        help: ArgumentHelp(
            "A probe: an http(s) URL, optionally =EXPECT (a status such as 204, or text the body starts with). Repeatable.",
            valueName: "url[=expect]"))
    var probeTexts: [String] = []

    @Flag(
        name: .customLong("well-known-probes"),
        help:
            "Also probe public endpoints of Google, GNOME and Mozilla (opt-in: they learn that this machine is online)."
    )
    var wellKnownProbes = false

    // Optional, so `watch --quorum 2` without --internet can be refused rather than ignored.
    @Option(
        help: ArgumentHelp(
            "How many probes of a family must pass for full (1 to the number of probes). (default: 1)", valueName: "n"))
    var quorum: Int?

    @Option(help: ArgumentHelp("Judge only this address family: 4 or 6.", valueName: "4|6"))
    var family: Int?

    @Option(
        name: .customLong("probe-timeout"), parsing: .unconditional,
        help: ArgumentHelp(
            "How long one probe may take: 10s, 1500ms, or seconds. (default: 10s)", valueName: "duration"),
        transform: { try WaitDuration(parsing: $0) })
    var probeTimeout: WaitDuration?

    @Option(
        name: .customLong("proxy"),
        help: ArgumentHelp(
            "Send the probes through this http proxy, http://[user:password@]host[:port], as `netreach get --proxy` sends; '' sends them directly. Default: http_proxy / https_proxy / all_proxy, as curl reads them.",
            valueName: "url"))
    var proxy: String?

    @Option(
        name: .customLong("noproxy"),
        help: ArgumentHelp(
            "Hosts to probe directly, comma-separated: names (their subdomains too), IP addresses, CIDR blocks, or '*'. Default: no_proxy / NO_PROXY.",
            valueName: "list"))
    var noProxy: String?

    package init() {}

    /// Whether any probe flag was given (`watch` refuses them without `--internet`).
    package var isAnyGiven: Bool {
        !probeTexts.isEmpty || wellKnownProbes || quorum != nil || family != nil || probeTimeout != nil
            || proxy != nil || noProxy != nil
    }

    /// How the probes connect: the proxy `--proxy`, `--noproxy` and the environment choose, as
    /// for `get`; everything else as the transport's defaults.
    package func transportSettings(
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> TransportSettings {
        TransportSettings(proxy: ProxyChoice.settings(proxy: proxy, noProxy: noProxy, environment: environment))
    }

    /// How long one probe may take.
    package var timeout: Duration { probeTimeout?.duration ?? .seconds(10) }

    /// The probes to send: --probe, else NETREACH_PROBE_URLS; and the well-known ones if asked.
    package func probes(
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(ValidationError) -> [ConnectivityProbe] {
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

    /// The monitor's configuration from these flags; a usage error (exit 64) when no probe is
    /// configured or a value is out of range, saying how to put it right.
    package func configuration(
        environment: [String: String] = ProcessInfo.processInfo.environment
    )
        throws(ValidationError) -> ConnectivityMonitor.Configuration
    {
        let probes = try probes(environment: environment)
        guard !probes.isEmpty else {
            throw ValidationError(
                """
                no probe is configured, and none is built in (nothing is contacted unless you say so). \
                Give one with --probe URL[=EXPECT] (for example --probe http://192.0.2.10/generate_204), \
                set NETREACH_PROBE_URLS, or opt in to public endpoints with --well-known-probes.
                """)
        }
        let quorum = self.quorum ?? 1
        guard (1...probes.count).contains(quorum) else {
            throw ValidationError("--quorum must be between 1 and the number of probes (\(probes.count)).")
        }
        if let family, family != 4 && family != 6 {
            throw ValidationError("--family must be 4 or 6.")
        }
        guard timeout > .zero, timeout <= .seconds(600) else {
            throw ValidationError("--probe-timeout must be more than 0 and at most 10m.")
        }
        try ProxyChoice.validate(proxy)
        var configuration = ConnectivityMonitor.Configuration(probes: probes)
        configuration.quorum = quorum
        configuration.families = family.map { $0 == 4 ? [.ipv4] : [.ipv6] } ?? [.ipv4, .ipv6]
        configuration.probeTimeout = timeout
        return configuration
    }

    /// Whether `connectivity` is a verdict for every family that can be judged: decided by a
    /// round or by the path alone (a family no probe can be sent over stays unknown), or no probe
    /// may be sent at all.
    package static func isFinal(
        _ connectivity: Connectivity, _ configuration: ConnectivityMonitor.Configuration
    ) -> Bool {
        if connectivity.probesSuspended != nil { return true }
        return configuration.families.allSatisfy { family in
            connectivity[family].level != .unknown
                || (connectivity.path.status == .satisfied
                    && !configuration.probes.contains { $0.canBeSent(over: family) })
        }
    }
}

/// `--internet` and the probe flags, for `watch` and `wait`.
package struct InternetOptions: ParsableArguments {
    @Flag(
        help:
            "Also judge whether the internet answers, with probes judged as `netreach check` judges them; needs a probe."
    )
    package var internet = false

    @OptionGroup package var probing: ProbeOptions

    @Option(
        name: .customLong("probe-interval"), parsing: .unconditional,
        help: ArgumentHelp(
            "While full, probe again this often (default: never, no traffic while all is well); while not, back off from 1s up to it (default: 5m). At least 1s.",
            valueName: "duration"),
        transform: { try WaitDuration(parsing: $0) })
    var probeInterval: WaitDuration?

    @Option(
        name: .customLong("max-probe-backoff"), parsing: .unconditional,
        help: ArgumentHelp(
            "While not full, the longest wait between probes: how late a recovery can be noticed. At least 1s. (default: 30s; 1s for wait)",
            valueName: "duration"),
        transform: { try WaitDuration(parsing: $0) })
    var maximumBackOff: WaitDuration?

    package init() {}

    package func validate() throws {
        if internet {
            _ = try configuration()
        } else if probing.isAnyGiven || probeInterval != nil || maximumBackOff != nil {
            throw ValidationError(
                "--probe, --well-known-probes, --quorum, --family, --probe-timeout, --proxy, --noproxy, --probe-interval and --max-probe-backoff need --internet."
            )
        }
    }

    /// The back-off cap while not full when `--max-probe-backoff` is not given: 30 s, so that
    /// `watch` and `serve` see a recovery within half a minute, not the 5 minutes of the interval.
    package static let defaultMaximumBackOff = Duration.seconds(30)

    /// The monitor's configuration: the probe flags', and `--probe-interval`. `inNamespace`: the
    /// command runs in another namespace (`--namespace`), whose links networkd's state files (the
    /// machine's, by interface index) do not describe: no captive-portal API is read from them.
    /// `fallbackMaximumBackOff` is the back-off cap when `--max-probe-backoff` is not given (serve
    /// passes its config file's `max_probe_backoff`; wait, 1 s).
    package func configuration(
        inNamespace: Bool = false, fallbackMaximumBackOff: Duration = InternetOptions.defaultMaximumBackOff
    ) throws(ValidationError) -> ConnectivityMonitor.Configuration {
        var configuration = try probing.configuration()
        if inNamespace { configuration.usesCaptivePortalAPI = false }
        let cap = maximumBackOff?.duration ?? fallbackMaximumBackOff
        guard cap >= .seconds(1) else { throw ValidationError("--max-probe-backoff must be at least 1s.") }
        configuration.maximumBackOff = cap
        if let probeInterval {
            guard probeInterval.duration >= .seconds(1) else {
                throw ValidationError("--probe-interval must be at least 1s.")
            }
            configuration.probeInterval = probeInterval.duration
            configuration.probesWhileFull = true
        }
        return configuration
    }
}
