import HTTPTypes
import OpenAPIRuntime

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One HTTP request for a ``NetworkService``: method, target, query, headers, body, and policy
/// overrides for this request alone.
///
/// ```swift
/// var request = Request.get("/v1/items", query: ["page": "2"])
/// request.headerFields[.accept] = "application/json"
///
/// let order = try Request.post("/v1/orders", json: NewOrder(sku: "A1"))
///     .withIdempotencyKey()          // generated once; the same on every attempt
/// ```
public struct Request: Sendable {
    /// Where the request goes.
    public enum Target: Sendable, Hashable {
        /// A path (and optional query) resolved against the service's base URL.
        case path(String)
        /// An absolute URL; the base URL is not used.
        case url(URL)
    }

    /// The HTTP method.
    public var method: HTTPRequest.Method
    /// Where the request goes.
    public var target: Target
    /// Query items appended to the target's own query (which is sent as written), in order. Names and
    /// values are percent-encoded except for unreserved characters and `!$'()*,;:@/?`; `&`, `=` and
    /// `+` are encoded too, so `["q": "1+1=2"]` reaches the server as `q=1%2B1%3D2`.
    public var queryItems: [URLQueryItem]
    /// Header fields; they override the service's default headers of the same name.
    public var headerFields: HTTPFields
    /// The body, if any. One made from bytes (`Data`, a string) can be sent again on a retry or a
    /// 307/308 redirect; a single-pass stream (`HTTPBody` from an `AsyncStream`) is sent at most
    /// once: a failure after it started is not retried.
    public var body: HTTPBody?
    /// The `Idempotency-Key` sent with every attempt; with one, a POST or PATCH may be retried after
    /// a failure that could have reached the server (the server promises to apply it once).
    public var idempotencyKey: String?
    /// Policy changes for this request alone.
    public var policyOverrides: RequestPolicy.Overrides

    /// Creates a request.
    public init(
        method: HTTPRequest.Method, target: Target, queryItems: [URLQueryItem] = [],
        headerFields: HTTPFields = [:], body: HTTPBody? = nil, idempotencyKey: String? = nil,
        policyOverrides: RequestPolicy.Overrides = .init()
    ) {
        self.method = method
        self.target = target
        self.queryItems = queryItems
        self.headerFields = headerFields
        self.body = body
        self.idempotencyKey = idempotencyKey
        self.policyOverrides = policyOverrides
    }

    /// Creates a request for a path relative to the service's base URL, or for an absolute
    /// `http://` or `https://` URL given as text (`.get("https://example.com/x")`).
    public init(
        _ method: HTTPRequest.Method, _ path: String, query: KeyValuePairs<String, String> = [:], body: Data? = nil
    ) {
        self.init(
            method: method, target: Self.target(path),
            queryItems: query.map { URLQueryItem(name: $0.key, value: $0.value) },
            body: body.map { HTTPBody($0) })
    }

    /// `.url` for an absolute http(s) URL, `.path` for anything else.
    private static func target(_ text: String) -> Target {
        let lowercased = text.prefix(8).lowercased()
        if lowercased.hasPrefix("http://") || lowercased.hasPrefix("https://"), let url = URL(string: text) {
            return .url(url)
        }
        return .path(text)
    }

    /// Creates a request whose body is `value` encoded as JSON with `encoder`
    /// (`Content-Type: application/json`). Throws the encoder's `EncodingError`.
    public init<Body: Encodable>(
        _ method: HTTPRequest.Method, _ path: String, json value: Body, encoder: JSONEncoder = JSONEncoder()
    ) throws {
        self.init(method, path, body: try encoder.encode(value))
        headerFields[.contentType] = "application/json"
    }

    /// `GET path`.
    public static func get(_ path: String, query: KeyValuePairs<String, String> = [:]) -> Request {
        Request(.get, path, query: query)
    }
    /// `HEAD path`.
    public static func head(_ path: String) -> Request { Request(.head, path) }
    /// `DELETE path`.
    public static func delete(_ path: String) -> Request { Request(.delete, path) }
    /// `POST path` with a raw body.
    public static func post(_ path: String, body: Data? = nil) -> Request { Request(.post, path, body: body) }
    /// `POST path` with a JSON body.
    public static func post<Body: Encodable>(
        _ path: String, json value: Body, encoder: JSONEncoder = JSONEncoder()
    ) throws -> Request {
        try Request(.post, path, json: value, encoder: encoder)
    }
    /// `PUT path` with a raw body.
    public static func put(_ path: String, body: Data? = nil) -> Request { Request(.put, path, body: body) }
    /// `PATCH path` with a raw body.
    public static func patch(_ path: String, body: Data? = nil) -> Request { Request(.patch, path, body: body) }

    /// This request with an `Idempotency-Key`: by default a new UUID, made here once, so every
    /// attempt carries the same key.
    public func withIdempotencyKey(_ key: String = UUID().uuidString) -> Request {
        var copy = self
        copy.idempotencyKey = key
        return copy
    }

    /// This request with some policy changed for it alone.
    ///
    /// ```swift
    /// let upload = Request.put("/backup", body: data).with { $0.allowsExpensiveNetworkAccess = false }
    /// ```
    public func with(_ change: (inout RequestPolicy.Overrides) -> Void) -> Request {
        var copy = self
        change(&copy.policyOverrides)
        return copy
    }

    /// Whether repeating the request cannot change the outcome (RFC 9110 §9.2.2): GET, HEAD,
    /// OPTIONS, PUT, DELETE, TRACE.
    public var isIdempotent: Bool {
        [HTTPRequest.Method.get, .head, .options, .put, .delete, .trace].contains(method)
    }
}
