import Foundation
import HTTPTypes

/// What `NetworkService.send` does per request to turn a `Request` into the head it hands the
/// transport, repeated outside the library (that code is internal) so it can be timed on its own
/// and added to a bare transport's requests. Copied from the library at `ce854e0`; since `ResolvedTarget`
/// replaced them (one URL parse per request), these are the old steps, kept to show what changed.
enum ServiceSteps {
    /// `Request.url(relativeTo:)` for a path target without query items.
    static func resolveURL(_ path: String, relativeTo baseURL: URL) -> URL? {
        guard let resolved = URL(string: path, relativeTo: baseURL)?.absoluteURL,
              let components = URLComponents(url: resolved, resolvingAgainstBaseURL: true),
              let scheme = components.scheme?.lowercased(), scheme == "http" || scheme == "https",
              components.host?.isEmpty == false else { return nil }
        return components.url
    }

    /// `NetworkService.makeHead` for a GET without header fields or idempotency key.
    static func makeHead(url: URL) -> HTTPRequest {
        let components = URLComponents(url: url, resolvingAgainstBaseURL: true)
        let host = components?.host ?? ""
        let bracketed = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        let authority = components?.port.map { "\(bracketed):\($0)" } ?? bracketed
        var path = components?.percentEncodedPath ?? "/"
        if path.isEmpty { path = "/" }
        if let query = components?.percentEncodedQuery { path += "?\(query)" }
        return HTTPRequest(method: .get, scheme: components?.scheme, authority: authority, path: path, headerFields: [:])
    }
}
