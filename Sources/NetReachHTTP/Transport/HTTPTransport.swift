import HTTPTypes
import OpenAPIRuntime

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Sends one HTTP request and hands back the response as it arrives: the only thing
/// ``NetworkService`` needs from an HTTP client. Waiting, retries, redirects, resuming and errors
/// that explain themselves live in the service; a transport stays small and swappable.
///
/// Bodies are `HTTPBody` (swift-openapi-runtime's streaming body, the one swift-openapi's transports
/// use), in both directions and with backpressure: a transport pulls request chunks only as fast
/// as it can send them, and reads the response only as fast as its consumer takes chunks, so a
/// transfer of any size runs in constant memory.
///
/// NetReach ships two: `URLSessionTransport` (FoundationNetworking, in this module) and
/// `AsyncHTTPClientTransport` (product `NetReachAsyncHTTPClient`). Both pass the same conformance
/// suite.
///
/// A conforming type must:
/// - send `request` (method, scheme, authority, path with query, header fields) and `body` once;
///   it never retries and never follows a redirect by itself (a 3xx is a response);
/// - return as soon as the response head has arrived, with a body that streams the rest; reading
///   the body to its end, or dropping it, ends the transfer (dropping it closes the connection);
/// - throw, from `send` or from the body's iterator, only ``TransportError``: when no byte was sent
///   or received for ``TransportOptions/stallTimeout`` (``TransportError/Kind/timedOut``, or
///   ``TransportError/Kind/connectTimeout`` if no connection was made), when
///   ``TransportOptions/deadline`` passes, when the connection breaks, or when the task is cancelled
///   (``TransportError/Kind/cancelled``, promptly);
/// - classify failures honestly: a request that may have reached the server must never be reported
///   with a kind whose ``TransportError/requestWasProvablyNotSent`` is `true`.
///
/// ```swift
/// let transport: any HTTPTransport = URLSessionTransport()
/// let head = HTTPRequest(method: .get, scheme: "http", authority: "127.0.0.1:8080", path: "/log")
/// let (response, body) = try await transport.send(head, body: nil, options: TransportOptions())
/// for try await chunk in body { print(response.status, chunk.count) }
/// ```
public protocol HTTPTransport: Sendable {
    /// Sends `request` with `body`; returns the response head once it has arrived, and its body
    /// as a single-pass stream.
    func send(
        _ request: HTTPRequest, body: HTTPBody?, options: TransportOptions
    ) async throws(TransportError) -> (HTTPResponse, HTTPBody)
}

/// Per-request settings a transport honours.
///
/// ```swift
/// var options = TransportOptions(stallTimeout: .seconds(30))
/// options.deadline = .now + .seconds(600)     // the whole transfer, to its last byte
/// ```
public struct TransportOptions: Sendable {
    /// The longest the transfer may go without a byte sent or received (URLSession's
    /// `timeoutIntervalForRequest`): waiting for the response head counts, a body that keeps
    /// flowing is never cut. Time a consumer spends not reading does not count.
    public var stallTimeout: Duration
    /// When the whole transfer must be over, to the last byte of the body; `nil` for no limit.
    public var deadline: ContinuousClock.Instant?

    /// Creates options.
    public init(stallTimeout: Duration = .seconds(60), deadline: ContinuousClock.Instant? = nil) {
        self.stallTimeout = stallTimeout
        self.deadline = deadline
    }
}

/// Why a transport could not produce a response, classified so that the retry policy can tell a
/// request that never left from one that may have reached the server.
public struct TransportError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong.
    public enum Kind: String, Sendable, Hashable, Codable, CaseIterable {
        /// Nothing accepted the connection (refused, host or network unreachable). Provably unsent.
        case cannotConnect
        /// The host name could not be looked up now (no answer from the resolver, a server
        /// failure: `EAI_AGAIN`); another try may succeed. Provably unsent.
        case dnsFailure
        /// The host name does not exist (NXDOMAIN) or has no address: asking again will not change
        /// that, so the default retry policy does not. Provably unsent.
        case hostNotFound
        /// The proxy could not be used: its name did not resolve, nothing accepted a connection to
        /// it, or it refused to open a tunnel (such as `407 Proxy Authentication Required`).
        /// `detail` names the proxy. Provably unsent.
        case proxyFailure
        /// No connection was established within the timeout. Provably unsent.
        case connectTimeout
        /// The connection broke after the request may have been sent (reset, closed early).
        case connectionLost
        /// The response head came, then the connection closed (FIN) before the whole body: fewer
        /// bytes than `Content-Length`, a chunked body without its last chunk, or an unframed
        /// body whose gzip or deflate stream had not ended (curl's "partial file", its exit status
        /// 18). What arrived was handed over first. A reset mid-body is ``connectionLost``.
        case partialBody
        /// The request was sent, or may have been, and the transfer stalled or ran past its deadline.
        case timedOut
        /// The server answered with something that is not HTTP.
        case invalidResponse
        /// The response's `Content-Encoding` could not be decoded: the body is corrupt or not what
        /// the header says, or it names a coding this transport does not decode (such as `br` or
        /// `zstd` sent unasked), which is never handed over as if it were decoded.
        case badContentEncoding
        /// The request's URL or headers cannot be sent (unsupported scheme, bad header).
        case invalidRequest
        /// The TLS handshake failed: the server's certificate is not trusted, has expired or names
        /// another host, no protocol version or cipher is shared, or the server refused the client
        /// certificate. `detail` names the host and the reason in one line. Provably unsent: no
        /// byte of the request is sent before the handshake completes.
        case tlsFailure
        /// The response body, decoded from `Content-Encoding: gzip` or `deflate`, grew past
        /// ``TransportSettings/maximumDecodedBodySize`` (a decompression bomb, or a body larger than
        /// allowed); the transfer was stopped there.
        case decodedBodyTooLarge
        /// The task was cancelled.
        case cancelled
        /// Anything else; `detail` says what.
        case other
    }

    /// What went wrong.
    public var kind: Kind
    /// What the underlying client said, for people.
    public var detail: String
    /// Why the handshake failed, for ``Kind/tlsFailure`` (`nil` for every other kind).
    public var tlsFailureReason: TLSFailureReason?

    /// Creates a transport error.
    public init(_ kind: Kind, _ detail: String) {
        self.kind = kind
        self.detail = detail
    }

    /// A ``Kind/tlsFailure`` with `host` and `reason` in its detail:
    /// `TLS handshake with example.com failed: the server's certificate has expired`.
    ///
    /// ```swift
    /// let error = TransportError(tlsFailure: .expired, host: "example.com")
    /// ```
    public init(tlsFailure reason: TLSFailureReason, host: String) {
        self.kind = .tlsFailure
        self.detail = "TLS handshake with \(host) failed: \(reason.description)"
        self.tlsFailureReason = reason
    }

    /// `true` only when the request cannot have reached the server, so even a POST may be repeated.
    public var requestWasProvablyNotSent: Bool {
        switch kind {
        case .cannotConnect, .dnsFailure, .hostNotFound, .proxyFailure, .connectTimeout, .invalidRequest, .tlsFailure:
            true
        default: false
        }
    }

    /// The kind, then the transport's own detail: `cannotConnect: connection refused`.
    public var description: String { "\(kind): \(detail)" }
}

extension HTTPRequest {
    /// What a transport puts on the wire as the request's URL: its scheme, authority and path
    /// (`/` when it has none), or ``TransportError/Kind/invalidRequest`` when it lacks a scheme or
    /// an authority, before anything is sent.
    ///
    /// ```swift
    /// let (scheme, authority, path) = try request.target()
    /// let url = "\(scheme)://\(authority)\(path)"
    /// ```
    package func target() throws(TransportError) -> (scheme: String, authority: String, path: String) {
        guard let scheme, let authority else {
            throw TransportError(.invalidRequest, "request has no scheme or authority: \(self)")
        }
        return (scheme, authority, path ?? "/")
    }

    /// What a transport sends as `Host` (and HTTP/2's `:authority`): the authority without user
    /// info and without an IPv6 zone, so `[fe80::1%25eth0]:8080` is sent as `[fe80::1]:8080`.
    /// A zone names an interface of this host only: RFC 6874 and RFC 9110 §7.2 say it is never
    /// sent, and sending it tells the server the interface's name. `nil` without an authority.
    ///
    /// ```swift
    /// var request = HTTPRequest(method: .get, scheme: "http", authority: "[fe80::1%25eth0]:8080", path: "/")
    /// request.hostField   // "[fe80::1]:8080"
    /// ```
    package var hostField: String? {
        guard let (hostPort, zone) = hostPortAndZone else { return nil }
        guard let zone else { return String(hostPort) }
        return String(hostPort[..<zone.lowerBound] + hostPort[zone.upperBound...])
    }

    /// Whether the authority is an IPv6 literal with a zone (`[fe80::1%25eth0]`).
    package var hasIPv6Zone: Bool { hostPortAndZone?.zone != nil }

    /// The authority without user info, and where in it a zone (`%25eth0`) stands, if any.
    private var hostPortAndZone: (hostPort: Substring, zone: Range<Substring.Index>?)? {
        guard let authority else { return nil }
        var hostPort = Substring(authority)
        if let at = hostPort.lastIndex(of: "@") { hostPort = hostPort[hostPort.index(after: at)...] }
        guard hostPort.hasPrefix("["), let close = hostPort.firstIndex(of: "]"),
            let percent = hostPort[..<close].firstIndex(of: "%")
        else { return (hostPort, nil) }
        return (hostPort, percent..<close)
    }
}
