import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import NIOPosix

/// A conditioned listener under a name, as the control API shows and changes it.
public struct ConditionedListener: Sendable {
    /// The name in the control API's paths (`/listeners/NAME`): letters, digits, `.`, `_`, `-`.
    public let name: String
    /// The proxy itself.
    public let proxy: ConditionedProxy

    public init(name: String, proxy: ConditionedProxy) {
        self.name = name
        self.proxy = proxy
    }
}

/// The conditioner's control API: JSON over HTTP/1.1 on loopback, to change conditioned
/// listeners while they run. `netreach condition` serves it; a test can too.
///
/// ```swift
/// let control = try await ConditionerControl.start(listeners: [ConditionedListener(name: "api", proxy: proxy)])
/// // curl -X PUT -d '{"profile":"3g"}' http://127.0.0.1:\(control.port)/listeners/api/conditions
/// try await control.stop()
/// ```
///
/// | Request | Does |
/// |---|---|
/// | `GET /listeners` | every listener: address, upstream, listening or down, profile, conditions, faults |
/// | `GET /listeners/NAME` | one listener |
/// | `PUT /listeners/NAME/conditions` | `{"profile": "3g"}`, or conditions (`{"upstream": {...}, "downstream": {...}}`) |
/// | `GET /listeners/NAME/faults` | its faults |
/// | `POST /listeners/NAME/faults` | adds one: `{"name": "cut", "direction": "downstream", "type": "limit_data", "bytes": 1000}` (201) |
/// | `DELETE /listeners/NAME/faults/FAULT` | removes one (204) |
/// | `POST /listeners/NAME/down`, `POST /listeners/NAME/up` | stops listening (and closes its connections), listens again |
/// | `GET /stats`, `GET /listeners/NAME/stats` | statistics per connection and direction |
///
/// Errors answer `{"error": "..."}` with 400 (malformed JSON, unknown profile, a value out of
/// range), 404 (no such listener, fault or path), 405 (another method), 409 (a fault's name is
/// taken; the port is taken when bringing a listener up), 413 (a body over 64 KiB).
public final class ConditionerControl: Sendable {
    /// The loopback address it listens on.
    public let host: String
    /// Its port.
    public let port: Int
    private let channel: any Channel
    private let group: any EventLoopGroup
    private let ownsGroup: Bool

    private init(host: String, port: Int, channel: any Channel, group: any EventLoopGroup, ownsGroup: Bool) {
        self.host = host
        self.port = port
        self.channel = channel
        self.group = group
        self.ownsGroup = ownsGroup
    }

    /// Serves the control API for `listeners` on `host:port` (port 0: a free one). The API has no
    /// authentication, so `host` must be a loopback address; anything else throws
    /// ``ConditionerError/cannotListen(_:_:)``, as does a port in use.
    public static func start(host: String = "127.0.0.1", port: Int = 0, listeners: [ConditionedListener],
                             group: (any EventLoopGroup)? = nil) async throws(ConditionerError) -> ConditionerControl {
        try await start(host: host, port: port, routes: ControlRoutes(listeners: listeners), group: group)
    }

    /// Serves `routes` (which may know the listeners' profiles) as ``start(host:port:listeners:group:)`` does.
    package static func start(host: String, port: Int, routes: ControlRoutes,
                              group: (any EventLoopGroup)?) async throws(ConditionerError) -> ConditionerControl {
        guard isLoopback(host) else {
            throw .cannotListen("\(host):\(port)", "the control API has no authentication, so it listens on loopback only")
        }
        guard (0...65535).contains(port) else { throw .cannotListen("\(host):\(port)", "not a port") }
        let ownsGroup = group == nil
        let group = group ?? MultiThreadedEventLoopGroup(numberOfThreads: 1)
        do {
            let channel = try await ServerBootstrap(group: group)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelInitializer { channel in
                    channel.pipeline.configureHTTPServerPipeline(withErrorHandling: true).flatMapThrowing {
                        try channel.pipeline.syncOperations.addHandler(ControlHTTPHandler(routes: routes))
                    }
                }
                .bind(host: host, port: port).get()
            return ConditionerControl(host: host, port: channel.localAddress?.port ?? port, channel: channel,
                                      group: group, ownsGroup: ownsGroup)
        } catch {
            if ownsGroup { try? await group.shutdownGracefully() }
            throw .cannotListen("\(host):\(port)", ConditionedProxy.reason(error))
        }
    }

    /// Stops serving (the listeners are the caller's to stop).
    public func stop() async throws {
        try? await channel.close()
        if ownsGroup { try await group.shutdownGracefully() }
    }

    /// Whether `host` is a loopback address: 127.0.0.0/8, ::1 or `localhost`.
    static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" || host == "::1" || host == "[::1]" { return true }
        var address = in_addr()
        guard inet_pton(AF_INET, host, &address) == 1 else { return false }
        return UInt32(bigEndian: address.s_addr) >> 24 == 127
    }
}

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

/// A listener as the control API shows it.
struct ListenerView: Encodable {
    var name: String
    var listen: String
    var upstream: String
    var listening: Bool
    var profile: String?
    var conditions: LinkConditions
    var faults: [NamedFault]
}

/// The statistics of one listener's connections.
struct ListenerStatistics: Encodable {
    var name: String
    var connections: [ConnectionStatistics]
}

/// What each request does: the API without its HTTP, tested directly.
package struct ControlRoutes: Sendable {
    static let maximumBody = 64 << 10

    private let listeners: [ConditionedListener]
    /// The profile each listener was last set to (none once given explicit conditions).
    private let profiles: NIOLockedValueBox<[String: LinkProfile]>

    package init(listeners: [ConditionedListener], profiles: [String: LinkProfile] = [:]) {
        self.listeners = listeners
        self.profiles = NIOLockedValueBox(profiles)
    }

    /// Sets the profile `name` shows (the command line's `--profile`).
    package func recordProfile(_ profile: LinkProfile?, for name: String) {
        profiles.withLockedValue { $0[name] = profile }
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
            for listener in listeners { all.append(ListenerStatistics(name: listener.name, connections: await listener.proxy.statistics())) }
            return .json(.ok, ["listeners": all])
        }
        guard parts[0] == "listeners" else { return .error(.notFound, "no such path: \(path) (see GET /listeners)") }
        guard let listener = listeners.first(where: { $0.name == parts[1] }) else {
            return .error(.notFound, "no listener is named \(parts[1]) (listeners: \(listeners.map(\.name).joined(separator: ", ")))")
        }
        return await respond(method: method, listener: listener, rest: Array(parts.dropFirst(2)), path: path, body: body)
    }

    private func respond(method: HTTPMethod, listener: ConditionedListener, rest: [String], path: String,
                         body: Data) async -> ControlResponse {
        func only(_ allowed: HTTPMethod...) -> ControlResponse? {
            allowed.contains(method) ? nil : .error(.methodNotAllowed, "\(method.rawValue) \(path): only \(allowed.map(\.rawValue).joined(separator: ", "))",
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
        guard let object = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] else {
            return .error(.badRequest, "not a JSON object: expected {\"profile\": NAME} or conditions")
        }
        do {
            if let name = object["profile"] {
                guard object.count == 1 else { return .error(.badRequest, "a profile comes alone: {\"profile\": NAME}") }
                guard let name = name as? String, let profile = LinkProfile(name: name) else {
                    return .error(.badRequest, "unknown profile \(name) (profiles: \(LinkProfile.allCases.map(\.name).joined(separator: ", ")))")
                }
                try listener.proxy.setConditions(profile.conditions)
                recordProfile(profile, for: listener.name)
            } else {
                if let unknown = Self.unknownKey(object, allowed: Self.conditionKeys) { return .error(.badRequest, unknown) }
                for direction in ["upstream", "downstream"] {
                    if let nested = object[direction] as? [String: Any],
                       let unknown = Self.unknownKey(nested, allowed: Self.directionKeys, in: direction) {
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
        guard let object = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] else {
            return .error(.badRequest, "not a JSON object: expected a fault: {\"name\": ..., \"type\": ..., ...}")
        }
        if let type = object["type"] as? String, let keys = Self.faultKeys[type],
           let unknown = Self.unknownKey(object, allowed: keys.union(["name", "direction", "type"])) {
            return .error(.badRequest, "\(unknown) for a \(type) fault")
        }
        let named: NamedFault
        do {
            named = try JSONDecoder().decode(NamedFault.self, from: body)
        } catch {
            return .error(.badRequest, Self.describe(error, expected: "a fault: {\"name\": ..., \"type\": ..., ...}"))
        }
        guard Self.isName(named.name) else {
            return .error(.badRequest, "a fault's name is letters, digits, '.', '_' and '-' (is \(named.name.debugDescription))")
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
        return ListenerView(name: listener.name, listen: ConditionedProxy.address(proxy.host, proxy.port),
                            upstream: ConditionedProxy.address(proxy.upstreamHost, proxy.upstreamPort), listening: proxy.isListening,
                            profile: profiles.withLockedValue { $0[listener.name] }?.name,
                            conditions: proxy.conditions, faults: proxy.faults)
    }

    static let conditionKeys: Set<String> = ["upstream", "downstream", "connectDelayMilliseconds", "seed", "bandwidthPerConnection"]
    static let directionKeys: Set<String> = ["bandwidth", "delayMilliseconds", "jitterMilliseconds", "loss"]
    static let faultKeys: [String: Set<String>] = [
        "reset_peer": ["afterMilliseconds"], "timeout": ["afterMilliseconds"], "slow_close": ["delayMilliseconds"],
        "limit_data": ["bytes"], "slicer": ["averageSize", "sizeVariation", "delayMilliseconds"],
    ]

    /// A key of `object` that is not in `allowed`, in a sentence (a misspelt key must not be
    /// taken for a value left at zero).
    static func unknownKey(_ object: [String: Any], allowed: Set<String>, in parent: String? = nil) -> String? {
        guard let key = object.keys.sorted().first(where: { !allowed.contains($0) }) else { return nil }
        let place = parent.map { " in \($0)" } ?? ""
        return "unknown key \(key)\(place) (known: \(allowed.sorted().joined(separator: ", ")))"
    }

    /// Whether `name` can be a listener's or fault's name in a path.
    package static func isName(_ name: String) -> Bool {
        !name.isEmpty && name.count <= 64
            && name.unicodeScalars.allSatisfy { $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "._-".unicodeScalars.contains($0)) }
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

/// One control connection: gathers each request's body (up to 64 KiB), answers it from
/// ``ControlRoutes``, one request at a time.
final class ControlHTTPHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let routes: ControlRoutes
    private var head: HTTPRequestHead?
    private var body = Data()
    private var tooLarge = false

    init(routes: ControlRoutes) { self.routes = routes }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body = Data()
            tooLarge = false
        case .body(var chunk):
            if body.count + chunk.readableBytes > ControlRoutes.maximumBody {
                tooLarge = true
            } else if let bytes = chunk.readBytes(length: chunk.readableBytes) {
                body.append(contentsOf: bytes)
            }
        case .end:
            guard let head else { return }
            self.head = nil
            let keepAlive = head.isKeepAlive && !tooLarge
            if tooLarge {
                write(.error(.payloadTooLarge, "a request body is at most 64 KiB"), head: head, keepAlive: false, context: context)
                return
            }
            let routes = routes
            let body = body
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            context.eventLoop.makeFutureWithTask {
                await routes.respond(method: head.method, uri: head.uri, body: body)
            }.whenSuccess { response in
                let (handler, context) = bound.value
                handler.write(response, head: head, keepAlive: keepAlive, context: context)
            }
        }
    }

    /// Bytes that are not HTTP: NIO's error handler before this one has answered 400; the
    /// connection ends here (it would otherwise stay open, waiting for nothing).
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    private func write(_ response: ControlResponse, head: HTTPRequestHead, keepAlive: Bool, context: ChannelHandlerContext) {
        var headers = HTTPHeaders()
        if !response.body.isEmpty { headers.add(name: "Content-Type", value: "application/json") }
        headers.add(name: "Content-Length", value: "\(response.body.count)")
        if let allow = response.allow { headers.add(name: "Allow", value: allow) }
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        context.write(wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: response.status, headers: headers))), promise: nil)
        if !response.body.isEmpty {
            context.write(wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: response.body)))), promise: nil)
        }
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive {
            let channel = context.channel
            done.whenComplete { _ in channel.close(promise: nil) }
        }
    }
}
