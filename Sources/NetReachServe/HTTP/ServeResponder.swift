import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import NetReach
import NetReachConnectivity

/// Every endpoint of `serve`, routed by path and method: unknown paths are `404`, a known path
/// asked with a method it does not answer is `405` with `Allow`, a malformed query `400` with the
/// reason. Nothing changes state, except `POST /-/reload` when the lifecycle API is enabled
/// (`403` when it is not).
///
/// ```swift
/// let app = Application(responder: ServeResponder(state: state, targetProbe: probe), configuration: ...)
/// ```
package struct ServeResponder: HTTPResponder {
    package typealias Context = ServeRequestContext

    let state: ServeState
    let targetProbe: TargetProbe
    /// `POST /-/reload`; `nil` unless the lifecycle API is enabled (`--enable-lifecycle`).
    let reload: (@Sendable () async -> Result<Void, ServeReloader.Failure>)?
    let processMetrics: @Sendable () -> String
    /// `--web.config.file`'s users and headers; `nil`: every request is answered, plainly.
    let web: WebSecurity?

    package init(
        state: ServeState, targetProbe: TargetProbe,
        reload: (@Sendable () async -> Result<Void, ServeReloader.Failure>)? = nil,
        web: WebSecurity? = nil,
        processMetrics: @escaping @Sendable () -> String = { ProcessMetrics.read() }
    ) {
        self.state = state
        self.targetProbe = targetProbe
        self.reload = reload
        self.web = web
        self.processMetrics = processMetrics
    }

    private enum Endpoint: String, CaseIterable {
        case page = "/"
        case metrics = "/metrics"
        case probe = "/probe"
        case path = "/api/v1/path"
        case connectivity = "/api/v1/connectivity"
        case events = "/api/v1/events"
        case livez = "/livez"
        case readyz = "/readyz"
        case health = "/health"
        case reload = "/-/reload"

        /// The methods it answers, as `Allow` lists them.
        var methods: [HTTPRequest.Method] { self == .reload ? [.post] : [.get, .head] }

        var parameters: Set<String> {
            switch self {
            case .path: ["to", "namespace"]
            case .probe: ["target", "namespace", "module"]
            case .readyz: ["verbose"]
            case .page, .metrics, .connectivity, .events, .livez, .health, .reload: []
            }
        }
    }

    package func respond(to request: Request, context: Context) async throws -> Response {
        guard let web else { return await answer(request, context: context) }
        var response: Response
        switch Self.isOpenHealthCheck(request)
            ? .allowed
            : await web.authentication.verdict(
                authorization: request.headers[.authorization])
        {
        case .allowed:
            response = await answer(request, context: context)
        case .denied:
            response = Self.text(.unauthorized, "Unauthorized\n")
            response.headers[.wwwAuthenticate] = "Basic realm=\"netreach\", charset=\"UTF-8\""
        case .busy:
            response = Self.text(.serviceUnavailable, "too many password checks at once; try again\n")
            response.headers[.retryAfter] = "1"
        }
        for field in web.headers { response.headers[field.name] = field.value }
        return response
    }

    /// `/livez`, and `/readyz` without a query, answer without credentials: a word each, for the
    /// kubelet and systemd, which cannot send a password (Kubernetes's API server leaves its own
    /// open the same way). `/readyz?verbose` names namespaces and destinations: behind the password.
    private static func isOpenHealthCheck(_ request: Request) -> Bool {
        let path = request.uri.path
        return path == Endpoint.livez.rawValue
            || (path == Endpoint.readyz.rawValue && (request.uri.query ?? "").isEmpty)
    }

    private func answer(_ request: Request, context: Context) async -> Response {
        guard let endpoint = Endpoint(rawValue: request.uri.path) else {
            return Self.text(.notFound, "no such endpoint: \(request.uri.path)\n")
        }
        guard endpoint.methods.contains(request.method) else {
            let allowed = endpoint.methods.map(\.rawValue)
            var response = Self.text(
                .methodNotAllowed, "\(request.uri.path) only answers \(allowed.joined(separator: " and "))\n")
            response.headers[.allow] = allowed.joined(separator: ", ")
            return response
        }
        let query: QueryParameters
        do {
            query = try QueryParameters(parsing: request.uri.query, allowed: endpoint.parameters)
        } catch {
            return Self.text(.badRequest, "\(error)\n")
        }
        var response = await respond(to: endpoint, query: query, request: request, context: context)
        if request.method == .head { response.body = ResponseBody() }
        return response
    }

    private func respond(
        to endpoint: Endpoint, query: QueryParameters, request: Request, context: Context
    ) async -> Response {
        switch endpoint {
        case .page:
            return Self.text(.ok, Self.page, contentType: "text/html; charset=utf-8")
        case .metrics:
            let text = state.exposition(process: processMetrics())
            return Self.text(.ok, text, contentType: MetricsExposition.contentType)
        case .path:
            return path(query)
        case .probe:
            return await probe(query, request: request)
        case .connectivity:
            guard state.judgesConnectivity else {
                return Self.text(.notFound, "no probe is configured: serve --internet --probe URL\n")
            }
            guard let verdict = state.verdict(namespace: state.defaultNamespace) else {
                return Self.text(.serviceUnavailable, "the internet has not been judged yet\n")
            }
            return Self.text(.ok, ConnectivityJSON.line(verdict, at: Date()) + "\n", contentType: "application/json")
        case .events:
            return events(request: request, context: context)
        case .livez:
            return Self.text(.ok, "ok\n")
        case .reload:
            guard let reload else {
                return Self.text(.forbidden, "the lifecycle API is not enabled: serve --enable-lifecycle\n")
            }
            switch await reload() {
            case .success: return Self.text(.ok, "reloaded\n")
            case .failure(let failure):
                return Self.text(
                    .internalServerError, "not reloaded, the running configuration is kept: \(failure)\n")
            }
        case .readyz:
            let checks = Health.readiness(
                paths: state.paths, keys: state.keys, condition: state.readyWhen,
                verdict: state.verdict(namespace: state.defaultNamespace), namespaceProblems: state.namespaceProblems)
            let ready = checks.allSatisfy(\.passed)
            return Self.text(
                ready ? .ok : .serviceUnavailable, Health.readinessText(checks, verbose: query["verbose"] != nil))
        case .health:
            let verdict = Health.health(
                paths: state.paths, keys: state.keys,
                verdict: state.verdict(namespace: state.defaultNamespace),
                judges: state.judgesConnectivity)
            switch verdict {
            case .passing: return Self.text(.ok, "passing\n")
            case .warning(let reason): return Self.text(.init(code: verdict.statusCode), "warning: \(reason)\n")
            case .critical(let reason): return Self.text(.init(code: verdict.statusCode), "critical: \(reason)\n")
            }
        }
    }

    /// `/api/v1/path[?to=NAME][&namespace=NS]`: the path as `status --json` prints it.
    private func path(_ query: QueryParameters) -> Response {
        let namespace = query["namespace"] ?? state.defaultNamespace
        let key = PathKey(namespace: namespace, destination: query["to"] ?? "")
        guard state.keys.contains(key) else {
            if !state.keys.contains(where: { $0.namespace == namespace }) {
                return Self.text(.notFound, "no namespace \(PathJSON.string(namespace)) is watched\n")
            }
            return Self.text(
                .notFound,
                "no destination named \(PathJSON.string(key.destination)) is watched (serve --to NAME=DEST)\n")
        }
        guard let path = state.path(for: key) else {
            return Self.text(.serviceUnavailable, "the path \(key) has not been read yet\n")
        }
        return Self.text(.ok, PathJSON.line(path, at: Date()) + "\n", contentType: "application/json")
    }

    /// `/probe?target=DEST[&namespace=NS]`: one destination's path, for Prometheus's multi-target
    /// relabelling. `module`, which blackbox_exporter's configurations send, may only be `path`.
    private func probe(_ query: QueryParameters, request: Request) async -> Response {
        guard let target = query["target"], !target.isEmpty else {
            return Self.text(.badRequest, "the target parameter is missing: /probe?target=HOST\n")
        }
        if let module = query["module"], module != "path" {
            return Self.text(.badRequest, "unknown module \(PathJSON.string(module)); the one module is path\n")
        }
        let namespace = query["namespace"] ?? state.defaultNamespace
        let timeout = TargetProbe.timeout(
            header: request.headers[HTTPField.Name("X-Prometheus-Scrape-Timeout-Seconds")!])
        let started = ContinuousClock.now
        do {
            let update = try await targetProbe.update(to: target, namespace: namespace, timeout: timeout)
            let text = TargetProbe.exposition(
                of: update, target: target, namespace: namespace, duration: ContinuousClock.now - started)
            return Self.text(.ok, text, contentType: MetricsExposition.contentType)
        } catch {
            switch error {
            case .unknownNamespace(let name):
                return Self.text(.notFound, "no namespace \(PathJSON.string(name)) is watched\n")
            case .busy:
                return Self.text(.serviceUnavailable, "\(targetProbe.limit) probes are running; try again\n")
            }
        }
    }

    /// `/api/v1/events`: Server-Sent Events until the client leaves, is dropped, or the server stops.
    private func events(request: Request, context: Context) -> Response {
        let lastEventID = request.headers[HTTPField.Name("Last-Event-ID")!].flatMap { UInt64($0) }
        let hub = state.hub
        let channel = context.channel
        var headers: HTTPFields = [.contentType: "text/event-stream", .cacheControl: "no-cache"]
        // nginx and other proxies would otherwise hold events back to fill their buffers.
        headers[HTTPField.Name("X-Accel-Buffering")!] = "no"
        guard request.method == .get else { return Response(status: .ok, headers: headers) }
        // The kernel would otherwise grow this connection's send buffer to 4 MB (tcp_wmem), some
        // 9,000 events a client that stopped reading never takes, before the hub's bounded buffer
        // fills and drops it. Fixed small, the stall reaches the hub after a few hundred.
        _ = channel.setOption(ChannelOptions.socketOption(.so_sndbuf), value: Self.eventSendBuffer)
        return Response(
            status: .ok, headers: headers,
            body: ResponseBody { writer in
                let subscription = hub.subscribe(lastEventID: lastEventID, onDrop: { channel.close(promise: nil) })
                defer { subscription.cancel() }
                // The client is gone as soon as its connection closes (ConnectionGuard closes it
                // when the client does): the loop below waits for events, not on the socket,
                // and would only learn of it from a failed write.
                channel.closeFuture.whenComplete { _ in subscription.cancel() }
                // On the connection's event loop: an event wakes that thread only, and is written
                // there (EventLoopTaskExecutor).
                try await withTaskExecutorPreference(EventLoopTaskExecutor(channel.eventLoop)) {
                    for await chunk in subscription.chunks {
                        try await writer.write(ByteBuffer(string: chunk))
                    }
                }
                try await writer.finish(nil)
            })
    }

    /// An event stream's socket send buffer (the kernel doubles it): ~150 events of 450 bytes.
    static let eventSendBuffer: SocketOptionValue = 32_768

    /// The status page, with the library's offline-indicator policy.
    private static let page = StatusPage.html()

    private static func text(
        _ status: HTTPResponse.Status, _ body: String, contentType: String = "text/plain; charset=utf-8"
    ) -> Response {
        Response(
            status: status, headers: [.contentType: contentType],
            body: ResponseBody(byteBuffer: ByteBuffer(string: body)))
    }
}
