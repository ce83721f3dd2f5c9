import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import NetReach

/// Every endpoint of `serve`, routed by path and method: unknown paths are `404`, a known path
/// asked with another method than `GET` or `HEAD` is `405` with `Allow`, a malformed query
/// `400` with the reason. Nothing changes state.
///
/// ```swift
/// let app = Application(responder: ServeResponder(state: state, readyWhen: .started), configuration: ...)
/// ```
package struct ServeResponder: HTTPResponder {
    package typealias Context = ServeRequestContext

    let state: ServeState
    let readyWhen: Health.ReadyCondition
    let processMetrics: @Sendable () -> String

    package init(
        state: ServeState, readyWhen: Health.ReadyCondition,
        processMetrics: @escaping @Sendable () -> String = { ProcessMetrics.read() }
    ) {
        self.state = state
        self.readyWhen = readyWhen
        self.processMetrics = processMetrics
    }

    private enum Endpoint: String, CaseIterable {
        case metrics = "/metrics"
        case path = "/api/v1/path"
        case connectivity = "/api/v1/connectivity"
        case events = "/api/v1/events"
        case livez = "/livez"
        case readyz = "/readyz"
        case health = "/health"

        var parameters: Set<String> {
            switch self {
            case .path: ["to", "namespace"]
            case .readyz: ["verbose"]
            case .metrics, .connectivity, .events, .livez, .health: []
            }
        }
    }

    package func respond(to request: Request, context: Context) async throws -> Response {
        guard let endpoint = Endpoint(rawValue: request.uri.path) else {
            return Self.text(.notFound, "no such endpoint: \(request.uri.path)\n")
        }
        guard request.method == .get || request.method == .head else {
            var response = Self.text(.methodNotAllowed, "\(request.uri.path) only answers GET and HEAD\n")
            response.headers[.allow] = "GET, HEAD"
            return response
        }
        let query: QueryParameters
        do {
            query = try QueryParameters(parsing: request.uri.query, allowed: endpoint.parameters)
        } catch {
            return Self.text(.badRequest, "\(error)\n")
        }
        var response = respond(to: endpoint, query: query, request: request, context: context)
        if request.method == .head { response.body = ResponseBody() }
        return response
    }

    private func respond(to endpoint: Endpoint, query: QueryParameters, request: Request, context: Context) -> Response
    {
        switch endpoint {
        case .metrics:
            state.recordEventClients()
            let text = MetricsExposition.render(state.registry, process: processMetrics())
            return Self.text(.ok, text, contentType: MetricsExposition.contentType)
        case .path:
            return path(query)
        case .connectivity:
            guard let render = state.renderVerdict else {
                return Self.text(.notFound, "no probe is configured: serve --internet --probe URL\n")
            }
            guard let verdict = state.verdict(namespace: state.keys.first?.namespace ?? "") else {
                return Self.text(.serviceUnavailable, "the internet has not been judged yet\n")
            }
            return Self.text(.ok, render(verdict) + "\n", contentType: "application/json")
        case .events:
            return events(request: request, context: context)
        case .livez:
            return Self.text(.ok, "ok\n")
        case .readyz:
            let checks = Health.readiness(
                paths: state.paths, keys: state.keys, condition: readyWhen,
                verdict: state.verdict(namespace: state.keys.first?.namespace ?? ""))
            let ready = checks.allSatisfy(\.passed)
            return Self.text(
                ready ? .ok : .serviceUnavailable, Health.readinessText(checks, verbose: query["verbose"] != nil))
        case .health:
            let verdict = Health.health(
                paths: state.paths, keys: state.keys,
                verdict: state.verdict(namespace: state.keys.first?.namespace ?? ""),
                judges: state.renderVerdict != nil)
            switch verdict {
            case .passing: return Self.text(.ok, "passing\n")
            case .warning(let reason): return Self.text(.init(code: verdict.statusCode), "warning: \(reason)\n")
            case .critical(let reason): return Self.text(.init(code: verdict.statusCode), "critical: \(reason)\n")
            }
        }
    }

    /// `/api/v1/path[?to=NAME][&namespace=NS]`: the path as `status --json` prints it.
    private func path(_ query: QueryParameters) -> Response {
        let namespace = query["namespace"] ?? state.keys.first?.namespace ?? ""
        let key = PathKey(namespace: namespace, destination: query["to"] ?? "")
        guard state.keys.contains(key) else {
            if !state.keys.contains(where: { $0.namespace == namespace }) {
                return Self.text(.notFound, "no namespace \(ServeState.jsonString(namespace)) is watched\n")
            }
            return Self.text(
                .notFound,
                "no destination named \(ServeState.jsonString(key.destination)) is watched (serve --to NAME=DEST)\n")
        }
        guard let path = state.path(for: key) else {
            return Self.text(.serviceUnavailable, "the path \(key) has not been read yet\n")
        }
        return Self.text(.ok, state.renderPath(path) + "\n", contentType: "application/json")
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
        return Response(
            status: .ok, headers: headers,
            body: ResponseBody { writer in
                let subscription = hub.subscribe(lastEventID: lastEventID, onDrop: { channel.close(promise: nil) })
                defer { subscription.cancel() }
                for await chunk in subscription.chunks {
                    try await writer.write(ByteBuffer(string: chunk))
                }
                try await writer.finish(nil)
            })
    }

    private static func text(
        _ status: HTTPResponse.Status, _ body: String, contentType: String = "text/plain; charset=utf-8"
    ) -> Response {
        Response(
            status: status, headers: [.contentType: contentType],
            body: ResponseBody(byteBuffer: ByteBuffer(string: body)))
    }
}
