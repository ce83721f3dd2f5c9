import HTTPTypes
import Hummingbird

/// `--web.config.file`'s `http_server_config.headers` on every answer serve gives, refusals
/// included (a `401`, a `404`), as exporter-toolkit sets them; each replaces a field of the same
/// name. Outermost of serve's middleware, so it sees every answer: the errors thrown below it are
/// made into their responses here rather than by the router.
///
/// ```swift
/// router.add(middleware: WebHeadersMiddleware(web: web))
/// ```
struct WebHeadersMiddleware: RouterMiddleware {
    typealias Context = ServeRequestContext

    /// The headers in force now: a reload may change them between two requests.
    let web: WebSecurity

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        var response: Response
        do {
            response = try await next(request, context)
        } catch let error as any HTTPResponseError {
            response = try error.response(from: request, context: context)
        }
        for field in web.headers { response.headers[field.name] = field.value }
        return response
    }
}
