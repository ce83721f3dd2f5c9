import NIOCore
import NIOHTTP1
import NIOPosix
import NetReachSystem

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A control response: a status and a JSON body (none for 204).
package struct ControlResponse: Sendable, Equatable {
    package var status: HTTPResponseStatus
    package var body: Data
    package var allow: String?

    static func json(_ status: HTTPResponseStatus, _ value: some Encodable) -> ControlResponse {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let body = (try? encoder.encode(value)) ?? Data(#"{"error":"the response could not be encoded"}"#.utf8)
        return ControlResponse(status: status, body: body + Data("\n".utf8))
    }

    static func error(_ status: HTTPResponseStatus, _ message: String, allow: String? = nil) -> ControlResponse {
        var response = json(status, ["error": message])
        response.allow = allow
        return response
    }
}

/// What each request does: the API without its HTTP, tested directly.
package struct ControlRoutes: Sendable {
    static let maximumBody = 64 << 10

    private let listeners: [ConditionedListener]
    /// The profile each listener was last set to (none once given explicit conditions).
    private let profiles: Locked<[String: LinkProfile]>

    package init(listeners: [ConditionedListener], profiles: [String: LinkProfile] = [:]) {
        self.listeners = listeners
        self.profiles = Locked(profiles)
    }

    /// Sets the profile `name` shows (the command line's `--profile`).
    package func recordProfile(_ profile: LinkProfile?, for name: String) {
        profiles.withLock { $0[name] = profile }
    }

    package func respond(method: HTTPMethod, uri: String, body: Data) async -> ControlResponse {
        let path = uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? uri
        let parts = path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        let onlyGET = ControlResponse.error(.methodNotAllowed, "\(method.rawValue) \(path): only GET", allow: "GET")
        if parts.isEmpty || parts == ["listeners"] {
            return method == .GET ? .json(.ok, ["listeners": listeners.map(view)]) : onlyGET
        }
        if parts == ["stats"] {
            guard method == .GET else { return onlyGET }
            var all: [ListenerStatistics] = []
            for listener in listeners {
                all.append(ListenerStatistics(name: listener.name, connections: await listener.proxy.statistics()))
            }
            return .json(.ok, ["listeners": all])
        }
        guard parts[0] == "listeners" else { return .error(.notFound, "no such path: \(path) (see GET /listeners)") }
        guard let listener = listeners.first(where: { $0.name == parts[1] }) else {
            return .error(
                .notFound,
                "no listener is named \(parts[1]) (listeners: \(listeners.map(\.name).joined(separator: ", ")))")
        }
        return await respond(
            method: method, listener: listener, rest: Array(parts.dropFirst(2)), path: path, body: body)
    }

    private func respond(
        method: HTTPMethod, listener: ConditionedListener, rest: [String], path: String,
        body: Data
    ) async -> ControlResponse {
        func only(_ allowed: HTTPMethod...) -> ControlResponse? {
            allowed.contains(method)
                ? nil
                : .error(
                    .methodNotAllowed,
                    "\(method.rawValue) \(path): only \(allowed.map(\.rawValue).joined(separator: ", "))",
                    allow: allowed.map(\.rawValue).joined(separator: ", "))
        }
        switch rest.first {
        case nil:
            return only(.GET) ?? .json(.ok, view(listener))
        case "conditions" where rest.count == 1:
            if let refused = only(.GET, .PUT) { return refused }
            if method == .GET { return .json(.ok, listener.proxy.conditions) }
            return setConditions(listener, body: body)
        case "faults" where rest.count == 1:
            if let refused = only(.GET, .POST) { return refused }
            if method == .GET { return .json(.ok, listener.proxy.faults) }
            return addFault(listener, body: body)
        case "faults" where rest.count == 2:
            if let refused = only(.DELETE) { return refused }
            do throws(ConditionerError) {
                try listener.proxy.removeFault(named: rest[1])
                return ControlResponse(status: .noContent, body: Data())
            } catch {
                return .error(.notFound, error.description)
            }
        case "down" where rest.count == 1:
            if let refused = only(.POST) { return refused }
            await listener.proxy.takeDown()
            return .json(.ok, view(listener))
        case "up" where rest.count == 1:
            if let refused = only(.POST) { return refused }
            do throws(ConditionerError) {
                try await listener.proxy.bringUp()
                return .json(.ok, view(listener))
            } catch {
                return .error(.conflict, error.description)
            }
        case "stats" where rest.count == 1:
            if let refused = only(.GET) { return refused }
            return .json(.ok, ListenerStatistics(name: listener.name, connections: await listener.proxy.statistics()))
        default:
            return .error(.notFound, "no such path: \(path) (see the control API in netreach condition --help)")
        }
    }

    private func setConditions(_ listener: ConditionedListener, body: Data) -> ControlResponse {
        guard let object = try? JSONDecoder().decode(JSONObjectKeys.self, from: body) else {
            return .error(.badRequest, "not a JSON object: expected {\"profile\": NAME} or conditions")
        }
        do {
            if object.keys.contains("profile") {
                guard object.keys.count == 1 else {
                    return .error(.badRequest, "a profile comes alone: {\"profile\": NAME}")
                }
                guard let name = object.strings["profile"], let profile = LinkProfile(name: name) else {
                    let name = object.strings["profile"] ?? object.scalars["profile"] ?? "(not a string)"
                    return .error(
                        .badRequest,
                        "unknown profile \(name) (profiles: \(LinkProfile.allCases.map(\.name).joined(separator: ", ")))"
                    )
                }
                try listener.proxy.setConditions(profile.conditions)
                recordProfile(profile, for: listener.name)
            } else {
                if let unknown = Self.unknownKey(object.keys, allowed: Self.conditionKeys) {
                    return .error(.badRequest, unknown)
                }
                for direction in ["upstream", "downstream"] {
                    if let nested = object.nested[direction],
                        let unknown = Self.unknownKey(nested, allowed: Self.directionKeys, in: direction)
                    {
                        return .error(.badRequest, unknown)
                    }
                }
                let conditions = try JSONDecoder().decode(LinkConditions.self, from: body)
                try listener.proxy.setConditions(conditions)
                recordProfile(nil, for: listener.name)
            }
            return .json(.ok, view(listener))
        } catch {
            return .error(.badRequest, Self.describe(error, expected: "{\"profile\": NAME} or conditions"))
        }
    }

    private func addFault(_ listener: ConditionedListener, body: Data) -> ControlResponse {
        guard let object = try? JSONDecoder().decode(JSONObjectKeys.self, from: body) else {
            return .error(.badRequest, "not a JSON object: expected a fault: {\"name\": ..., \"type\": ..., ...}")
        }
        if let type = object.strings["type"], let keys = Self.faultKeys[type],
            let unknown = Self.unknownKey(object.keys, allowed: keys.union(["name", "direction", "type"]))
        {
            return .error(.badRequest, "\(unknown) for a \(type) fault")
        }
        let named: NamedFault
        do {
            named = try JSONDecoder().decode(NamedFault.self, from: body)
        } catch {
            return .error(.badRequest, Self.describe(error, expected: "a fault: {\"name\": ..., \"type\": ..., ...}"))
        }
        guard Self.isName(named.name) else {
            return .error(
                .badRequest, "a fault's name is letters, digits, '.', '_' and '-' (is \(named.name.debugDescription))")
        }
        do throws(ConditionerError) {
            try listener.proxy.addFault(named)
            return .json(.created, named)
        } catch {
            if case .duplicateFault = error { return .error(.conflict, error.description) }
            return .error(.badRequest, error.description)
        }
    }

    private func view(_ listener: ConditionedListener) -> ListenerView {
        let proxy = listener.proxy
        return ListenerView(
            name: listener.name, listen: ConditionedProxy.address(proxy.host, proxy.port),
            upstream: ConditionedProxy.address(proxy.upstreamHost, proxy.upstreamPort), listening: proxy.isListening,
            profile: profiles.withLock { $0[listener.name] }?.name,
            conditions: proxy.conditions, faults: proxy.faults)
    }

    static let conditionKeys: Set<String> = [
        "upstream", "downstream", "connectDelayMilliseconds", "seed", "bandwidthPerConnection",
    ]
    static let directionKeys: Set<String> = ["bandwidth", "delayMilliseconds", "jitterMilliseconds", "loss"]
    static let faultKeys: [String: Set<String>] = [
        "reset_peer": ["afterMilliseconds"], "timeout": ["afterMilliseconds"], "slow_close": ["delayMilliseconds"],
        "limit_data": ["bytes"], "slicer": ["averageSize", "sizeVariation", "delayMilliseconds"],
    ]

    /// A key of `object` that is not in `allowed`, in a sentence (a misspelt key must not be
    /// taken for a value left at zero).
    static func unknownKey(_ keys: Set<String>, allowed: Set<String>, in parent: String? = nil) -> String? {
        guard let key = keys.sorted().first(where: { !allowed.contains($0) }) else { return nil }
        let place = parent.map { " in \($0)" } ?? ""
        return "unknown key \(key)\(place) (known: \(allowed.sorted().joined(separator: ", ")))"
    }

    /// Whether `name` can be a listener's or fault's name in a path.
    package static func isName(_ name: String) -> Bool {
        !name.isEmpty && name.count <= 64
            && name.unicodeScalars.allSatisfy {
                switch $0 {
                case "a"..."z", "A"..."Z", "0"..."9", ".", "_", "-": true
                default: false
                }
            }
    }

    /// A decoding or validation error in a sentence.
    static func describe(_ error: any Error, expected: String) -> String {
        switch error {
        case let error as ConditionerError:
            return error.description
        case DecodingError.dataCorrupted(let context) where context.codingPath.isEmpty:
            return "not JSON: expected \(expected)"
        case DecodingError.dataCorrupted(let context):
            return "\(Self.path(context.codingPath)): \(context.debugDescription)"
        case DecodingError.keyNotFound(let key, let context):
            return "\(Self.path(context.codingPath + [key])) is missing"
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context):
            return "\(Self.path(context.codingPath)): \(context.debugDescription)"
        default:
            return "malformed: expected \(expected)"
        }
    }

    private static func path(_ keys: [any CodingKey]) -> String {
        keys.isEmpty ? "the body" : keys.map(\.stringValue).joined(separator: ".")
    }
}

/// The keys of a JSON object, the keys of the objects in it, and its string values: what the
/// control API looks at before decoding, so a misspelt key is refused rather than taken for a
/// value left out. Anything but an object does not decode.
struct JSONObjectKeys: Decodable {
    var keys: Set<String> = []
    var nested: [String: Set<String>] = [:]
    var strings: [String: String] = [:]
    /// Numbers and booleans, as JSON writes them.
    var scalars: [String: String] = [:]

    private struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: AnyKey.self)
        for key in container.allKeys {
            keys.insert(key.stringValue)
            if let inner = try? container.nestedContainer(keyedBy: AnyKey.self, forKey: key) {
                nested[key.stringValue] = Set(inner.allKeys.map(\.stringValue))
            } else if let string = try? container.decode(String.self, forKey: key) {
                strings[key.stringValue] = string
            } else if let number = try? container.decode(Int.self, forKey: key) {
                scalars[key.stringValue] = String(number)
            } else if let number = try? container.decode(Double.self, forKey: key) {
                scalars[key.stringValue] = String(number)
            } else if let flag = try? container.decode(Bool.self, forKey: key) {
                scalars[key.stringValue] = String(flag)
            }
        }
    }
}
