import HTTPTypes
import Hummingbird

/// An answer other than the one asked for, in plain text: what serve's handlers and middleware
/// throw (a path not watched, a bad query, a missing password), and Hummingbird's router turns
/// into the response. Hummingbird's own `HTTPError` would answer in JSON; serve's errors have
/// always been a sentence a person reads with curl.
///
/// ```swift
/// throw PlainTextError(.notFound, "no namespace \"blue\" is watched\n")
/// throw PlainTextError(.methodNotAllowed, "/metrics only answers GET and HEAD\n", headers: [.allow: "GET, HEAD"])
/// ```
package struct PlainTextError: HTTPResponseError, Equatable {
    package var status: HTTPResponse.Status
    /// The body: a sentence and a newline.
    package var message: String
    /// Fields after `Content-Type` and `Content-Length` (`Allow`, `WWW-Authenticate`, `Retry-After`).
    package var headers: HTTPFields

    package init(_ status: HTTPResponse.Status, _ message: String, headers: HTTPFields = [:]) {
        self.status = status
        self.message = message
        self.headers = headers
    }

    package func response(from request: Request, context: some RequestContext) -> Response {
        var response = Response.text(status, message)
        response.headers.append(contentsOf: headers)
        return response
    }
}
