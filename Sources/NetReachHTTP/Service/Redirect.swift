import HTTPTypes
import NetReachSystem

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Whether and how far ``NetworkService`` follows redirects. The service follows them itself (its
/// transports never do), so both transports behave the same.
///
/// ```swift
/// var policy = RequestPolicy()
/// policy.redirects = .follow(limit: 5)               // the default is 10
/// let raw = Request.get("/short/abc").with { $0.redirects = .never }   // see the 301 itself
/// ```
public enum RedirectPolicy: Sendable, Hashable {
    /// A 3xx is a response like any other, judged by the acceptable statuses.
    case never
    /// Follows 301, 302, 303, 307 and 308 up to `limit` hops (more is
    /// ``NetworkError/redirectRefused(_:location:)``); from https to http only when
    /// `allowsHTTPSToHTTP`.
    case follow(limit: Int = 10, allowsHTTPSToHTTP: Bool = false)
}

/// How a redirect changes the request (RFC 9110 §15.4, and what browsers and curl do):
///
/// - 301 and 302 turn a POST into a GET without a body (every client does); other methods stay.
/// - 303 turns every method but HEAD into a GET without a body.
/// - 307 and 308 keep the method and the body (sent again).
/// - When the origin (scheme, host or port) changes, `Authorization`, `Cookie` and
///   `Proxy-Authorization` are dropped: credentials never follow a redirect to someone else.
enum Redirect {
    /// One hop: the next request's head, and whether it carries the body again.
    struct Hop {
        var url: URL
        var head: HTTPRequest
        var keepsBody: Bool
        var changesOrigin: Bool
    }

    /// Fields that describe a body, dropped when the body is.
    private static let bodyFields: [HTTPField.Name] = [
        .contentType, .contentLength, .contentEncoding, .contentLanguage, .contentLocation,
    ]
    /// Fields that carry credentials, dropped when the origin changes.
    private static let credentialFields: [HTTPField.Name] = [.authorization, .cookie, .proxyAuthorization]

    /// The hop for a `status` response with `location`, from the request `head` sent to `url`;
    /// `nil` when the status is not a redirect or the location is not an http(s) URL that can be sent.
    static func hop(status: Int, location: String, from url: URL, head: HTTPRequest) -> Hop? {
        guard [301, 302, 303, 307, 308].contains(status),
            let next = URL(string: location.trimmingSpaces(), relativeTo: url)?.absoluteURL,
            let target = ResolvedTarget.resolve(.url(next), queryItems: [], base: nil)
        else { return nil }
        var method = head.method
        var keepsBody = true
        if (status == 303 && method != .head) || ((status == 301 || status == 302) && method == .post) {
            method = .get
            keepsBody = false
        }
        var fields = head.headerFields
        if !keepsBody { for name in bodyFields { fields[name] = nil } }
        let changesOrigin = origin(of: url) != origin(of: target.url)
        if changesOrigin { for name in credentialFields { fields[name] = nil } }
        // Credentials in the new URL itself (user:password@) are its own to send.
        if let credentials = target.credentials {
            let token = Data("\(credentials.user):\(credentials.password)".utf8).base64EncodedString()
            fields[.authorization] = "Basic \(token)"
        }
        let nextHead = HTTPRequest(
            method: method, scheme: target.scheme, authority: target.authority,
            path: target.pathAndQuery, headerFields: fields)
        return Hop(url: target.url, head: nextHead, keepsBody: keepsBody, changesOrigin: changesOrigin)
    }

    /// Scheme, host and port (the default port spelled out), lowercased.
    static func origin(of url: URL) -> String {
        let scheme = url.scheme?.lowercased() ?? ""
        let port = url.port ?? (scheme == "https" ? 443 : 80)
        return "\(scheme)://\((url.host ?? "").lowercased()):\(port)"
    }
}
