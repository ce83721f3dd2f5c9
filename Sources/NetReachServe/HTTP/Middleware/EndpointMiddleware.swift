import HTTPTypes
import Hummingbird

/// Holds requests to serve's endpoints, exactly: a path that is not one is `404`, and an endpoint
/// asked with a method it does not take is `405` with `Allow` (RFC 9110, 15.5.6), before the
/// router looks for a handler.
///
/// Hummingbird's router answers both with an empty `404`, and matches a path with a trailing or
/// doubled slash (`/metrics/`, `//metrics`) to the endpoint without it. serve's paths are exact,
/// as they always were and as node_exporter's are: a scrape configured with another path fails
/// loudly rather than working by accident. A path is compared as sent, not percent-decoded.
///
/// ```swift
/// router.add(middleware: EndpointMiddleware(endpoints: ["/metrics": [.get, .head]]))
/// ```
struct EndpointMiddleware: RouterMiddleware {
    typealias Context = ServeRequestContext

    /// Path → the methods it answers, in the order `Allow` lists them.
    let endpoints: [String: [HTTPRequest.Method]]

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        let path = request.uri.path
        guard let methods = endpoints[path] else {
            throw PlainTextError(.notFound, "no such endpoint: \(path)\n")
        }
        guard methods.contains(request.method) else {
            let allowed = methods.map(\.rawValue)
            throw PlainTextError(
                .methodNotAllowed, "\(path) only answers \(allowed.joined(separator: " and "))\n",
                headers: [.allow: allowed.joined(separator: ", ")])
        }
        return try await next(request, context)
    }
}
