import Foundation
import NetReachSystem
import Yams

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
/// silently watch nothing of what was meant.
package struct ServeConfigFile: Decodable, Equatable, Sendable {
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
    package enum CodingKeys: String, CodingKey, CaseIterable {
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

    package init(from decoder: any Decoder) throws {
        let keys = try decoder.container(keyedBy: AnyKey.self).allKeys.map(\.stringValue)
        if let unknown = keys.first(where: { CodingKeys(rawValue: $0) == nil }) {
            throw ServeConfigError.Detail(
                "unknown key \"\(unknown)\"; the keys are "
                    + CodingKeys.allCases.map(\.rawValue).joined(separator: ", "))
        }
        let container = try decoder.container(keyedBy: CodingKeys.self)
        listen = try container.decodeIfPresent(String.self, forKey: .listen)
        to = try container.decodeIfPresent([String: Destination].self, forKey: .to) ?? [:]
        namespaces = try container.decodeIfPresent([String].self, forKey: .namespaces) ?? []
        allNamespaces = try container.decodeIfPresent(Bool.self, forKey: .allNamespaces)
        readyWhen = try container.decodeIfPresent(String.self, forKey: .readyWhen)
        maxConnections = try container.decodeIfPresent(Int.self, forKey: .maxConnections)
        idleTimeout = try container.decodeIfPresent(String.self, forKey: .idleTimeout)
        headerTimeout = try container.decodeIfPresent(String.self, forKey: .headerTimeout)
        maxProbeBackOff = try container.decodeIfPresent(String.self, forKey: .maxProbeBackOff)
    }

    /// One `to:` entry: a host alone (`db: 10.0.0.5`), or a mapping that also names the traffic
    /// whose path is watched (`dns: {host: 10.0.0.53, protocol: udp, port: 53}`). The port and
    /// protocol are checked with the flags (``ServeFlags/targets(file:path:)``), as
    /// `ready_when` is.
    package struct Destination: Decodable, Equatable, Sendable, ExpressibleByStringLiteral {
        package var host: String
        package var port: Int?
        package var transportProtocol: String?

        package enum CodingKeys: String, CodingKey, CaseIterable {
            case host, port
            case transportProtocol = "protocol"
        }

        package init(host: String, port: Int? = nil, protocol transportProtocol: String? = nil) {
            self.host = host
            self.port = port
            self.transportProtocol = transportProtocol
        }

        package init(stringLiteral host: String) { self.init(host: host) }

        package init(from decoder: any Decoder) throws {
            if let host = try? decoder.singleValueContainer().decode(String.self) {
                self.init(host: host)
                return
            }
            let keys = try decoder.container(keyedBy: AnyKey.self).allKeys.map(\.stringValue)
            if let unknown = keys.first(where: { CodingKeys(rawValue: $0) == nil }) {
                let name = decoder.codingPath.last?.stringValue ?? "a destination"
                throw ServeConfigError.Detail(
                    "to.\(name): unknown key \"\(unknown)\"; the keys are "
                        + CodingKeys.allCases.map(\.rawValue).joined(separator: ", "))
            }
            let container = try decoder.container(keyedBy: CodingKeys.self)
            self.init(
                host: try container.decode(String.self, forKey: .host),
                port: try container.decodeIfPresent(Int.self, forKey: .port),
                protocol: try container.decodeIfPresent(String.self, forKey: .transportProtocol))
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
        do {
            // Parsed once. An empty file (or one of comments only) configures nothing: the flags alone.
            guard let node = try Yams.compose(yaml: text) else { return ServeConfigFile() }
            return try YAMLDecoder().decode(ServeConfigFile.self, from: node)
        } catch let error as ServeConfigError.Detail {
            throw .invalid(path: path, error.description)
        } catch let error as DecodingError {
            throw .invalid(path: path, Self.describe(error))
        } catch let error as YamlError {
            throw .invalid(path: path, "not YAML or JSON: \(error)")
        } catch {
            throw .invalid(path: path, "\(error)")
        }
    }

    private static func describe(_ error: DecodingError) -> String {
        func at(_ path: [any CodingKey]) -> String {
            path.isEmpty
                ? "the file" : path.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
        }
        switch error {
        case .typeMismatch(let type, let context):
            return "\(at(context.codingPath)): expected \(Self.name(of: type, at: context.codingPath))"
        case .valueNotFound(let type, let context):
            return "\(at(context.codingPath)): expected \(Self.name(of: type, at: context.codingPath)), found nothing"
        case .keyNotFound(let key, let context):
            return "\(at(context.codingPath + [key])): missing"
        case .dataCorrupted(let context):
            // What our own init(from:) threw, wrapped by the decoder.
            if let detail = context.underlyingError as? ServeConfigError.Detail { return detail.description }
            return "\(at(context.codingPath)): \(context.debugDescription)"
        @unknown default:
            return "\(error)"
        }
    }

    /// What a value of `type` is called in the file, at `path`.
    private static func name(of type: Any.Type, at path: [any CodingKey]) -> String {
        switch type {
        case is Node.Mapping.Type, is [String: Destination].Type:
            path.isEmpty
                ? "a mapping of keys (" + CodingKeys.allCases.map(\.rawValue).joined(separator: ", ") + ")"
                : path.count == 1
                    ? "a mapping of names to hosts (name: host, or name: {host: HOST, port: PORT, protocol: tcp|udp})"
                    : "a host, or a mapping of host, port and protocol"
        case is Node.Sequence.Type, is [String].Type: "a list"
        case is Bool.Type: "true or false"
        case is Int.Type: "a whole number"
        case is Node.Scalar.Type, is String.Type: "a string"
        default: "\(type)"
        }
    }

    private struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
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

    /// A reason found while decoding, given its file's path by ``ServeConfigFile/parse(_:path:)``.
    struct Detail: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }
}
