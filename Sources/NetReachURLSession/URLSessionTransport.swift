import Foundation
import HTTPTypes
import NetReachHTTP
import NetReachSystem
import OpenAPIRuntime

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An `HTTPTransport` (``NetReachHTTP/HTTPTransport``) that sends requests with Foundation's `URLSession`.
///
/// Use it in code that already lives on `URLSession` (shared cookies, caches, configuration).
/// On Linux, FoundationNetworking costs more CPU per request than AsyncHTTPClient (on loopback
/// here: about twice as much one request at a time, three times at 32 in flight; Benchmarks/RESULTS.md,
/// section 7), so `netreach get` uses `AsyncHTTPClientTransport`.
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
/// allows repeating a POST. A failed TLS handshake (libcurl's words, read from the error) is
/// ``TransportError/Kind/tlsFailure``.
///
/// Like `AsyncHTTPClientTransport` it never follows a redirect (a 3xx is a response, with its
/// `Location`), sends `Accept-Encoding: deflate, gzip` unless the request says otherwise, and
/// decodes gzip and deflate whatever the ratio, up to ``TransportSettings/maximumDecodedBodySize``.
///
/// What FoundationNetworking on Linux (swift-corelibs-foundation 6.3, over the system's libcurl)
/// cannot do, and so this transport cannot either; ``init(settings:)`` throws
/// ``TransportSettingsError/Kind/unsupported`` rather than ignore such a setting:
/// - TLS: only the system's trust roots (libcurl's built-in CA bundle). No custom roots (neither
///   `SSL_CERT_FILE`, `SSL_CERT_DIR`, `CURL_CA_BUNDLE` nor `URLSessionCertificateAuthorityInfoFile`
///   is read on Linux), no client certificate, no turning verification off: the session delegate is
///   never asked about server trust.
/// - TLS floors: libcurl's are OpenSSL's, set by the system (Debian 12: security level 2, so TLS
///   1.2 at least, keys of 2048 bits, no SHA-1 signatures, as the defaults of
///   ``TLSSettings/minimumProtocolVersion`` and ``TLSSettings/allowsWeakCertificates`` say). Neither
///   can be changed from here, so only those defaults are taken; on a system whose OpenSSL
///   configuration lowers its security level, libcurl's floors are lower too.
/// - Proxies: only the environment's, which libcurl reads itself (`http_proxy`, `https_proxy`,
///   `all_proxy`, `no_proxy`); `connectionProxyDictionary` is ignored.
/// - No connect timeout of its own; the stall timeout covers connecting.
/// - No IPv6 address literals: `http://[::1]:8080/` is rejected before connecting (FoundationNetworking
///   compares `URL.host`, `::1`, with libcurl's `[::1]`), reported as
///   ``TransportError/Kind/invalidRequest``. Use a host name or `AsyncHTTPClientTransport`.
public struct URLSessionTransport: HTTPTransport {
    /// The configuration of every session this transport makes.
    public let configuration: URLSessionConfiguration
    private let pool: SessionPool
    /// The most a gzip or deflate body may decode to (``TransportSettings/maximumDecodedBodySize``).
    private let maximumDecodedBodySize: Int64

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
        self.maximumDecodedBodySize = TransportSettings.defaultMaximumDecodedBodySize
    }

    /// A transport on the shared ephemeral pool.
    public init() {
        self.configuration = Self.sharedPool.configuration
        self.pool = Self.sharedPool
        self.maximumDecodedBodySize = TransportSettings.defaultMaximumDecodedBodySize
    }

    /// A transport on the shared ephemeral pool with `settings`, if FoundationNetworking can
    /// honour them all.
    ///
    /// It can honour ``TransportSettings/maximumDecodedBodySize``, the system's trust roots with
    /// verification on, and the environment's proxies (libcurl reads them; so does
    /// ``ProxySettings/environment(_:)``, the default). Anything else throws
    /// ``TransportSettingsError/Kind/unsupported`` naming the setting: explicit trust roots, or
    /// `SSL_CERT_FILE` / `SSL_CERT_DIR` set in the environment; a client identity; verification
    /// off; a proxy or `noProxy` list other than the environment's; a connect timeout.
    ///
    /// ```swift
    /// var settings = TransportSettings()
    /// settings.maximumDecodedBodySize = 64 << 20
    /// let transport = try URLSessionTransport(settings: settings)
    /// ```
    public init(settings: TransportSettings) throws(TransportSettingsError) {
        try self.init(settings: settings, environment: ProcessInfo.processInfo.environment)
    }

    /// As ``init(settings:)``, judging `SSL_CERT_FILE`, `SSL_CERT_DIR` and the proxies against
    /// `environment` instead of the process's (for tests; libcurl still reads the real one).
    package init(settings: TransportSettings, environment: [String: String]) throws(TransportSettingsError) {
        try Self.check(settings, environment: environment)
        self.configuration = Self.sharedPool.configuration
        self.pool = Self.sharedPool
        self.maximumDecodedBodySize = settings.maximumDecodedBodySize
    }

    /// The CA bundles FoundationNetworking and libcurl look for (swift-corelibs-foundation's
    /// `EasyHandle.setCARootBundlePath()` list), resolved.
    private static let systemTrustFiles: Set<String> = Set(
        [
            "/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt",
            "/usr/share/ssl/certs/ca-bundle.crt",
            "/usr/local/share/certs/ca-root-nss.crt", "/etc/ssl/cert.pem",
        ].map(canonical))

    private static func canonical(_ path: String) -> String {
        URL(fileURLWithPath: path).resolvingSymlinksInPath().standardizedFileURL.path
    }

    /// Throws for the first setting FoundationNetworking on Linux cannot honour.
    package static func check(
        _ settings: TransportSettings, environment: [String: String]
    ) throws(TransportSettingsError) {
        func unsupported(_ what: String, _ why: String) -> TransportSettingsError {
            TransportSettingsError(
                .unsupported, "URLSessionTransport cannot \(what): \(why); use AsyncHTTPClientTransport")
        }
        let why =
            "FoundationNetworking on Linux trusts only libcurl's built-in CA bundle and offers no hook to change it"
        let roots = settings.tls.trustRoots.resolved(in: environment)
        if !settings.tls.trustRoots.isDefault {
            throw unsupported(
                "use custom trust roots (\([roots.file, roots.directory].compactMap { $0 }.joined(separator: ", ")))",
                why)
        }
        // The environment may name the system's own store (many images set SSL_CERT_FILE so):
        // that is what libcurl uses anyway.
        if let file = roots.file, !systemTrustFiles.contains(Self.canonical(file)) {
            throw unsupported("honour SSL_CERT_FILE=\(file)", why)
        }
        if let directory = roots.directory, Self.canonical(directory) != Self.canonical("/etc/ssl/certs") {
            throw unsupported("honour SSL_CERT_DIR=\(directory)", why)
        }
        if settings.tls.clientIdentity != nil {
            throw unsupported(
                "present a client certificate", "FoundationNetworking on Linux has no client certificate support")
        }
        if !settings.tls.verifiesCertificates {
            throw unsupported(
                "turn certificate verification off",
                "FoundationNetworking on Linux never asks its delegate about server trust")
        }
        if settings.tls.minimumProtocolVersion != .tlsv12 {
            throw unsupported(
                "require \(settings.tls.minimumProtocolVersion) at least",
                "FoundationNetworking on Linux cannot set libcurl's TLS version; OpenSSL's configuration decides it")
        }
        if settings.tls.allowsWeakCertificates {
            throw unsupported(
                "allow weak certificates",
                "FoundationNetworking on Linux cannot lower OpenSSL's security level, which refuses them")
        }
        if settings.connectTimeout != nil {
            throw unsupported(
                "limit connecting separately",
                "FoundationNetworking on Linux has no connect timeout (the stall timeout covers connecting)")
        }
        if !settings.decodesContentCodings {
            throw unsupported(
                "leave content codings undecoded",
                "FoundationNetworking on Linux always has libcurl offer and decode them")
        }
        if !settings.connectionOverrides.isEmpty {
            throw unsupported(
                "connect elsewhere than the URL's host (--resolve, --connect-to)",
                "FoundationNetworking on Linux offers no hook to choose the address it connects to")
        }
        if settings.proxy != ProxySettings.environment(environment) {
            throw unsupported(
                "use a proxy other than the environment's",
                "FoundationNetworking's libcurl reads http_proxy, https_proxy, all_proxy and no_proxy itself and ignores connectionProxyDictionary"
            )
        }
    }

    private static let sharedPool = SessionPool(configuration: .ephemeral)

    /// Request bodies are read into memory up to this size before sending: FoundationNetworking on
    /// Linux cannot pull an asynchronous body as it sends. A larger body fails with
    /// ``TransportError/Kind/invalidRequest`` before anything is sent; use `AsyncHTTPClientTransport`
    /// to stream uploads of any size. A file sent with `NetworkService.upload(_:fromFile:progress:)`
    /// (or `get -d @FILE`) is not read into memory: FoundationNetworking streams it from the file.
    public static let maximumRequestBodySize = 64 << 20

    /// Sends `request` with `body`; returns the response head once it arrived and its body as a
    /// stream.
    ///
    /// Statuses are not judged: a 503 is a response like a 200. The response body is handed over
    /// as it arrives; what the reader has not taken yet is buffered (FoundationNetworking cannot be
    /// paused). The request body is read whole first (up to ``maximumRequestBodySize``), except a file's,
    /// which is streamed from the file.
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
        var file: String?
        if let body, let path = FileBody.path(of: body) {
            file = path // streamed from the file by FoundationNetworking itself, in constant memory
        } else if let body {
            do {
                bytes = try await Data(collecting: body, upTo: Self.maximumRequestBodySize)
            } catch let error as TransportError {
                throw error
            } catch {
                throw TransportError(
                    .invalidRequest,
                    "the request body could not be read (over \(Self.maximumRequestBodySize) bytes, or failed): \(error)"
                )
            }
        }
        var urlRequest = try Self.makeURLRequest(request, body: bytes, stallTimeout: options.stallTimeout)
        if let file {
            guard let stream = InputStream(fileAtPath: file) else {
                throw TransportError(.invalidRequest, "the request body's file '\(file)' cannot be opened")
            }
            var value = urlRequest.value
            // FoundationNetworking sends a stream body chunked; a Content-Length beside that would
            // contradict it (a server resets the connection).
            value.httpBodyStream = stream
            urlRequest = SendableURLRequest(value: value)
        }
        let transfer = Transfer(
            method: request.method, host: Self.host(of: request.authority ?? ""),
            maximumDecodedBodySize: maximumDecodedBodySize)
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
        return try await transfer.response()
    }

    // MARK: Conversions

    package static func makeURLRequest(
        _ request: HTTPRequest, body: Data?, stallTimeout: Duration
    ) throws(TransportError) -> SendableURLRequest {
        let (scheme, authority, path) = try request.target()
        // Decided here, before anything is sent: URLSession's own "unsupported URL" also stands for
        // a garbled response on Linux, so it cannot be trusted to mean "never left".
        guard ["http", "https"].contains(scheme.lowercased()) else {
            throw TransportError(.invalidRequest, "unsupported scheme \(scheme): only http and https are sent")
        }
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
        // What AsyncHTTPClient's decompressor asks for, so both transports ask alike (libcurl would
        // also offer br and zstd, which the other transport cannot decode).
        if !joined.contains(where: { $0.name.lowercased() == "accept-encoding" }) {
            urlRequest.setValue("deflate, gzip", forHTTPHeaderField: "Accept-Encoding")
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
            guard let name = (name as? String).flatMap({ HTTPField.Name($0) }), let value = value as? String else {
                continue
            }
            response.headerFields.append(HTTPField(name: name, value: value))
        }
        return response
    }

    // MARK: Classification

    /// The host of an authority: `[::1]:8080` → `::1`, `example.com:443` → `example.com`.
    fileprivate static func host(of authority: String) -> String {
        var hostPort = Substring(authority)
        if let at = hostPort.lastIndex(of: "@") { hostPort = hostPort[hostPort.index(after: at)...] }
        if hostPort.hasPrefix("["), let close = hostPort.firstIndex(of: "]") {
            return String(hostPort[hostPort.index(after: hostPort.startIndex)..<close])
        }
        if let colon = hostPort.lastIndex(of: ":") { return String(hostPort[..<colon]) }
        return String(hostPort)
    }

    fileprivate static func classify(_ error: any Error, host: String) -> TransportError {
        if let error = error as? TransportError {
            return error
        }
        if let urlError = error as? URLError {
            if let reason = TLSFailureReason(curlMessage: urlError.localizedDescription) {
                return TransportError(tlsFailure: reason, host: host)
            }
            if urlError.code == .badURL, host.contains(":") {
                // swift-corelibs-foundation's EasyHandle.set(url:) compares URL.host ("::1") with
                // libcurl's host ("[::1]") and refuses the URL before connecting.
                return TransportError(
                    .invalidRequest,
                    "FoundationNetworking cannot send to an IPv6 address literal ([\(host)]); nothing was sent: use a host name or AsyncHTTPClientTransport"
                )
            }
        }
        if error is CancellationError {
            return TransportError(.cancelled, "the task was cancelled")
        }
        guard let urlError = error as? URLError else {
            return TransportError(Task.isCancelled ? .cancelled : .other, String(describing: error))
        }
        // A sentence that names the host; the code is Foundation's (NSURLErrorDomain), for searching.
        var reason = urlError.localizedDescription
        if reason.hasSuffix(".") { reason.removeLast() }
        let detail = "the request to \(host) failed: \(reason) (error \(urlError.code.rawValue))"
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
package struct SendableURLRequest: @unchecked Sendable {
    package let value: URLRequest
}

/// Sessions for one transfer each, reused one after another so connections are kept alive.
///
/// `@unchecked Sendable`: `configuration` is only read (URLSessionConfiguration is not Sendable).
private final class SessionPool: @unchecked Sendable {
    let configuration: URLSessionConfiguration
    private let idle = Locked<[PooledSession]>([])
    /// Idle sessions kept beyond this are invalidated.
    private let keep = 8

    init(configuration: URLSessionConfiguration) { self.configuration = configuration }

    func checkout() -> PooledSession {
        idle.withLock { $0.popLast() } ?? PooledSession(configuration: configuration)
    }

    func checkin(_ session: PooledSession) {
        let kept = idle.withLock { idle -> Bool in
            guard idle.count < keep else { return false }
            idle.append(session)
            return true
        }
        if !kept { session.invalidate() }
    }
}

/// One `URLSession` whose delegate feeds the body channel of the one transfer it runs at a time.
///
/// `@unchecked Sendable`: `session` is set once in `init`; the rest is in `running`. The session
/// keeps this delegate alive until ``invalidate()``.
private final class PooledSession: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    private var session: URLSession!
    /// The transfer under way and what runs when it completed.
    private let running = Locked<(transfer: Transfer?, done: (@Sendable () -> Void)?)>((nil, nil))

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
        running.withLock { $0 = (transfer, done) }
        let task = session.dataTask(with: request)
        task.resume()
        return task
    }

    func invalidate() { session.finishTasksAndInvalidate() }

    private var current: Transfer? { running.withLock { $0.transfer } }

    func urlSession(
        _ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
        completionHandler: @escaping (URLSession.ResponseDisposition) -> Void
    ) {
        current?.received(response)
        completionHandler(.allow)
    }

    /// Never follows: the 3xx itself, with its `Location` and body, is the response (the service
    /// decides whether and how to follow).
    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
        newRequest request: URLRequest, completionHandler: @escaping (URLRequest?) -> Void
    ) {
        completionHandler(nil)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        guard let transfer = current else { return }
        transfer.watchdog.touch()
        guard transfer.receivedBody(count: data.count) else { return }
        // Never waits: FoundationNetworking queues further callbacks rather than reading less, so
        // holding this one back would only delay them, not the network.
        if !transfer.channel.push(HTTPBody.ByteChunk(data)) { dataTask.cancel() }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let (transfer, done) = running.withLock { running in
            defer { running = (nil, nil) }
            return running
        }
        if let error {
            transfer?.fail(URLSessionTransport.classify(error, host: transfer?.host ?? ""))
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
/// `failed` and `task` are in `state` (the head waits in `promise`).
private final class Transfer: @unchecked Sendable {
    var channel: BodyChannel!
    var watchdog: StallWatchdog!
    private let method: HTTPRequest.Method
    private let state = Locked<(failed: Bool, task: URLSessionDataTask?)>((false, nil))
    private let promise = ResponseHeadPromise()
    /// The host, for error details.
    let host: String
    private let maximumDecodedBodySize: Int64
    /// Decoded bytes so far, counted only when a content coding is decoded (set once the head came);
    /// only touched on the session's serial delegate queue.
    private var decoded: Int64?

    init(method: HTTPRequest.Method, host: String, maximumDecodedBodySize: Int64) {
        self.method = method
        self.host = host
        self.maximumDecodedBodySize = maximumDecodedBodySize
    }

    /// Counts `count` more body bytes; `false` once a decoded body has passed its limit (the
    /// transfer has then failed with ``TransportError/Kind/decodedBodyTooLarge``).
    func receivedBody(count: Int) -> Bool {
        guard let decoded else { return true }
        let total = decoded + Int64(count)
        self.decoded = total
        guard total <= maximumDecodedBodySize else {
            fail(
                TransportError(
                    .decodedBodyTooLarge,
                    "the decoded body of the response from \(host) passed the limit of \(maximumDecodedBodySize) bytes (TransportSettings.maximumDecodedBodySize)"
                ))
            return false
        }
        return true
    }

    /// The task to cancel on failure (at once if the transfer already failed).
    func attach(_ task: URLSessionDataTask) {
        let cancel = state.withLock { state -> Bool in
            state.task = task
            return state.failed
        }
        if cancel { task.cancel() }
    }

    func received(_ urlResponse: URLResponse) {
        watchdog.touch()
        do {
            let head = try URLSessionTransport.makeResponse(urlResponse)
            let coding = head.headerFields[.contentEncoding]?.trimmingCharacters(in: .whitespaces).lowercased()
            let isDecoded = coding.map { !$0.isEmpty && $0 != "identity" } ?? false
            // libcurl decodes gzip and deflate; `Content-Length` then counts the encoded bytes.
            if isDecoded { decoded = 0 }
            let expected = isDecoded ? -1 : urlResponse.expectedContentLength
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
        let (first, task) = state.withLock { state -> (Bool, URLSessionDataTask?) in
            defer { state.failed = true }
            return (!state.failed, state.task)
        }
        let headArrived = promise.deliveredHead
        guard first else { return }
        let error = Self.reclassified(error, afterHead: headArrived)
        task?.cancel()
        watchdog.stop()
        settle(.failure(error))
        channel.finish(throwing: error)
    }

    /// The head and body, or the first failure; cancelling the waiting task fails the transfer.
    func response() async throws(TransportError) -> (HTTPResponse, HTTPBody) {
        try await promise.response(failingWith: { [self] in fail($0) })
    }

    private func settle(_ outcome: Result<(HTTPResponse, HTTPBody), TransportError>) { promise.settle(outcome) }

    /// A failure read again from libcurl's words (FoundationNetworking passes them on as the
    /// description of a `URLError` with code -1): `Unrecognized content encoding type`, `Reject
    /// response due to more than 5 content encodings` and `Error while processing content
    /// unencoding` (curl's 61, which libcurl may say while it reads the head) are a coding libcurl
    /// could not undo; after the head, `transfer closed with 1000 bytes remaining to read` and
    /// `transfer closed with outstanding read data remaining` (a close before the body's end,
    /// curl's 18) are a body cut short, and any other failure of kind `other` a lost connection.
    static func reclassified(_ error: TransportError, afterHead: Bool) -> TransportError {
        guard error.kind == .other || error.kind == .connectionLost else { return error }
        let text = error.detail.lowercased()
        if text.contains("content encoding") || text.contains("unencoding") {
            return TransportError(.badContentEncoding, error.detail)
        }
        guard afterHead else { return error }
        if text.contains("transfer closed with") { return TransportError(.partialBody, error.detail) }
        return error.kind == .other ? TransportError(.connectionLost, error.detail) : error
    }
}

extension TLSFailureReason {
    /// The reason in libcurl's error message (FoundationNetworking passes it on as the `URLError`'s
    /// description, with code -1), or `nil` if the message is not about TLS. Messages seen from
    /// libcurl 7.88 with OpenSSL 3:
    /// `SSL certificate problem: unable to get local issuer certificate`,
    /// `SSL certificate problem: certificate has expired`,
    /// `SSL: no alternative certificate subject name matches target host name '127.0.0.1'`,
    /// `OpenSSL/3.0.19: error:0A00042E:SSL routines::tlsv1 alert protocol version`,
    /// `OpenSSL SSL_read: error:0A00045C:SSL routines::tlsv13 alert certificate required, errno 0`.
    package init?(curlMessage message: String) {
        let text = message.lowercased()
        if text.hasPrefix("ssl certificate problem:") {
            if text.contains("key too weak") {
                // OpenSSL's security level: "EE certificate key too weak", "CA certificate key too weak".
                self = .keyTooWeak(
                    "a key in the server's certificate chain is too small (OpenSSL: \(Self.problem(message)))")
            } else if text.contains("digest algorithm too weak") || text.contains("md too weak") {
                self = .digestTooWeak(
                    "a certificate of the server's chain is signed with a digest too weak (OpenSSL: \(Self.problem(message)))"
                )
            } else if text.contains("expired") {
                self = .expired
            } else if text.contains("not yet valid") {
                self = .notYetValid
            } else if text.contains("issuer") || text.contains("self-signed") || text.contains("self signed")
                || text.contains("untrusted")
            {
                self = .untrusted
            } else {
                self = .verificationFailed
            }
            return
        }
        if text.hasPrefix("ssl: no alternative certificate subject name")
            || text.contains("does not match target host name")
        {
            self = .hostnameMismatch
            return
        }
        guard text.contains("ssl routines") || text.hasPrefix("openssl") || text.hasPrefix("ssl") else { return nil }
        if text.contains("certificate required") || text.contains("bad certificate") || text.contains("unknown ca")
            || text.contains("certificate unknown") || text.contains("access denied")
        {
            self = .clientCertificateRejected
        } else if text.contains("ssl_error_syscall") {
            self = .other("the connection broke during the handshake")
        } else if text.contains("wrong version number") {
            self = .protocolMismatch("the server did not answer with TLS")
        } else if text.contains("unsupported protocol") || text.contains("legacy sigalg disallowed") {
            // OpenSSL at security level 1 and up: TLS 1.0 and 1.1 sign with SHA-1 or MD5+SHA-1.
            self = .protocolVersionTooOld(
                "the server speaks only TLS versions older than OpenSSL's security level allows (\(Self.shortReason(message)))"
            )
        } else if text.contains("protocol version") || text.contains("handshake failure")
            || text.contains("no shared cipher")
        {
            self = .protocolMismatch(Self.shortReason(message))
        } else {
            self = .other("handshake error: \(Self.shortReason(message))")
        }
    }

    /// `SSL certificate problem: EE certificate key too weak` → `EE certificate key too weak`.
    private static func problem(_ message: String) -> String {
        guard let colon = message.firstIndex(of: ":") else { return message }
        return message[message.index(after: colon)...].trimmingCharacters(in: .whitespaces)
    }

    /// `OpenSSL/3.0.19: error:0A00042E:SSL routines::tlsv1 alert protocol version` → `tlsv1 alert protocol version`.
    private static func shortReason(_ message: String) -> String {
        var text = Substring(message)
        if let comma = text.range(of: ", errno") { text = text[..<comma.lowerBound] }
        if let range = text.range(of: "SSL routines::") { return String(text[range.upperBound...]) }
        if let colon = text.lastIndex(of: ":") {
            return text[text.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return String(text)
    }
}
