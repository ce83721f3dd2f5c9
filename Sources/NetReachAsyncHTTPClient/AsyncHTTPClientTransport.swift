import AsyncHTTPClient
import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import NetReachHTTP
import OpenAPIRuntime

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
/// let (response, body) = try await transport.send(request, body: nil, options: TransportOptions(stallTimeout: .seconds(5)))
/// for try await chunk in body { print(response.status, chunk.count) }
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

    /// Sends `request` with `body`; returns the response head once it arrived and its body as a
    /// stream.
    ///
    /// Statuses are not judged: a 503 is a response like a 200. The request body is pulled as fast
    /// as the connection takes it; the response body is read as fast as it is consumed (at most
    /// 1 MiB waits in between), so memory stays flat whatever the size.
    ///
    /// ```swift
    /// var request = HTTPRequest(method: .post, scheme: "http", authority: "127.0.0.1:8080", path: "/items")
    /// request.headerFields[.contentType] = "application/json"
    /// let (response, body) = try await AsyncHTTPClientTransport().send(
    ///     request, body: HTTPBody(#"{"name":"a"}"#), options: TransportOptions(stallTimeout: .seconds(10)))
    /// let data = try await Data(collecting: body, upTo: 1 << 20)
    /// print(response.status, data.count)
    /// ```
    public func send(
        _ request: HTTPRequest,
        body: HTTPBody?,
        options: TransportOptions
    ) async throws(TransportError) -> (HTTPResponse, HTTPBody) {
        let exchange = Exchange()
        let watchdog = StallWatchdog(stall: options.stallTimeout, deadline: options.deadline) { error in
            exchange.fail(error)
        }
        let clientRequest = try Self.makeClientRequest(request, body: body, watchdog: watchdog)
        let client = self.client
        let channel = BodyChannel(watchdog: watchdog)
        // AHC's own deadline would also cut a body that keeps flowing; the watchdog times stalls and
        // the overall deadline, and this one only stops AHC from waiting forever.
        let deadline = NIODeadline.now() + TimeAmount(options.deadline.map { $0 - .now } ?? .seconds(7 * 24 * 3600))
        let producer = Task {
            do {
                let response = try await client.execute(clientRequest, deadline: deadline)
                watchdog.touch()
                let head = try Self.makeResponse(response)
                let length: HTTPBody.Length = response.headers.first(name: "content-length").flatMap(Int64.init).map { .known($0) } ?? .unknown
                exchange.head(head, body: HTTPBody(channel: channel, length: request.method == .head ? .known(0) : length))
                for try await buffer in response.body {
                    watchdog.touch()
                    guard await channel.send(HTTPBody.ByteChunk(buffer.readableBytesView)) else { break }
                }
                // A cancelled body stream may simply end; a truncated body must not pass as whole.
                try Task.checkCancellation()
                channel.finish()
            } catch {
                exchange.fail(exchange.failure ?? Self.classify(error))
            }
            watchdog.stop()
        }
        exchange.onFailure { error in
            producer.cancel()
            watchdog.stop()
            channel.finish(throwing: error)
        }
        channel.onConsumerTermination {
            producer.cancel()
            watchdog.stop()
        }
        do {
            return try await withTaskCancellationHandler {
                try await exchange.response()
            } onCancel: {
                exchange.fail(TransportError(.cancelled, "the task was cancelled"))
            }
        } catch {
            throw error as? TransportError ?? TransportError(.other, String(describing: error))
        }
    }

    // MARK: Conversions

    private static func makeClientRequest(
        _ request: HTTPRequest, body: HTTPBody?, watchdog: StallWatchdog
    ) throws(TransportError) -> HTTPClientRequest {
        guard let scheme = request.scheme, let authority = request.authority else {
            throw TransportError(.invalidRequest, "request has no scheme or authority: \(request)")
        }
        var clientRequest = HTTPClientRequest(url: "\(scheme)://\(authority)\(request.path ?? "/")")
        clientRequest.method = HTTPMethod(rawValue: request.method.rawValue)
        for field in request.headerFields {
            clientRequest.headers.add(name: field.name.rawName, value: field.value)
        }
        if let body {
            let length: HTTPClientRequest.Body.Length
            switch body.length {
            case .known(let count): length = .known(count)
            case .unknown: length = .unknown
            }
            clientRequest.body = .stream(RequestChunks(body: body, watchdog: watchdog), length: length)
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
        case let error as HTTPParserError:
            // The connection closed before the message was complete: a body cut short, not garbage.
            if case .invalidEOFState = error { return TransportError(.connectionLost, "the connection closed before the response was complete (\(detail))") }
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

/// A request `HTTPBody` as the `ByteBuffer`s AsyncHTTPClient writes, marking activity as it is pulled.
private struct RequestChunks: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let body: HTTPBody
    let watchdog: StallWatchdog

    func makeAsyncIterator() -> Iterator { Iterator(base: body.makeAsyncIterator(), watchdog: watchdog) }

    struct Iterator: AsyncIteratorProtocol {
        var base: HTTPBody.Iterator
        let watchdog: StallWatchdog

        mutating func next() async throws -> ByteBuffer? {
            guard let chunk = try await base.next() else { return nil }
            watchdog.touch()
            return ByteBuffer(bytes: chunk)
        }
    }
}

/// The outcome of one exchange: the response head (with its body), or the first failure. Whoever
/// comes first wins; the waiter is resumed once.
///
/// `@unchecked Sendable`: `result`, `waiter`, `failed` and `failureAction` are only touched while
/// `lock` (an `NSLock`, which TSan understands) is held; callbacks run outside it.
private final class Exchange: @unchecked Sendable {
    private let lock = NSLock()
    private var result: Result<(HTTPResponse, HTTPBody), TransportError>?
    private var waiter: CheckedContinuation<(HTTPResponse, HTTPBody), any Error>?
    private var failed: TransportError?
    private var failureAction: (@Sendable (TransportError) -> Void)?

    /// The first failure, if there was one.
    var failure: TransportError? { lock.withLock { failed } }

    func head(_ head: HTTPResponse, body: HTTPBody) { settle(.success((head, body))) }

    /// Records `error` (the first failure wins) and stops the transfer, whether or not the head came.
    func fail(_ error: TransportError) {
        let action: (@Sendable (TransportError) -> Void)? = lock.withLock {
            guard failed == nil else { return nil }
            failed = error
            return failureAction
        }
        settle(.failure(error))
        action?(error)
    }

    /// What to do on the first failure (runs at once if it already happened).
    func onFailure(_ action: @escaping @Sendable (TransportError) -> Void) {
        let already: TransportError? = lock.withLock {
            failureAction = action
            return failed
        }
        if let already { action(already) }
    }

    func response() async throws -> (HTTPResponse, HTTPBody) {
        try await withCheckedThrowingContinuation { continuation in
            let settled: Result<(HTTPResponse, HTTPBody), TransportError>? = lock.withLock {
                if result == nil { waiter = continuation }
                return result
            }
            if let settled { continuation.resume(with: settled) }
        }
    }

    private func settle(_ outcome: Result<(HTTPResponse, HTTPBody), TransportError>) {
        let waiter: CheckedContinuation<(HTTPResponse, HTTPBody), any Error>? = lock.withLock {
            guard result == nil else { return nil }
            result = outcome
            defer { self.waiter = nil }
            return self.waiter
        }
        waiter?.resume(with: outcome.mapError { $0 as any Error })
    }
}

extension TimeAmount {
    fileprivate init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
