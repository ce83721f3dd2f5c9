import HTTPTypes
import Hummingbird

/// `--web.config.file`'s `basic_auth_users`: every request but the open health checks needs a
/// known user's password (`401` with `WWW-Authenticate` without one), checked before the
/// request is routed, so that a stranger learns nothing of which paths exist. bcrypt's one
/// thread too busy to check in time is `503` with `Retry-After`.
///
/// `/livez`, and `/readyz` without a query, answer without credentials: a word each, for the
/// kubelet and systemd, which cannot send a password (Kubernetes's API server leaves its own
/// open the same way). `/readyz?verbose` names namespaces and destinations: behind the password.
///
/// ```swift
/// router.add(middleware: BasicAuthMiddleware(web: web))
/// ```
struct BasicAuthMiddleware: RouterMiddleware {
    typealias Context = ServeRequestContext

    /// The users in force now: a reload may change them between two requests.
    let web: WebSecurity

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        if Self.isOpenHealthCheck(request) { return try await next(request, context) }
        switch await web.authentication.verdict(authorization: request.headers[.authorization]) {
        case .allowed:
            return try await next(request, context)
        case .denied:
            throw PlainTextError(
                .unauthorized, "Unauthorized\n",
                headers: [.wwwAuthenticate: "Basic realm=\"netreach\", charset=\"UTF-8\""])
        case .busy:
            throw PlainTextError(
                .serviceUnavailable, "too many password checks at once; try again\n", headers: [.retryAfter: "1"])
        }
    }

    /// The path as sent: `/livez/` is no health check (it is not an endpoint either).
    static func isOpenHealthCheck(_ request: Request) -> Bool {
        let path = request.uri.path
        return path == "/livez" || (path == "/readyz" && (request.uri.query ?? "").isEmpty)
    }
}
