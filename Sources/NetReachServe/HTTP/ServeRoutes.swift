import HTTPTypes
import Hummingbird
import NIOCore
import NetReach
import NetReachConnectivity

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Every endpoint of `serve`, on Hummingbird's `Router`. Nothing changes state, except
/// `POST /-/reload` when the lifecycle API is enabled (`403` when it is not).
///
/// The router's middleware answers, before any handler runs, what no handler should see: with
/// `--web.config.file`, a request without a known user's password (``BasicAuthMiddleware``),
/// and every answer gets the file's headers (``WebHeadersMiddleware``); a path that is not an
/// endpoint is `404`, an endpoint asked with a method it does not take `405` with `Allow`
/// (``EndpointMiddleware``). Each handler refuses a query it does not take with a `400` that
/// says why. A `GET` endpoint answers `HEAD` with the header fields of its `GET` and no body.
///
/// ```swift
/// let routes = ServeRoutes(state: state, targetProbe: probe)
/// let application = Application(router: routes.router(web: nil), configuration: configuration)
/// ```
package struct ServeRoutes: Sendable {
    let state: ServeState
    let targetProbe: TargetProbe
    /// `POST /-/reload`; `nil` unless the lifecycle API is enabled (`--enable-lifecycle`).
    let reload: (@Sendable () async -> Result<Void, ServeReloader.Failure>)?
    let processMetrics: @Sendable () -> String

    package init(
        state: ServeState, targetProbe: TargetProbe,
        reload: (@Sendable () async -> Result<Void, ServeReloader.Failure>)? = nil,
        processMetrics: @escaping @Sendable () -> String = { ProcessMetrics.read() }
    ) {
        self.state = state
        self.targetProbe = targetProbe
        self.reload = reload
        self.processMetrics = processMetrics
    }

    /// Every endpoint's path and the methods it answers, in the order `Allow` lists them: what
    /// ``router(web:)`` registers, and what ``EndpointMiddleware`` holds requests to.
    package static let endpoints: [String: [HTTPRequest.Method]] = [
        "/": [.get, .head], "/metrics": [.get, .head], "/probe": [.get, .head],
        "/api/v1/path": [.get, .head], "/api/v1/connectivity": [.get, .head],
        "/api/v1/events": [.get, .head], "/livez": [.get, .head], "/readyz": [.get, .head],
        "/health": [.get, .head], "/-/reload": [.post],
    ]

    /// serve's router. `web`: `--web.config.file`'s users and headers; `nil`: every request is
    /// answered, plainly.
    package func router(web: WebSecurity? = nil) -> Router<ServeRequestContext> {
        let router = Router(context: ServeRequestContext.self, options: .autoGenerateHeadEndpoints)
        if let web {
            router.add(middleware: WebHeadersMiddleware(web: web))
            router.add(middleware: BasicAuthMiddleware(web: web))
        }
        router.add(middleware: EndpointMiddleware(endpoints: Self.endpoints))
        router.get("/", use: page)
        router.get("/metrics", use: metrics)
        router.get("/probe", use: probe)
        let api = router.group("api/v1")
        api.get("path", use: path)
        api.get("connectivity", use: connectivity)
        api.get("events", use: events)
        router.get("/livez", use: live)
        router.get("/readyz", use: ready)
        router.get("/health", use: health)
        router.post("/-/reload", use: reloadConfiguration)
        return router
    }

    /// `/`: the status page, with the library's offline-indicator policy.
    @Sendable func page(_ request: Request, context: ServeRequestContext) throws(PlainTextError) -> Response {
        _ = try Self.query(of: request, allowing: [])
        return .text(.ok, Self.page, contentType: "text/html; charset=utf-8")
    }

    private static let page = StatusPage.html()

    /// `/metrics`: serve's families written from its state now, then the registry's, then `process_*`.
    @Sendable func metrics(_ request: Request, context: ServeRequestContext) throws(PlainTextError) -> Response {
        _ = try Self.query(of: request, allowing: [])
        return .text(.ok, state.exposition(process: processMetrics()), contentType: MetricsExposition.contentType)
    }

    /// `/api/v1/path[?to=NAME][&namespace=NS]`: the path as `status --json` prints it.
    @Sendable func path(_ request: Request, context: ServeRequestContext) throws(PlainTextError) -> Response {
        let query = try Self.query(of: request, allowing: ["to", "namespace"])
        let namespace = query["namespace"] ?? state.defaultNamespace
        let key = PathKey(namespace: namespace, destination: query["to"] ?? "")
        guard state.keys.contains(key) else {
            if !state.keys.contains(where: { $0.namespace == namespace }) {
                throw PlainTextError(.notFound, "no namespace \(PathJSON.string(namespace)) is watched\n")
            }
            throw PlainTextError(
                .notFound,
                "no destination named \(PathJSON.string(key.destination)) is watched (serve --to NAME=DEST)\n")
        }
        guard let path = state.path(for: key) else {
            throw PlainTextError(.serviceUnavailable, "the path \(key) has not been read yet\n")
        }
        return .text(.ok, PathJSON.line(path, at: Date()) + "\n", contentType: "application/json")
    }

    /// `/probe?target=DEST[&namespace=NS]`: one destination's path, for Prometheus's multi-target
    /// relabelling. `module`, which blackbox_exporter's configurations send, may only be `path`.
    @Sendable func probe(
        _ request: Request, context: ServeRequestContext
    ) async throws(PlainTextError) -> Response {
        let query = try Self.query(of: request, allowing: ["target", "namespace", "module"])
        guard let target = query["target"], !target.isEmpty else {
            throw PlainTextError(.badRequest, "the target parameter is missing: /probe?target=HOST\n")
        }
        if let module = query["module"], module != "path" {
            throw PlainTextError(.badRequest, "unknown module \(PathJSON.string(module)); the one module is path\n")
        }
        let namespace = query["namespace"] ?? state.defaultNamespace
        let timeout = TargetProbe.timeout(header: request.headers[Self.scrapeTimeout])
        let started = ContinuousClock.now
        let update: PathUpdate
        do {
            update = try await targetProbe.update(to: target, namespace: namespace, timeout: timeout)
        } catch {
            switch error {
            case .unknownNamespace(let name):
                throw PlainTextError(.notFound, "no namespace \(PathJSON.string(name)) is watched\n")
            case .busy:
                throw PlainTextError(.serviceUnavailable, "\(targetProbe.limit) probes are running; try again\n")
            }
        }
        let text = TargetProbe.exposition(
            of: update, target: target, namespace: namespace, duration: ContinuousClock.now - started)
        return .text(.ok, text, contentType: MetricsExposition.contentType)
    }

    private static let scrapeTimeout = HTTPField.Name("X-Prometheus-Scrape-Timeout-Seconds")!

    /// `/api/v1/connectivity`: the verdict as `check --json` prints it, with `--internet`.
    @Sendable func connectivity(
        _ request: Request, context: ServeRequestContext
    ) throws(PlainTextError) -> Response {
        _ = try Self.query(of: request, allowing: [])
        guard state.judgesConnectivity else {
            throw PlainTextError(.notFound, "no probe is configured: serve --internet --probe URL\n")
        }
        guard let verdict = state.verdict(namespace: state.defaultNamespace) else {
            throw PlainTextError(.serviceUnavailable, "the internet has not been judged yet\n")
        }
        return .text(.ok, ConnectivityJSON.line(verdict, at: Date()) + "\n", contentType: "application/json")
    }

    /// `/api/v1/events`: Server-Sent Events until the client leaves, is dropped, or the server stops.
    @Sendable func events(_ request: Request, context: ServeRequestContext) throws(PlainTextError) -> Response {
        _ = try Self.query(of: request, allowing: [])
        let lastEventID = request.headers[Self.lastEventID].flatMap { UInt64($0) }
        let hub = state.hub
        let channel = context.channel
        var headers: HTTPFields = [.contentType: "text/event-stream", .cacheControl: "no-cache"]
        // nginx and other proxies would otherwise hold events back to fill their buffers.
        headers[Self.accelBuffering] = "no"
        // HEAD: the header fields alone; no subscription, and the socket left as it is.
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

    private static let lastEventID = HTTPField.Name("Last-Event-ID")!
    private static let accelBuffering = HTTPField.Name("X-Accel-Buffering")!

    /// An event stream's socket send buffer (the kernel doubles it): ~150 events of 450 bytes.
    static let eventSendBuffer: SocketOptionValue = 32_768

    /// `/livez`: the server answers.
    @Sendable func live(_ request: Request, context: ServeRequestContext) throws(PlainTextError) -> Response {
        _ = try Self.query(of: request, allowing: [])
        return .text(.ok, "ok\n")
    }

    /// `/readyz[?verbose]`: every path read, and `--ready-when`'s condition; `?verbose` lists the checks.
    @Sendable func ready(_ request: Request, context: ServeRequestContext) throws(PlainTextError) -> Response {
        let query = try Self.query(of: request, allowing: ["verbose"])
        let checks = Health.readiness(
            paths: state.paths, keys: state.keys, condition: state.readyWhen,
            verdict: state.verdict(namespace: state.defaultNamespace), namespaceProblems: state.namespaceProblems)
        return .text(
            checks.allSatisfy(\.passed) ? .ok : .serviceUnavailable,
            Health.readinessText(checks, verbose: query["verbose"] != nil))
    }

    /// `/health`: Consul's check (200 passing, 429 warning, 503 critical).
    @Sendable func health(_ request: Request, context: ServeRequestContext) throws(PlainTextError) -> Response {
        _ = try Self.query(of: request, allowing: [])
        let verdict = Health.health(
            paths: state.paths, keys: state.keys, verdict: state.verdict(namespace: state.defaultNamespace),
            judges: state.judgesConnectivity)
        switch verdict {
        case .passing: return .text(.ok, "passing\n")
        case .warning(let reason): return .text(.init(code: verdict.statusCode), "warning: \(reason)\n")
        case .critical(let reason): return .text(.init(code: verdict.statusCode), "critical: \(reason)\n")
        }
    }

    /// `POST /-/reload`: reads the configuration again, as SIGHUP does, with `--enable-lifecycle`.
    @Sendable func reloadConfiguration(
        _ request: Request, context: ServeRequestContext
    ) async throws(PlainTextError) -> Response {
        _ = try Self.query(of: request, allowing: [])
        guard let reload else {
            throw PlainTextError(.forbidden, "the lifecycle API is not enabled: serve --enable-lifecycle\n")
        }
        switch await reload() {
        case .success: return .text(.ok, "reloaded\n")
        case .failure(let failure):
            throw PlainTextError(
                .internalServerError, "not reloaded, the running configuration is kept: \(failure)\n")
        }
    }

    /// The request's query, refused with a `400` that says why when it is not one `allowed` takes.
    private static func query(
        of request: Request, allowing allowed: Set<String>
    ) throws(PlainTextError) -> QueryParameters {
        do {
            return try QueryParameters(parsing: request.uri.query, allowed: allowed)
        } catch {
            throw PlainTextError(.badRequest, "\(error)\n")
        }
    }
}

extension Response {
    /// A `text/plain` answer (or `contentType`), its `Content-Length` from `body`.
    static func text(
        _ status: HTTPResponse.Status, _ body: String, contentType: String = "text/plain; charset=utf-8"
    ) -> Response {
        Response(
            status: status, headers: [.contentType: contentType],
            body: ResponseBody(byteBuffer: ByteBuffer(string: body)))
    }
}
