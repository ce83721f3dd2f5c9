import Foundation
import HTTPTypes

/// Sends one HTTP request and returns the whole response: the only thing ``NetworkService`` needs
/// from an HTTP client. Waiting, retries, policies and errors that explain themselves live in the
/// service; a transport stays small and swappable.
///
/// NetReach ships two: `URLSessionTransport` (FoundationNetworking, in this module) and
/// `AsyncHTTPClientTransport` (product `NetReachAsyncHTTPClient`). Both pass the same conformance
/// suite.
///
/// A conforming type must:
/// - send `request` (method, scheme, authority, path with query, header fields) and `body` once;
///   it never retries by itself;
/// - give up after `options.timeout` with ``TransportError/Kind/timedOut`` (or
///   ``TransportError/Kind/connectTimeout`` if no connection was made);
/// - stop and throw ``TransportError/Kind/cancelled`` promptly when its task is cancelled;
/// - classify failures honestly: a request that may have reached the server must never be reported
///   with a kind whose ``TransportError/requestWasProvablyNotSent`` is `true`.
public protocol HTTPTransport: Sendable {
    /// Sends `request` with `body` and returns the response head and its whole body.
    func send(_ request: HTTPRequest, body: Data?, options: TransportOptions) async throws(TransportError) -> (HTTPResponse, Data)
}

/// Per-request settings a transport honours.
public struct TransportOptions: Sendable {
    /// The longest the request may take, from start to the last byte of the response.
    public var timeout: Duration
    /// Called as response body bytes arrive: bytes so far, and the expected total if known.
    /// Calls never overlap, the counts never go down, and the last call carries the final count.
    public var progress: (@Sendable (_ received: Int64, _ expected: Int64?) -> Void)?

    /// Creates options.
    public init(timeout: Duration = .seconds(60), progress: (@Sendable (Int64, Int64?) -> Void)? = nil) {
        self.timeout = timeout
        self.progress = progress
    }
}

/// Why a transport could not produce a response, classified so that the retry policy can tell a
/// request that never left from one that may have reached the server.
public struct TransportError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong.
    public enum Kind: String, Sendable, Hashable, Codable {
        /// Nothing accepted the connection (refused, host or network unreachable). Provably unsent.
        case cannotConnect
        /// The host name did not resolve. Provably unsent.
        case dnsFailure
        /// No connection was established within the timeout. Provably unsent.
        case connectTimeout
        /// The connection broke after the request may have been sent (reset, closed early).
        case connectionLost
        /// The request was sent, or may have been, and no complete response came in time.
        case timedOut
        /// The server answered with something that is not HTTP.
        case invalidResponse
        /// The request's URL or headers cannot be sent (unsupported scheme, bad header).
        case invalidRequest
        /// The task was cancelled.
        case cancelled
        /// Anything else; `detail` says what.
        case other
    }

    /// What went wrong.
    public var kind: Kind
    /// What the underlying client said, for people.
    public var detail: String

    /// Creates a transport error.
    public init(_ kind: Kind, _ detail: String) {
        self.kind = kind
        self.detail = detail
    }

    /// `true` only when the request cannot have reached the server, so even a POST may be repeated.
    public var requestWasProvablyNotSent: Bool {
        switch kind {
        case .cannotConnect, .dnsFailure, .connectTimeout, .invalidRequest: true
        default: false
        }
    }

    /// The kind, then the transport's own detail: `cannotConnect: connection refused`.
    public var description: String { "\(kind): \(detail)" }
}
