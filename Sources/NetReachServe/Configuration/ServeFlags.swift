import NetReach
import NetReachSystem

/// What `serve`'s command line says, as plain values (the command's parser has read and checked
/// each flag on its own), and how it combines with a `--config` file: at start
/// (``configuration(file:path:version:)``) and on every reload (``reloading(path:startListen:log:)``).
///
/// Flags are added to the file: a name in both is refused rather than silently won by one;
/// `--listen`, `--ready-when`, `--port`, `--protocol` and the connection settings replace the
/// file's keys.
///
/// ```swift
/// var flags = ServeFlags()
/// flags.destinations = ["db=10.0.0.5"]
/// let file = try ServeConfigFile.read("/etc/netreach/serve.yaml")
/// let configuration = try flags.configuration(file: file, path: "/etc/netreach/serve.yaml", version: "1.0")
/// ```
package struct ServeFlags: Sendable, Hashable {
    /// `--listen`: `HOST:PORT` or `[ADDRESS]:PORT`.
    package var listen: String?
    /// `--to NAME=HOST`, each.
    package var destinations: [String] = []
    /// `--namespace`, each.
    package var namespaces: [String] = []
    package var allNamespaces = false
    /// `--ready-when`.
    package var readyWhen: String?
    /// `--internet`: probes are sent from this namespace.
    package var judgesInternet = false
    /// `--port` and `--protocol`: the traffic of every destination, the file's included (they
    /// replace its `port:` and `protocol:`, as `--ready-when` replaces `ready_when`).
    package var port: UInt16?
    package var transportProtocol: TransportProtocol?
    package var maxConnections: Int?
    package var idleTimeout: Duration?
    package var headerTimeout: Duration?
    /// The event stream's keep-alive interval (a hidden flag, for tests).
    package var eventKeepAlive: Duration?

    package init() {}

    /// The targets of the flags and `file` (`path` names it in errors); `nil` skips the checks
    /// that need the file (it is read later).
    package func targets(file: ServeConfigFile?, path: String? = nil) throws(ServeSettingsError) -> ServeTargets {
        let inFile = path.map { " (with \($0))" } ?? ""
        var targets = ServeTargets()
        var named: [NamedDestination] = []
        let fromFile = (file?.to ?? [:]).sorted { $0.key < $1.key }.map { name, entry in
            (text: "\(name)=\(entry.host)", option: "to: \(name)=\(entry.host)", entry: Optional(entry))
        }
        let fromFlags = destinations.map {
            (text: $0, option: "--to \($0)", entry: nil as ServeConfigFile.Destination?)
        }
        for (text, option, entry) in fromFile + fromFlags {
            let parts = text.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, !parts[1].isEmpty else {
                throw ServeSettingsError("\(option): expected NAME=HOST, such as db=10.0.0.5.")
            }
            let name = String(parts[0])
            guard NamedDestination.isValidName(name) else {
                throw ServeSettingsError("\(option): a name is letters, digits, '.', '_' and '-'.")
            }
            guard !named.contains(where: { $0.name == name }) else {
                throw ServeSettingsError("\(option): the name \(name) is given twice\(inFile).")
            }
            named.append(
                .init(
                    name: name, destination: PathDestination(String(parts[1])),
                    traffic: try traffic(of: entry, option: option)))
        }
        targets.destinations = named
        let namespaces = (file?.namespaces ?? []) + self.namespaces
        if namespaces.contains(where: \.isEmpty) {
            throw ServeSettingsError(
                "--namespace needs an `ip netns` name, a process id or a path such as /proc/PID/ns/net.")
        }
        if let twice = namespaces.first(where: { name in namespaces.filter { $0 == name }.count > 1 }) {
            throw ServeSettingsError("the namespace \(twice) is named twice\(inFile).")
        }
        if !namespaces.isEmpty { targets.namespaces = namespaces.map(NetworkNamespaceLabel.init(argument:)) }
        targets.followsNamespaceDirectory = allNamespaces || file?.allNamespaces == true
        if let text = readyWhen ?? file?.readyWhen {
            guard let condition = Health.ReadyCondition(argument: text) else {
                throw ServeSettingsError("--ready-when must be started, satisfied, internet or to=NAME, not \(text).")
            }
            if file != nil, case .destination(let name) = condition, !named.contains(where: { $0.name == name }) {
                throw ServeSettingsError("--ready-when to=\(name): no --to \(name)=HOST is given\(inFile).")
            }
            if condition == .internet, !judgesInternet {
                throw ServeSettingsError("--ready-when internet needs --internet and a --probe.")
            }
            targets.readyWhen = condition
        }
        if judgesInternet, !namespaces.isEmpty {
            throw ServeSettingsError(
                "--internet sends probes from this namespace; to judge another, run serve inside it: ip netns exec NAME netreach serve --internet ..."
            )
        }
        return targets
    }

    /// The traffic of a destination: `--port` and `--protocol`, else the file's `port:` and
    /// `protocol:` for it (`entry`, checked even when a flag replaces them), else TCP to 443.
    private func traffic(
        of entry: ServeConfigFile.Destination?, option: String
    ) throws(ServeSettingsError) -> PathTraffic {
        var traffic = PathTraffic.web
        if let given = entry?.port {
            guard let valid = UInt16(exactly: given), valid > 0 else {
                throw ServeSettingsError("\(option): port must be from 1 to 65535, not \(given).")
            }
            traffic.port = valid
        }
        if let given = entry?.transportProtocol {
            guard let valid = TransportProtocol(rawValue: given) else {
                throw ServeSettingsError("\(option): protocol must be tcp or udp, not \(given).")
            }
            traffic.transportProtocol = valid
        }
        if let port { traffic.port = port }
        if let transportProtocol { traffic.transportProtocol = transportProtocol }
        return traffic
    }

    /// What serve runs with at start: the targets, then the address (`--listen` else the file's
    /// `listen`, else 127.0.0.1:9817), then the connection cap and timeouts (each flag else the
    /// file's key); the file's start-only keys are read here and not again. `path` names the file
    /// in errors.
    package func configuration(
        file: ServeConfigFile, path: String?, version: String
    ) throws(ServeSettingsError) -> ServeConfiguration {
        var configuration = ServeConfiguration(version: version)
        configuration.targets = try targets(file: file, path: path)
        if let text = listen ?? file.listen {
            do {
                let address = try HostPort(parsing: Substring(text), allowsZeroPort: true)
                configuration.host = address.host
                configuration.port = address.port
            } catch {
                throw ServeSettingsError("listen \(text): \(error.message)", file: path)
            }
        }
        if let count = maxConnections ?? file.maxConnections {
            guard count >= 1 else { throw ServeSettingsError("max_connections must be at least 1.", file: path) }
            configuration.maxConnections = count
        }
        if let duration = try Self.duration(idleTimeout, file.idleTimeout, key: "idle_timeout", path: path) {
            configuration.idleTimeout = duration
        }
        if let duration = try Self.duration(headerTimeout, file.headerTimeout, key: "header_timeout", path: path) {
            configuration.headerTimeout = duration
        }
        if let eventKeepAlive { configuration.keepAliveInterval = eventKeepAlive }
        return configuration
    }

    /// The file's `max_probe_backoff` (read at start only), at least 1 s; `nil` when it has none.
    /// The command's `--max-probe-backoff` wins over it.
    package static func maximumProbeBackOff(
        file: ServeConfigFile, path: String?
    ) throws(ServeSettingsError) -> Duration? {
        let duration = try duration(nil, file.maxProbeBackOff, key: "max_probe_backoff", path: path)
        if let duration, duration < .seconds(1) {
            throw ServeSettingsError("max_probe_backoff must be at least 1s.", file: path)
        }
        return duration
    }

    /// The flag's duration, else the file's `key` parsed; `nil` when neither is given.
    private static func duration(
        _ flag: Duration?, _ text: String?, key: String, path: String?
    ) throws(ServeSettingsError) -> Duration? {
        var value = flag
        if value == nil, let text {
            do {
                value = try DurationText.parse(text).duration
            } catch {
                throw ServeSettingsError("\(key): \(error.message)", file: path)
            }
        }
        guard let value else { return nil }
        guard value > .zero else { throw ServeSettingsError("\(key) must be longer than 0.", file: path) }
        return value
    }

    /// What a reload reads: the file at `path` again (none: the flags alone), with the flags, as
    /// at start. `log` is told what was reloaded, that a changed `listen` needs a restart
    /// (`startListen` is the file's at start), or why nothing changed, as it throws.
    package func reloading(
        path: String?, startListen: String?, log: @escaping @Sendable (String) -> Void
    ) -> @Sendable () throws -> ServeTargets {
        { [self] in
            do {
                let reloaded = try path.map(ServeConfigFile.read) ?? ServeConfigFile()
                let targets = try targets(file: reloaded, path: path)
                if listen == nil, reloaded.listen != startListen {
                    log("listen changes need a restart; still listening where it was")
                }
                log("reloaded\(path.map { " " + $0 } ?? ""): \(Self.summary(targets))")
                return targets
            } catch {
                log("not reloaded, the running configuration is kept: \(error)")
                throw error
            }
        }
    }

    /// `2 namespaces (and those of /run/netns), 3 destinations`, for the reload message.
    package static func summary(_ targets: ServeTargets) -> String {
        let namespaces =
            targets.namespaces.count == 1 && targets.namespaces[0] == .own
            ? "this namespace" : "\(targets.namespaces.count) namespaces"
        return namespaces + (targets.followsNamespaceDirectory ? " and those of /run/netns" : "")
            + ", \(targets.destinations.count) destination\(targets.destinations.count == 1 ? "" : "s")"
            + ", ready when \(targets.readyWhen)"
    }
}

/// Why serve's flags and `--config` file cannot be used together: the reason, as a usage error
/// says it, and the file it concerns, named first when it prints.
///
/// ```swift
/// "\(ServeSettingsError("max_connections must be at least 1.", file: "serve.yaml"))"
/// // serve.yaml: max_connections must be at least 1.
/// ```
package struct ServeSettingsError: Error, Hashable, CustomStringConvertible {
    /// The reason alone.
    package var message: String
    /// The file, for a key only the file can set (`listen`, the connection settings).
    package var file: String?

    package init(_ message: String, file: String? = nil) {
        self.message = message
        self.file = file
    }

    package var description: String { file.map { "\($0): \(message)" } ?? message }
}
