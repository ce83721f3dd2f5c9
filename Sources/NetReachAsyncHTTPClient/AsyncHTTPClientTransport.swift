import AsyncHTTPClient
import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import NetReachHTTP

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An ``NetReachHTTP/HTTPTransport`` that sends requests with AsyncHTTPClient (SwiftNIO).
///
/// On Linux it is the cheaper transport (on loopback here, about half of URLSession's CPU per
/// request one at a time and a third at 32 in flight; Benchmarks/RESULTS.md, section 7), so
/// `netreach get` uses it by default.
///
/// ```swift
/// let transport = AsyncHTTPClientTransport()
/// let request = HTTPRequest(method: .get, scheme: "https", authority: "example.com", path: "/status")
/// let (response, body) = try await transport.send(request, body: nil, options: TransportOptions(timeout: .seconds(5)))
/// print(response.status, body.count)
/// ```
///
/// Failures are classified from AsyncHTTPClient's and SwiftNIO's errors: a refused connection or
/// a failed DNS lookup is provably unsent; a reset, an early close or a timeout after the
/// connection was up is not.
public struct AsyncHTTPClientTransport: HTTPTransport {
    /// The client every request goes through.
    public let client: HTTPClient

    /// Creates a transport that sends requests through `client`.
    ///
    /// The default is ``defaultClient``. Passing `HTTPClient.shared` works too, but that client
    /// keeps retrying a refused connection until the request's timeout runs out, so "nothing
    /// listening" takes the whole timeout to report.
    ///
    /// ```swift
    /// var configuration = HTTPClient.Configuration()
    /// configuration.connectionPool.retryConnectionEstablishment = false   // report "refused" at once
    /// let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    /// let transport = AsyncHTTPClientTransport(client: client)
    /// // ... send requests ...
    /// try await client.shutdown()
    /// ```
    public init(client: HTTPClient = AsyncHTTPClientTransport.defaultClient) {
        self.client = client
    }

    /// The client used when none is given, created once per process and never shut down.
    ///
    /// It is `HTTPClient.shared`'s configuration except that a connection that cannot be
    /// established fails the waiting requests at once (`retryConnectionEstablishment = false`):
    /// retrying is the caller's retry policy's decision, and a refused connection should say so
    /// in milliseconds, not after the timeout.
    ///
    /// ```swift
    /// let transport = AsyncHTTPClientTransport(client: AsyncHTTPClientTransport.defaultClient)
    /// ```
    public static let defaultClient: HTTPClient = {
        var configuration = HTTPClient.Configuration.singletonConfiguration
        configuration.connectionPool.retryConnectionEstablishment = false
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }()

    /// Sends `request` with `body` and returns the response head and its whole body.
    ///
    /// Statuses are not judged: a 503 is a response like a 200. `options.progress`, if set, is
    /// called for every body chunk as it arrives, the last call carrying the final count.
    ///
    /// ```swift
    /// var request = HTTPRequest(method: .post, scheme: "http", authority: "127.0.0.1:8080", path: "/items")
    /// request.headerFields[.contentType] = "application/json"
    /// let (response, data) = try await AsyncHTTPClientTransport().send(
    ///     request, body: Data(#"{"name":"a"}"#.utf8), options: TransportOptions(timeout: .seconds(10)))
    /// ```
    public func send(
        _ request: HTTPRequest,
        body: Data?,
        options: TransportOptions
    ) async throws(TransportError) -> (HTTPResponse, Data) {
        let clientRequest = try Self.makeClientRequest(request, body: body)
        let client = self.client
        let progress = options.progress
        let timeout = options.timeout
        do {
            return try await withOverallDeadline(timeout) {
                // AHC's deadline covers the wait for the response head (and turns a deadline hit
                // while still waiting for a connection into the connection's own error); the body
                // is bounded by `withOverallDeadline`.
                let response = try await client.execute(clientRequest, timeout: TimeAmount(timeout))
                let head = try Self.makeResponse(response)
                let expected = response.headers.first(name: "content-length").flatMap { Int64($0) }
                var data = Data()
                if let expected, expected > 0 { data.reserveCapacity(Int(min(expected, 64 << 20))) }
                for try await chunk in response.body {
                    data.append(contentsOf: chunk.readableBytesView)
                    progress?(Int64(data.count), expected)
                }
                // A cancelled body stream may simply end; a truncated body must not pass as whole.
                try Task.checkCancellation()
                if data.isEmpty { progress?(0, expected) }
                return (head, data)
            }
        } catch {
            throw Self.classify(error)
        }
    }

    // MARK: Conversions

    private static func makeClientRequest(_ request: HTTPRequest, body: Data?) throws(TransportError) -> HTTPClientRequest {
        guard let scheme = request.scheme, let authority = request.authority else {
            throw TransportError(.invalidRequest, "request has no scheme or authority: \(request)")
        }
        var clientRequest = HTTPClientRequest(url: "\(scheme)://\(authority)\(request.path ?? "/")")
        clientRequest.method = HTTPMethod(rawValue: request.method.rawValue)
        for field in request.headerFields {
            clientRequest.headers.add(name: field.name.rawName, value: field.value)
        }
        if let body {
            clientRequest.body = .bytes(ByteBuffer(bytes: body))
        }
        return clientRequest
    }

    private static func makeResponse(_ response: HTTPClientResponse) throws(TransportError) -> HTTPResponse {
        let code = Int(response.status.code)
        guard (0...999).contains(code) else {
            throw TransportError(.invalidResponse, "status code out of range: \(code)")
        }
        var head = HTTPResponse(status: .init(code: code, reasonPhrase: response.status.reasonPhrase))
        for header in response.headers {
            guard let name = HTTPField.Name(header.name) else { continue }
            head.headerFields.append(HTTPField(name: name, value: header.value))
        }
        return head
    }

    // MARK: Classification

    private static func classify(_ error: any Error) -> TransportError {
        if let error = error as? TransportError {
            return error
        }
        let detail = String(describing: error)
        // While a request waits for a connection, AHC answers cancellation with the last
        // connection error; the caller asked to stop, so say that.
        if error is CancellationError || Task.isCancelled {
            return TransportError(.cancelled, detail)
        }
        switch error {
        case let error as HTTPClientError:
            return TransportError(kind(of: error), detail)
        case let error as IOError:
            return TransportError(kind(ofErrno: error.errnoCode), detail)
        case let error as ChannelError:
            switch error {
            case .connectTimeout: return TransportError(.connectTimeout, detail)
            case .connectPending, .writeHostUnreachable: return TransportError(.cannotConnect, detail)
            case .ioOnClosedChannel, .alreadyClosed, .outputClosed, .inputClosed, .eof:
                return TransportError(.connectionLost, detail)
            default: return TransportError(.other, detail)
            }
        case is HTTPParserError:
            return TransportError(.invalidResponse, detail)
        case is SocketAddressError, is SocketAddressError.UnknownHost:
            return TransportError(.dnsFailure, detail)
        default:
            if let kind = kind(ofConnectionError: error) {
                return TransportError(kind, detail)
            }
            return TransportError(.other, detail)
        }
    }

    private static func kind(of error: HTTPClientError) -> TransportError.Kind {
        switch error {
        case .cancelled:
            return .cancelled
        case .connectTimeout, .getConnectionFromPoolTimeout, .tlsHandshakeTimeout, .socksHandshakeTimeout,
            .httpProxyHandshakeTimeout:
            // The request was still queued: no connection carried it.
            return .connectTimeout
        case .deadlineExceeded, .readTimeout, .writeTimeout:
            // AHC reports a deadline hit before any connection with the connection's error (or
            // `connectTimeout`), but a bare `deadlineExceeded` can also mean "sent, no answer".
            return .timedOut
        case .remoteConnectionClosed, .uncleanShutdown:
            return .connectionLost
        case .invalidURL, .emptyHost, .emptyScheme, .missingSocketPath, .traceRequestWithBody:
            return .invalidRequest
        default:
            // Cases with associated values cannot be matched by `==`; their descriptions name them.
            let description = error.description
            if description.hasPrefix("HTTPClientError.unsupportedScheme")
                || description.hasPrefix("HTTPClientError.invalidHeaderField")
            {
                return .invalidRequest
            }
            return .other
        }
    }

    private static func kind(ofErrno code: CInt) -> TransportError.Kind {
        switch code {
        case ECONNREFUSED, ENETUNREACH, EHOSTUNREACH, EADDRNOTAVAIL:
            // Only `connect(2)` fails with these: nothing was sent.
            return .cannotConnect
        case ETIMEDOUT:
            return .timedOut
        case ECONNRESET, EPIPE, ECONNABORTED:
            return .connectionLost
        default:
            return .other
        }
    }

    /// Classifies NIOPosix's `NIOConnectionError` (what connecting to a host *name* fails with).
    ///
    /// This module depends on NIOCore only, so the type is recognised by name and read through
    /// its stored properties: `dnsAError`/`dnsAAAAError` and `connectionErrors`.
    private static func kind(ofConnectionError error: any Error) -> TransportError.Kind? {
        guard String(reflecting: type(of: error)).hasSuffix(".NIOConnectionError") else { return nil }
        var dnsFailed = false
        var attempts = 0
        for child in Mirror(reflecting: error).children {
            switch child.label {
            case "dnsAError", "dnsAAAAError":
                if Mirror(reflecting: child.value).displayStyle == .optional,
                    !Mirror(reflecting: child.value).children.isEmpty
                {
                    dnsFailed = true
                }
            case "connectionErrors":
                attempts += Mirror(reflecting: child.value).children.count
            default:
                break
            }
        }
        // No address to try means the lookup failed; otherwise every attempt ended before a
        // connection existed, whatever the individual reasons.
        return attempts == 0 && dnsFailed ? .dnsFailure : .cannotConnect
    }
}

extension TimeAmount {
    fileprivate init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
