import Foundation
import HTTPTypes
import OpenAPIRuntime

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An ``HTTPTransport`` that sends requests with Foundation's `URLSession`.
///
/// Use it in code that already lives on `URLSession` (shared cookies, caches, configuration).
/// On Linux, FoundationNetworking costs more CPU per request than AsyncHTTPClient (on loopback
/// here: about twice as much one request at a time, three times at 32 in flight; Benchmarks/RESULTS.md,
/// section 7), so `netreach get` uses `AsyncHTTPClientTransport` unless given `--transport urlsession`.
///
/// ```swift
/// let transport = URLSessionTransport()
/// let request = HTTPRequest(method: .get, scheme: "https", authority: "example.com", path: "/status")
/// let (response, body) = try await transport.send(request, body: nil, options: TransportOptions(stallTimeout: .seconds(5)))
/// for try await chunk in body { print(response.status, chunk.count) }
/// ```
///
/// Failures are classified from FoundationNetworking's `URLError` codes. On Linux a connection
/// closed without a reply comes back as `badServerResponse`; the request may have reached the
/// server, so that is reported as ``TransportError/Kind/connectionLost``, never as a kind that
/// allows repeating a POST.
public struct URLSessionTransport: HTTPTransport {
    /// The configuration of every session this transport makes.
    public let configuration: URLSessionConfiguration
    private let pool: SessionPool

    /// Creates a transport whose sessions use `configuration`.
    ///
    /// The default is one ephemeral-configuration pool shared by every transport created without
    /// an argument: nothing is written to disk and connections are reused.
    ///
    /// Each transfer in flight has a session of its own, taken from a small pool, so its delegate
    /// callbacks queue behind no other transfer's.
    ///
    /// FoundationNetworking on Linux cannot be paused (a data task suspended mid-transfer receives
    /// its body again, measured), so what a slow reader has not taken yet is buffered: a 1 GiB body
    /// read at 200 MB/s peaked at 656 MB resident. For large bodies read slower than they arrive,
    /// use `AsyncHTTPClientTransport`, whose reads wait for the reader.
    ///
    /// ```swift
    /// let configuration = URLSessionConfiguration.ephemeral
    /// configuration.httpAdditionalHeaders = ["User-Agent": "netreach"]
    /// let transport = URLSessionTransport(configuration: configuration)
    /// ```
    public init(configuration: URLSessionConfiguration) {
        self.configuration = configuration
        self.pool = SessionPool(configuration: configuration)
    }

    /// A transport on the shared ephemeral pool.
    public init() {
        self.configuration = Self.sharedPool.configuration
        self.pool = Self.sharedPool
    }

    private static let sharedPool = SessionPool(configuration: .ephemeral)

    /// Request bodies are read into memory up to this size before sending: FoundationNetworking on
    /// Linux cannot pull an asynchronous body as it sends. A larger body fails with
    /// ``TransportError/Kind/invalidRequest`` before anything is sent; use `AsyncHTTPClientTransport`
    /// to stream uploads of any size.
    public static let maximumRequestBodySize = 64 << 20

    /// Sends `request` with `body`; returns the response head once it arrived and its body as a
    /// stream.
    ///
    /// Statuses are not judged: a 503 is a response like a 200. The response body is handed over
    /// as it arrives; what the reader has not taken yet is buffered (FoundationNetworking cannot be
    /// paused). The request body is read whole first (up to ``maximumRequestBodySize``).
    ///
    /// ```swift
    /// var request = HTTPRequest(method: .post, scheme: "http", authority: "127.0.0.1:8080", path: "/items")
    /// request.headerFields[.contentType] = "application/json"
    /// let (response, body) = try await URLSessionTransport().send(
    ///     request, body: HTTPBody(#"{"name":"a"}"#), options: TransportOptions(stallTimeout: .seconds(10)))
    /// let data = try await Data(collecting: body, upTo: 1 << 20)
    /// print(response.status, data.count)
    /// ```
    public func send(
        _ request: HTTPRequest,
        body: HTTPBody?,
        options: TransportOptions
    ) async throws(TransportError) -> (HTTPResponse, HTTPBody) {
        var bytes: Data?
        if let body {
            do {
                bytes = try await Data(collecting: body, upTo: Self.maximumRequestBodySize)
            } catch let error as TransportError {
                throw error
            } catch {
                throw TransportError(.invalidRequest, "the request body could not be read (over \(Self.maximumRequestBodySize) bytes, or failed): \(error)")
            }
        }
        let urlRequest = try Self.makeURLRequest(request, body: bytes, stallTimeout: options.stallTimeout)
        let transfer = Transfer(method: request.method)
        let session = pool.checkout()
        let watchdog = StallWatchdog(stall: options.stallTimeout, deadline: options.deadline) { error in
            transfer.fail(error)
        }
        transfer.channel = BodyChannel(watchdog: watchdog)
        transfer.watchdog = watchdog
        let task = session.start(urlRequest.value, transfer: transfer) { [pool] in pool.checkin(session) }
        transfer.attach(task)
        transfer.channel.onConsumerTermination {
            task.cancel()
            watchdog.stop()
        }
        do {
            return try await withTaskCancellationHandler {
                try await transfer.response()
            } onCancel: {
                transfer.fail(TransportError(.cancelled, "the task was cancelled"))
            }
        } catch {
            throw error as? TransportError ?? TransportError(.other, String(describing: error))
        }
    }

    // MARK: Conversions

    private static func makeURLRequest(_ request: HTTPRequest, body: Data?, stallTimeout: Duration) throws(TransportError) -> SendableURLRequest {
        guard let scheme = request.scheme, let authority = request.authority else {
            throw TransportError(.invalidRequest, "request has no scheme or authority: \(request)")
        }
        // Decided here, before anything is sent: URLSession's own "unsupported URL" also stands for
        // a garbled response on Linux, so it cannot be trusted to mean "never left".
        guard ["http", "https"].contains(scheme.lowercased()) else {
            throw TransportError(.invalidRequest, "unsupported scheme \(scheme): only http and https are sent")
        }
        let path = request.path ?? "/"
        guard let url = URL(string: "\(scheme)://\(authority)\(path)"), url.host != nil else {
            throw TransportError(.invalidRequest, "cannot form a URL from \(scheme)://\(authority)\(path)")
        }
        var urlRequest = URLRequest(url: url)
        urlRequest.httpMethod = request.method.rawValue
        // URLRequest holds one value per name: repeated fields are joined as RFC 9110 allows
        // (cookies with "; ", everything else with ", ").
        var joined: [(name: String, value: String)] = []
        for field in request.headerFields {
            if let index = joined.firstIndex(where: { $0.name.lowercased() == field.name.canonicalName }) {
                let separator = field.name == .cookie ? "; " : ", "
                joined[index].value += separator + field.value
            } else {
                joined.append((field.name.rawName, field.value))
            }
        }
        for (name, value) in joined {
            urlRequest.setValue(value, forHTTPHeaderField: name)
        }
        urlRequest.httpBody = body
        // Stalls and the deadline are timed by the watchdog. URLSession's own timeout is an idle
        // timeout too, but on Linux it fires early (measured: after ~140-180 ms for 300 ms), so it
        // is set past ours and only ever acts as a backstop.
        let seconds = Double(stallTimeout.components.seconds) + Double(stallTimeout.components.attoseconds) * 1e-18
        urlRequest.timeoutInterval = max(seconds * 2 + 1, 1)
        return SendableURLRequest(value: urlRequest)
    }

    fileprivate static func makeResponse(_ urlResponse: URLResponse) throws -> HTTPResponse {
        guard let httpResponse = urlResponse as? HTTPURLResponse else {
            throw TransportError(.invalidResponse, "not an HTTP response: \(type(of: urlResponse))")
        }
        guard (0...999).contains(httpResponse.statusCode) else {
            throw TransportError(.invalidResponse, "status code out of range: \(httpResponse.statusCode)")
        }
        var response = HTTPResponse(status: .init(code: httpResponse.statusCode))
        for (name, value) in httpResponse.allHeaderFields {
            guard let name = (name as? String).flatMap({ HTTPField.Name($0) }), let value = value as? String else { continue }
            response.headerFields.append(HTTPField(name: name, value: value))
        }
        return response
    }

    // MARK: Classification

    fileprivate static func classify(_ error: any Error) -> TransportError {
        if let error = error as? TransportError {
            return error
        }
        if error is CancellationError {
            return TransportError(.cancelled, "the task was cancelled")
        }
        guard let urlError = error as? URLError else {
            return TransportError(Task.isCancelled ? .cancelled : .other, String(describing: error))
        }
        let detail = "URLError \(urlError.code.rawValue): \(urlError.localizedDescription)"
        switch urlError.code {
        case .cancelled:
            return TransportError(.cancelled, detail)
        case .timedOut:
            // libcurl does not say whether the connection was up; "may have been sent" is the safe side.
            return TransportError(.timedOut, detail)
        case .cannotConnectToHost, .notConnectedToInternet:
            return TransportError(.cannotConnect, detail)
        case .cannotFindHost, .dnsLookupFailed:
            return TransportError(.dnsFailure, detail)
        case .networkConnectionLost, .badServerResponse:
            // On Linux -1011 means "closed without a reply": the request may have been read.
            return TransportError(.connectionLost, detail)
        case .cannotParseResponse, .cannotDecodeRawData, .cannotDecodeContentData:
            return TransportError(.invalidResponse, detail)
        case .badURL, .unsupportedURL:
            // The URL was checked before sending, so after the fact these are libcurl's words for a
            // response it could not read (-1002 "Unsupported HTTP version in response" for a
            // garbled status line): the request may have been read by the server.
            return TransportError(.invalidResponse, detail)
        default:
            return TransportError(.other, detail)
        }
    }
}

/// A `URLRequest` handed to the child task that sends it. The value is built once, never mutated
/// afterwards, and only read by that one task, so no state is shared.
private struct SendableURLRequest: @unchecked Sendable {
    let value: URLRequest
}

/// Sessions for one transfer each, reused one after another so connections are kept alive.
///
/// `@unchecked Sendable`: `idle` is only touched while `lock` is held.
private final class SessionPool: @unchecked Sendable {
    let configuration: URLSessionConfiguration
    private let lock = NSLock()
    private var idle: [PooledSession] = []
    /// Idle sessions kept beyond this are invalidated.
    private let keep = 8

    init(configuration: URLSessionConfiguration) { self.configuration = configuration }

    func checkout() -> PooledSession {
        lock.withLock { idle.popLast() } ?? PooledSession(configuration: configuration)
    }

    func checkin(_ session: PooledSession) {
        let kept = lock.withLock { () -> Bool in
            guard idle.count < keep else { return false }
            idle.append(session)
            return true
        }
        if !kept { session.invalidate() }
    }
}

/// One `URLSession` whose delegate feeds the body channel of the one transfer it runs at a time.
///
/// `@unchecked Sendable`: `transfer` and `done` are only touched while `lock` is held; `session` is
/// set once in `init`. The session keeps this delegate alive until ``invalidate()``.
private final class PooledSession: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var session: URLSession!
    private var transfer: Transfer?
    private var done: (@Sendable () -> Void)?

    init(configuration: URLSessionConfiguration) {
        super.init()
        // A serial delegate queue of its own: callbacks of the one task arrive in order (a
        // concurrent queue delivered completion before the last data, measured).
        let queue = OperationQueue()
        queue.maxConcurrentOperationCount = 1
        session = URLSession(configuration: configuration, delegate: self, delegateQueue: queue)
    }

    /// Starts `request` for `transfer`; `done` runs when the task completed.
    func start(_ request: URLRequest, transfer: Transfer, done: @escaping @Sendable () -> Void) -> URLSessionDataTask {
        lock.withLock {
            self.transfer = transfer
            self.done = done
        }
        let task = session.dataTask(with: request)
        task.resume()
        return task
    }

    func invalidate() { session.finishTasksAndInvalidate() }

    private var current: Transfer? { lock.withLock { transfer } }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
    ) {
        current?.received(response)
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        guard let transfer = current else { return }
        transfer.watchdog.touch()
        // Never waits: FoundationNetworking queues further callbacks rather than reading less, so
        // holding this one back would only delay them, not the network.
        if !transfer.channel.push(HTTPBody.ByteChunk(data)) { dataTask.cancel() }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let (transfer, done) = lock.withLock { () -> (Transfer?, (@Sendable () -> Void)?) in
            defer {
                self.transfer = nil
                self.done = nil
            }
            return (self.transfer, self.done)
        }
        if let error {
            transfer?.fail(URLSessionTransport.classify(error))
        } else {
            transfer?.completed()
        }
        done?()
    }
}

/// One transfer's state: the response head for the caller waiting in `send`, the body channel for
/// its consumer, and the first failure.
///
/// `@unchecked Sendable`: `channel` and `watchdog` are set before the task starts and never after;
/// `result`, `waiter` and `failed` are only touched while `lock` is held.
private final class Transfer: @unchecked Sendable {
    var channel: BodyChannel!
    var watchdog: StallWatchdog!
    private let method: HTTPRequest.Method
    private let lock = NSLock()
    private var result: Result<(HTTPResponse, HTTPBody), TransportError>?
    private var waiter: CheckedContinuation<(HTTPResponse, HTTPBody), any Error>?
    private var failed = false
    private var task: URLSessionDataTask?

    init(method: HTTPRequest.Method) { self.method = method }

    /// The task to cancel on failure (at once if the transfer already failed).
    func attach(_ task: URLSessionDataTask) {
        let cancel = lock.withLock { () -> Bool in
            self.task = task
            return failed
        }
        if cancel { task.cancel() }
    }

    func received(_ urlResponse: URLResponse) {
        watchdog.touch()
        do {
            let head = try URLSessionTransport.makeResponse(urlResponse)
            let expected = urlResponse.expectedContentLength
            let length: HTTPBody.Length = method == .head ? .known(0) : expected >= 0 ? .known(expected) : .unknown
            settle(.success((head, HTTPBody(channel: channel, length: length))))
        } catch {
            fail(error as? TransportError ?? TransportError(.invalidResponse, String(describing: error)))
        }
    }

    func completed() {
        watchdog.stop()
        // A completion without a response head (cannot happen with HTTP, but not assumed) is not a response.
        settle(.failure(TransportError(.invalidResponse, "the transfer ended without a response")))
        channel.finish()
    }

    func fail(_ error: TransportError) {
        let (first, task, headArrived) = lock.withLock { () -> (Bool, URLSessionDataTask?, Bool) in
            defer { failed = true }
            return (!failed, self.task, (try? result?.get()) != nil)
        }
        guard first else { return }
        // libcurl's "transfer closed with N bytes remaining" (URLError -1 on Linux) after the head
        // is a body cut short: the connection was lost.
        let error = headArrived && error.kind == .other ? TransportError(.connectionLost, error.detail) : error
        task?.cancel()
        watchdog.stop()
        settle(.failure(error))
        channel.finish(throwing: error)
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
