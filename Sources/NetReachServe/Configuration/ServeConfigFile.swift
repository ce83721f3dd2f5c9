import NetReachSystem

/// `serve --config FILE`: what serve watches, in YAML (or JSON, which YAML reads too). Read at
/// start, and again on SIGHUP or `POST /-/reload`; the command-line flags are added to it each time
/// (``ServeFlags``).
///
/// ```yaml
/// listen: 127.0.0.1:9817          # read at start only
/// to:                             # --to NAME=HOST
///   db: 10.0.0.5
///   api: api.example.com
///   dns: {host: 10.0.0.53, protocol: udp, port: 53}   # --protocol, --port (tcp, 443)
/// namespaces: [blue, red]         # --namespace
/// all_namespaces: false           # --all-namespaces
/// ready_when: satisfied           # --ready-when
/// max_connections: 1000           # --max-connections, read at start only
/// idle_timeout: 75s               # --idle-timeout, read at start only
/// header_timeout: 10s             # --header-timeout, read at start only
/// max_probe_backoff: 30s          # --max-probe-backoff (with --internet), read at start only
/// ```
///
/// A key it does not know is an error, not ignored: a misspelt `namespace:` would otherwise
/// silently watch nothing of what was meant. Read with ``YAMLReader``, so a value of the wrong
/// kind is named by its key and its place: `to.dns.port: expected a whole number, found text (line
/// 4, column 37)`.
package struct ServeConfigFile: Equatable, Sendable {
    package var listen: String?
    package var to: [String: Destination] = [:]
    package var namespaces: [String] = []
    package var allNamespaces: Bool?
    package var readyWhen: String?
    package var maxConnections: Int?
    package var idleTimeout: String?
    package var headerTimeout: String?
    package var maxProbeBackOff: String?

    /// The keys, as written in the file.
    package enum Key: String, CaseIterable {
        case listen, to, namespaces
        case allNamespaces = "all_namespaces"
        case readyWhen = "ready_when"
        case maxConnections = "max_connections"
        case idleTimeout = "idle_timeout"
        case headerTimeout = "header_timeout"
        case maxProbeBackOff = "max_probe_backoff"
    }

    /// A configuration file larger than this is refused: it is a few lines.
    package static let maximumSize = 1 << 20

    package init() {}

    /// One `to:` entry: a host alone (`db: 10.0.0.5`), or a mapping that also names the traffic
    /// whose path is watched (`dns: {host: 10.0.0.53, protocol: udp, port: 53}`). The port and
    /// protocol are checked with the flags (``ServeFlags/targets(file:path:)``), as
    /// `ready_when` is.
    package struct Destination: Equatable, Sendable, ExpressibleByStringLiteral {
        package var host: String
        package var port: Int?
        package var transportProtocol: String?

        package enum Key: String, CaseIterable {
            case host, port
            case transportProtocol = "protocol"
        }

        package init(host: String, port: Int? = nil, protocol transportProtocol: String? = nil) {
            self.host = host
            self.port = port
            self.transportProtocol = transportProtocol
        }

        package init(stringLiteral host: String) { self.init(host: host) }

        fileprivate init(_ node: YAMLNode, at path: String) throws(ServeConfigError.Detail) {
            if node.scalar != nil, let host = node.text {
                self.init(host: host)
                return
            }
            guard node.mapping != nil else {
                throw .expected("a host, or a mapping of host, port and protocol", at: path, node)
            }
            let values = try ServeConfigFile.settings(node, at: path, keys: Key.self)
            guard let hostNode = values[.host] else { throw ServeConfigError.Detail("\(path).host: missing") }
            guard let host = try ServeConfigFile.text(hostNode, at: "\(path).host") else {
                throw .expected("a host", at: "\(path).host", hostNode)
            }
            self.init(
                host: host, port: try ServeConfigFile.integer(values[.port], at: "\(path).port"),
                protocol: try ServeConfigFile.text(values[.transportProtocol], at: "\(path).protocol"))
        }
    }

    /// Reads and parses the file at `path`.
    package static func read(_ path: String) throws(ServeConfigError) -> ServeConfigFile {
        let text: String
        do {
            text = try SystemCall.readConfigurationText(path, limit: maximumSize)
        } catch {
            switch error {
            case .cannotRead(let reason): throw .cannotRead(path: path, reason)
            case .notText: throw .invalid(path: path, "not UTF-8 text")
            }
        }
        return try parse(text, path: path)
    }

    /// Parses a configuration's text; `path` names it in errors.
    package static func parse(_ text: String, path: String) throws(ServeConfigError) -> ServeConfigFile {
        let root: YAMLNode?
        do {
            root = try YAMLReader.parse(text)
        } catch {
            throw .invalid(path: path, "not YAML or JSON: \(error)")
        }
        // An empty file (or one of comments only) configures nothing: the flags alone.
        guard let root, !root.isNull else { return ServeConfigFile() }
        do {
            return try ServeConfigFile(root)
        } catch {
            throw .invalid(path: path, error.description)
        }
    }

    private init(_ root: YAMLNode) throws(ServeConfigError.Detail) {
        guard root.mapping != nil else {
            throw .expected(
                "a mapping of keys (" + Key.allCases.map(\.rawValue).joined(separator: ", ") + ")", at: "the file", root
            )
        }
        let values = try Self.settings(root, at: nil, keys: Key.self)
        listen = try Self.text(values[.listen], at: "listen")
        if let node = values[.to], !node.isNull {
            guard let entries = node.mapping else {
                throw .expected(
                    "a mapping of names to hosts (name: host, or name: {host: HOST, port: PORT, protocol: tcp|udp})",
                    at: "to", node)
            }
            for entry in entries {
                to[entry.key.text] = try Destination(entry.value, at: "to.\(entry.key.text)")
            }
        }
        if let node = values[.namespaces], !node.isNull {
            guard let items = node.sequence else { throw .expected("a list", at: "namespaces", node) }
            for (offset, item) in items.enumerated() {
                guard item.scalar != nil, let name = item.text else {
                    throw .expected("a namespace name", at: "namespaces[\(offset)]", item)
                }
                namespaces.append(name)
            }
        }
        if let node = values[.allNamespaces], !node.isNull {
            guard let value = node.bool else { throw .expected("true or false", at: "all_namespaces", node) }
            allNamespaces = value
        }
        readyWhen = try Self.text(values[.readyWhen], at: "ready_when")
        maxConnections = try Self.integer(values[.maxConnections], at: "max_connections")
        idleTimeout = try Self.text(values[.idleTimeout], at: "idle_timeout")
        headerTimeout = try Self.text(values[.headerTimeout], at: "header_timeout")
        maxProbeBackOff = try Self.text(values[.maxProbeBackOff], at: "max_probe_backoff")
    }

    /// A mapping's values by key, every key one of `keys`. (The reader has refused a key given twice.)
    fileprivate static func settings<Keys: RawRepresentable & CaseIterable & Hashable>(
        _ node: YAMLNode, at path: String?, keys: Keys.Type
    ) throws(ServeConfigError.Detail) -> [Keys: YAMLNode] where Keys.RawValue == String {
        var values: [Keys: YAMLNode] = [:]
        for entry in node.mapping ?? [] {
            guard let key = Keys(rawValue: entry.key.text) else {
                throw ServeConfigError.Detail(
                    (path.map { "\($0): " } ?? "") + "unknown key \"\(entry.key.text)\"; the keys are "
                        + Keys.allCases.map(\.rawValue).joined(separator: ", ") + " (\(entry.keyMark))")
            }
            values[key] = entry.value
        }
        return values
    }

    /// A setting that takes text: any scalar but null, as written (`listen: 9817` is "9817").
    fileprivate static func text(_ node: YAMLNode?, at path: String) throws(ServeConfigError.Detail) -> String? {
        guard let node, !node.isNull else { return nil }
        guard node.scalar != nil else { throw .expected("a string", at: path, node) }
        return node.text
    }

    /// A setting that takes a whole number, in decimal and not quoted.
    fileprivate static func integer(_ node: YAMLNode?, at path: String) throws(ServeConfigError.Detail) -> Int? {
        guard let node, !node.isNull else { return nil }
        if let value = node.integer { return value }
        if node.scalar?.isOtherNumber == true {
            throw .expected(
                "a whole number, in decimal (YAML 1.1 and 1.2 read \(node.text ?? "") differently)", at: path, node)
        }
        throw .expected("a whole number", at: path, node)
    }
}

/// Why `serve --config FILE` could not be used.
package enum ServeConfigError: Error, Equatable, CustomStringConvertible {
    /// It cannot be read: missing, not a file, too large, no permission.
    case cannotRead(path: String, String)
    /// It is not YAML or JSON, or says something serve does not understand.
    case invalid(path: String, String)

    package var description: String {
        switch self {
        case .cannotRead(let path, let reason): "cannot read \(path): \(reason)"
        case .invalid(let path, let reason): "\(path): \(reason)"
        }
    }

    /// A reason found in the file's values, given its file's path by ``ServeConfigFile/parse(_:path:)``.
    struct Detail: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }

        /// `to.dns.port: expected a whole number, found text (line 3, column 27)`.
        static func expected(_ what: String, at path: String, _ node: YAMLNode) -> Detail {
            Detail("\(path): expected \(what), found \(node.kind) (\(node.mark))")
        }
    }
}
