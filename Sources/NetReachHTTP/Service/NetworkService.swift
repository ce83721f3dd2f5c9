import Dispatch
import HTTPTypes
import Logging
import Metrics
import NetReach
import NetReachSystem
import OpenAPIRuntime

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Sends requests that wait for the network instead of failing, are retried only when that is
/// safe, and fail with an error that explains itself.
///
/// ```swift
/// var policy = RequestPolicy()
/// policy.waitsForConnectivity = true
/// let service = NetworkService(baseURL: URL(string: "https://api.example.com")!,
///                              policy: policy, transport: URLSessionTransport())
/// let response = try await service.send(.get("/v1/status"))
/// ```
///
/// What happens to a request:
/// 1. If the monitor's path cannot carry it (no path, or a policy denial such as expensive access),
///    it waits for one when ``RequestPolicy/waitsForConnectivity`` is on (firing one
///    ``WaitingEvent``), fails with ``NetworkError/notConnected(_:path:)`` for a policy denial, and
///    otherwise is attempted anyway: the monitor explains failures, it does not pre-empt requests.
/// 2. The attempt goes through the transport with the request timeout.
/// 3. An attempt that could not connect while the path is unusable fails at once with
///    ``NetworkError/notConnected(_:path:)`` when not waiting (no back-off brings a network back);
///    when waiting, the retry waits for the path before it starts.
/// 4. A failed attempt is repeated only when the retry policy says so *and* repeating is safe
///    (``RetryAttempt/isSafeToRepeat``), after the policy's delay, within the resource timeout.
///    Waiting happens only before an attempt starts; one that loses the network mid-flight fails
///    with ``NetworkError/connectionLost(_:path:)``.
///
/// Cancelling the calling task cancels the wait, the back-off sleep and the transport request.
public final class NetworkService: Sendable {
    /// Paths of requests resolve against this URL.
    public let baseURL: URL?
    /// Header fields sent with every request (a request's own fields of the same name win).
    public let defaultHeaderFields: HTTPFields
    /// The service's policy; requests may override parts of it.
    public let policy: RequestPolicy
    /// What sends the bytes.
    public let transport: any HTTPTransport
    /// Where the service learns the network path; `nil` never waits and never explains.
    public let monitor: PathMonitor?
    /// Adapts every attempt, and may ask for one more after an unsuccessful status.
    public let interceptor: (any RequestInterceptor)?
    /// Where the service says what it does: each attempt and its outcome at debug, retries and
    /// waits for connectivity at info. Silent unless given.
    public let logger: Logger
    /// Counted once per request, attempt, retry and wait (the NetReach article "Metrics and logging").
    private let metrics: NetworkServiceMetrics
    private let waiting: WaitingBroadcast
    /// `baseURL`, split once so plain paths are joined to it without parsing it again.
    private let base: ResolvedTarget.Base?
    /// Monitors of the path to hosts given as addresses (and `localhost`), made as requests need them.
    private let destinationMonitors = DestinationMonitors()

    /// Creates a service.
    ///
    /// ```swift
    /// let service = NetworkService(baseURL: URL(string: "https://api.example.com/v1/")!,
    ///                              defaultHeaderFields: [.userAgent: "my-agent/1.0"],
    ///                              transport: URLSessionTransport())
    /// ```
    ///
    /// - Parameters:
    ///   - baseURL: what ``Request/Target/path(_:)`` targets resolve against (RFC 3986: `items`
    ///     joins the base's last directory, `/items` replaces its path); `nil` if every request
    ///     gives an absolute URL.
    ///   - defaultHeaderFields: sent with every request; a request's own field of the same name wins.
    ///   - policy: waiting, network access, timeouts, retries and acceptable statuses; each request
    ///     may override parts of it.
    ///   - transport: what sends the bytes, such as ``URLSessionTransport`` or
    ///     `AsyncHTTPClientTransport` (product `NetReachAsyncHTTPClient`).
    ///   - monitor: where the service learns the network path; by default `PathMonitor.shared`,
    ///     which starts itself. A monitor you pass unstarted is started by the service when it
    ///     first needs a path (to wait, to apply a policy, or to explain a failure), so a process
    ///     whose requests succeed never reads the system's network state. `nil` turns both off.
    ///   - onWaiting: called once each time a request starts waiting for connectivity.
    ///   - interceptor: adapts every attempt (tokens, signatures) and may ask for one more after an
    ///     unsuccessful status, within the safety rule.
    ///   - logger: a swift-log `Logger` for attempts (debug), retries and waits (info); silent if
    ///     `nil`.
    ///   - metricsFactory: makes the service's metrics (`netreach_http_*`); `nil` takes
    ///     `MetricsSystem.factory` now, a no-op unless the program bootstrapped a backend.
    public init(
        baseURL: URL? = nil, defaultHeaderFields: HTTPFields = [:], policy: RequestPolicy = RequestPolicy(),
        transport: any HTTPTransport, monitor: PathMonitor? = .shared,
        onWaiting: (@Sendable (WaitingEvent) -> Void)? = nil,
        interceptor: (any RequestInterceptor)? = nil, logger: Logger? = nil,
        metricsFactory: (any MetricsFactory)? = nil
    ) {
        self.metrics = NetworkServiceMetrics(factory: metricsFactory ?? MetricsSystem.factory)
        self.interceptor = interceptor
        self.logger = logger ?? Logger(label: "netreach.http", factory: { _ in SwiftLogNoOpLogHandler() })
        self.baseURL = baseURL
        self.base = baseURL.map(ResolvedTarget.Base.init)
        self.defaultHeaderFields = defaultHeaderFields
        self.policy = policy
        self.transport = transport
        self.monitor = monitor
        self.waiting = WaitingBroadcast(callback: onWaiting)
    }

    deinit { destinationMonitors.cancelAll() }

    /// The monitor whose path decides for `url`: for an address or `localhost`, the path to that
    /// destination (a request to 127.0.0.1 needs no default route; one to an address behind a
    /// split tunnel waits for the tunnel); for any other host name, the path to the internet,
    /// since resolving names is the transport's business.
    private func pathMonitor(for url: URL) async -> PathMonitor? {
        // A monitor given unstarted is started now, when a path is first needed.
        if let monitor, monitor.isIdle {
            _ = await BlockingWork.run(named: "netreach-start") { monitor.startIfIdle(queue: Self.lazyStartQueue) }
        }
        // A monitor that is not observing (cancelled, failed) explains nothing, and neither would
        // one made from it.
        guard let monitor, monitor.currentPath.unsatisfiedReason != .monitorUnavailable,
            let host = url.host?.lowercased()
        else { return monitor }
        let destination = PathDestination(host)
        if case .host(let name) = destination, name != "localhost" { return monitor }
        if let existing = destinationMonitors.existing(for: destination) { return existing }
        // Starting one resolves `localhost` and waits for the source's first answer.
        let made = await BlockingWork.run(named: "netreach-start") { monitor.monitoring(destination) }
        return destinationMonitors.keep(made, for: destination)
    }

    /// Whether the internet path judges requests to `url`: any host name but `localhost` (an
    /// address or `localhost` has a path of its own, see `pathMonitor(for:)`).
    private static func isJudgedByInternetPath(_ url: URL) -> Bool {
        guard let host = url.host?.lowercased() else { return false }
        if case .host(let name) = PathDestination(host), name != "localhost" { return true }
        return false
    }

    /// Where a monitor the service starts itself delivers its paths.
    private static let lazyStartQueue = DispatchQueue(label: "NetReach.NetworkService.monitor")

    /// The path `monitor` sees now, started first if it was given unstarted: a failure explained
    /// by a monitor that never looked would read "monitor unavailable" on a machine whose network
    /// is fine.
    static func observedPath(_ monitor: PathMonitor?) async -> NetworkPath? {
        guard let monitor else { return nil }
        if monitor.isIdle {
            _ = await BlockingWork.run(named: "netreach-start") { monitor.startIfIdle(queue: lazyStartQueue) }
        }
        return monitor.currentPath
    }

    /// Every ``WaitingEvent`` from now on; any number of consumers, each with its own sequence.
    public var waitingEvents: AsyncStream<WaitingEvent> { waiting.stream() }

    /// Sends `request` and returns the response with its whole body, or throws why not.
    ///
    /// The body is held in memory up to ``RequestPolicy/maximumBufferedBodySize`` (64 MiB by
    /// default); a longer one fails with ``NetworkError/bodyTooLarge(limit:)``. For bodies of any
    /// size use ``bytes(_:)`` or ``download(_:to:resume:progress:)``.
    ///
    /// - Parameters:
    ///   - request: what to send; its policy overrides apply to it alone.
    ///   - progress: called as response body bytes arrive (bytes so far, and the expected
    ///   total if the server said), for every attempt; a retried attempt starts again from zero.
    ///
    /// - Returns: the response with an acceptable status, with the attempts it took and the time it
    ///   waited for connectivity.
    /// - Throws: a ``NetworkError`` saying why there is no such response.
    ///
    /// ```swift
    /// let response = try await service.send(.get("/v1/items")) { received, expected in
    ///     print(received, expected ?? -1)
    /// }
    /// ```
    public func send(
        _ request: Request, progress: (@Sendable (_ received: Int64, _ expected: Int64?) -> Void)? = nil
    ) async throws(NetworkError) -> Response {
        try await perform(request) { exchange throws(AttemptFailure) in
            let limit = exchange.policy.maximumBufferedBodySize
            let body = try await Self.collect(exchange.body, upTo: limit, progress: progress) { _ in
                .local(.bodyTooLarge(limit: limit))
            }
            return Response(
                status: exchange.head.status, headerFields: exchange.head.headerFields, body: body,
                url: exchange.url, attempts: exchange.attempt, waitedForConnectivity: exchange.waited)
        }
    }

    /// Sends `request` and returns once the response head has arrived, with its body as a stream
    /// that you read at your own pace (the transfer goes as fast as you read, in constant memory).
    ///
    /// Waiting, retries and status checks are as for ``send(_:progress:)`` up to the response head;
    /// a failure while you read the body is thrown by the stream (a ``NetworkError``) and is not
    /// retried: the part you read cannot be taken back. Stop reading and drop the stream to end the
    /// transfer early.
    ///
    /// ```swift
    /// let stream = try await service.bytes(.get("/v1/events"))
    /// for try await chunk in stream.body {
    ///     print(String(decoding: chunk, as: UTF8.self), terminator: "")
    /// }
    /// ```
    public func bytes(_ request: Request) async throws(NetworkError) -> StreamingResponse {
        try await perform(request) { exchange throws(AttemptFailure) in
            StreamingResponse(
                status: exchange.head.status, headerFields: exchange.head.headerFields,
                body: ResponseBody(exchange.body, path: exchange.monitor, attempts: exchange.attempt),
                url: exchange.url, attempts: exchange.attempt, waitedForConnectivity: exchange.waited)
        }
    }

    // MARK: - Into a file

    /// Downloads the response body straight into a file, in constant memory, resuming where a
    /// failed attempt stopped.
    ///
    /// The bytes go to `NAME.part` beside the file and are renamed over it when whole, so a
    /// half-finished download never sits under the final name; an existing file keeps its owner
    /// and mode, and a device or FIFO (`/dev/null`) is written in place, never replaced.
    ///
    /// When an attempt fails after part of the body arrived and the retry policy repeats it (only
    /// idempotent requests, such as GET), the next attempt asks for the rest (`Range: bytes=N-`),
    /// guarded by `If-Range` with the first response's strong `ETag` or `Last-Modified`, so a body
    /// that changed in between is sent whole instead of spliced. The file holds the body as
    /// decoded, so that request says `Accept-Encoding: identity` (whose bytes are the decoded
    /// ones; after a gzip response, `If-Range` is its `Last-Modified` when it has one), and a 206
    /// in a content coding or of another version than `If-Range` named is not spliced: the next
    /// attempt, at once, asks for the whole body. A server that answers 200 instead
    /// of 206 sends the body again from the start: the file starts over and
    /// ``DownloadResponse/restarts`` counts it. A server that gave no validator is not asked for a
    /// range (the parts could come from two versions), so a retry starts over.
    ///
    /// With `resume`, a `NAME.part` left by an earlier failed call (or a regular file at `NAME`)
    /// is continued the same way; since its validator is not known any more, the first request asks
    /// for the rest without `If-Range`, as `curl -C -` does.
    ///
    /// A request with its own `Range` header is sent as it is, and the part the server sends (206)
    /// is the file, as curl saves it; a retry asks for the same range and the file starts over.
    ///
    /// - Parameters:
    ///   - request: what to send; usually a GET.
    ///   - destination: a file URL.
    ///   - resume: continue a partial file left by an earlier call.
    ///   - progress: bytes in the file so far, and the full length if known; after a restart the
    ///     count starts again from zero.
    /// - Returns: the final response's head and what the transfer took.
    /// - Throws: ``NetworkError``; ``NetworkError/cannotWrite(_:)`` when the file cannot be written
    ///   (full disk, no permission), never retried. On failure the partial file is kept (as
    ///   `NAME.part`) when the request could resume, and removed otherwise.
    ///
    /// ```swift
    /// let result = try await service.download(.get("/images/disk.iso"),
    ///                                         to: URL(fileURLWithPath: "disk.iso")) { received, total in
    ///     print(received, total ?? -1)
    /// }
    /// print(result.bytes, result.resumedAt)   // e.g. 734003200 [52428800]
    /// ```
    public func download(
        _ request: Request, to destination: URL, resume: Bool = false,
        progress: (@Sendable (_ received: Int64, _ expected: Int64?) -> Void)? = nil
    ) async throws(NetworkError) -> DownloadResponse {
        let file: OutputFile
        do throws(OutputFileError) { file = try OutputFile.open(destination.path, resume: resume) } catch {
            throw .cannotWrite(error.description)
        }
        // A range the caller asked for is sent as it is, on every attempt, and its 206 is the
        // body (as `curl -r` or `-H 'Range: ...' -o` saves it): no range of our own then.
        let askedRange = request.headerFields[.range] != nil
        let canResume = request.isIdempotent && !askedRange
        let state = DownloadState(present: file.resumeOffset, validator: nil, trustedWithoutValidator: resume)
        do throws(NetworkError) {
            let head = try await perform(
                request,
                prepare: { head in
                    if askedRange { return }
                    head.headerFields[.range] = nil
                    head.headerFields[.ifRange] = nil
                    guard canResume, let range = state.rangeRequest() else { return }
                    head.headerFields[.range] = range.range
                    if let validator = range.ifRange { head.headerFields[.ifRange] = validator }
                    // The file holds decoded bytes: only the identity representation counts its
                    // bytes the same way (a range of a gzip body counts gzip bytes).
                    head.headerFields[.acceptEncoding] = "identity"
                },
                accepts: { response in
                    // Asked for the rest of a file that is already whole.
                    !askedRange && response.status.code == 416 && state.isWholeAccording(to: response)
                },
                read: { exchange throws(AttemptFailure) in
                    try await Self.receive(
                        exchange, into: file, state: state, askedRange: askedRange, progress: progress)
                })
            do throws(OutputFileError) { try file.commit() } catch {
                throw NetworkError.cannotWrite(error.description).after(attempts: head.attempts)
            }
            let snapshot = state.snapshot
            return DownloadResponse(
                status: head.status, headerFields: head.headerFields, url: head.url, fileURL: destination,
                bytes: snapshot.present, attempts: head.attempts, waitedForConnectivity: head.waited,
                resumedAt: snapshot.resumedAt, restarts: snapshot.restarts)
        } catch {
            file.abandon(keepPartial: canResume && file.resumeOffset + file.written > 0)
            throw error
        }
    }

    /// The head of the response a download finished with.
    struct DownloadHead: Sendable {
        var status: HTTPResponse.Status
        var headerFields: HTTPFields
        var url: URL
        var attempts: Int
        var waited: Duration
    }

    /// Reads one attempt's body into `file`: appended after a 206 that continues it, from the start
    /// after a 200.
    private static func receive(
        _ exchange: Exchange, into file: OutputFile, state: DownloadState, askedRange: Bool,
        progress: (@Sendable (Int64, Int64?) -> Void)?
    ) async throws(AttemptFailure) -> DownloadHead {
        let head = DownloadHead(
            status: exchange.head.status, headerFields: exchange.head.headerFields,
            url: exchange.url, attempts: exchange.attempt, waited: exchange.waited)
        if exchange.head.status.code == 416 { return head } // already whole (see `accepts`)
        var present = state.snapshot.present
        let expected: Int64?
        if exchange.head.status.code == 206 && !askedRange {
            guard let range = ContentRange(exchange.head.headerFields[.contentRange] ?? ""), range.start == present
            else {
                throw .transport(
                    TransportError(
                        .invalidResponse,
                        "206 with Content-Range '\(exchange.head.headerFields[.contentRange] ?? "")', asked for bytes \(present)-"
                    ))
            }
            if let refusal = state.refusal(of: exchange.head) {
                // Never spliced: the next attempt asks for the whole body.
                state.refuseRanges()
                throw .startOver(refusal)
            }
            state.resumed(at: present)
            expected = range.total
        } else {
            if present > 0 {
                do throws(OutputFileError) { try file.truncateForRestart() } catch {
                    throw .local(.cannotWrite(error.description))
                }
                state.restarted()
                present = 0
            }
            if case .known(let length) = exchange.body.length { expected = length } else { expected = nil }
        }
        // A 206 continues the body the validator guards; a 200 is a (possibly new) body of its own.
        state.remember(
            validator: Validator(exchange.head.headerFields), total: expected,
            replacing: exchange.head.status.code != 206)
        progress?(present, expected)
        do {
            for try await chunk in exchange.body {
                do throws(OutputFileError) { try file.write(chunk) } catch {
                    throw AttemptFailure.local(.cannotWrite(error.description))
                }
                present += Int64(chunk.count)
                state.wrote(chunk.count)
                progress?(present, expected)
            }
        } catch let error as AttemptFailure {
            throw error
        } catch {
            throw .transport(error as? TransportError ?? TransportError(.other, String(describing: error)))
        }
        if let expected, present != expected {
            throw .transport(TransportError(.partialBody, "the body ended after \(present) of \(expected) bytes"))
        }
        return head
    }

    // MARK: - The attempt loop

    /// One attempt's response, handed to what reads its body.
    struct Exchange: Sendable {
        var head: HTTPResponse
        var body: HTTPBody
        var url: URL
        var attempt: Int
        var waited: Duration
        var policy: RequestPolicy
        var monitor: PathMonitor?
    }

    /// Why reading an attempt's body failed: the transfer (retried when safe), or something on
    /// this side (never retried).
    enum AttemptFailure: Error {
        case transport(TransportError)
        case local(NetworkError)
        /// The response cannot be used, for this reason, but asking again differently can (a
        /// download whose range was answered in a way that cannot continue the file): another
        /// attempt at once, outside the retry budget. Whoever throws it makes sure the next
        /// attempt differs, so it comes at most once per cause.
        case startOver(String)
    }

    /// Runs `request` through waiting, attempts and retries; `read` consumes the body of a response
    /// whose status the policy accepts. `prepare` may change the head of each attempt (resuming).
    /// Counts the request's outcome.
    func perform<Result: Sendable>(
        _ request: Request,
        body requestBody: HTTPBody? = nil,
        prepare: (_ head: inout HTTPRequest) -> Void = { _ in },
        accepts: (HTTPResponse) -> Bool = { _ in false },
        read: (Exchange) async throws(AttemptFailure) -> Result
    ) async throws(NetworkError) -> Result {
        do {
            let result = try await performAttempts(
                request, body: requestBody, prepare: prepare, accepts: accepts, read: read)
            metrics.succeeded()
            return result
        } catch {
            metrics.failed(error)
            throw error
        }
    }

    private func performAttempts<Result: Sendable>(
        _ request: Request,
        body requestBody: HTTPBody?,
        prepare: (_ head: inout HTTPRequest) -> Void,
        accepts: (HTTPResponse) -> Bool,
        read: (Exchange) async throws(AttemptFailure) -> Result
    ) async throws(NetworkError) -> Result {
        guard let target = ResolvedTarget.resolve(request.target, queryItems: request.queryItems, base: base) else {
            throw .invalidURL(Self.describe(request.target, baseURL))
        }
        let policy = self.policy.applying(request.policyOverrides)
        // The path is needed before an attempt only to wait or to deny; otherwise only a failure
        // needs it (to explain), so a per-destination monitor is made then, not on every request.
        let needsPathFirst =
            policy.waitsForConnectivity || !policy.allowsExpensiveNetworkAccess
            || !policy.allowsConstrainedNetworkAccess || !policy.allowsCellularAccess
        let clock = ContinuousClock()
        var attempts = AttemptsStateMachine(
            url: target.url, head: makeHead(request, target: target),
            body: (requestBody ?? request.body).map(ReplayTracker.init), policy: policy,
            hasIdempotencyKey: request.idempotencyKey != nil, start: clock.now)
        var monitor = needsPathFirst ? await pathMonitor(for: attempts.url) : self.monitor
        var monitorIsForURL = needsPathFirst
        var waited = Duration.zero
        do throws(NetworkError) {
            while true {
                if Task.isCancelled { throw .cancelled }
                let attempt = attempts.beginAttempt()
                let url = attempts.url
                // A policy that neither waits nor denies lets every path through (an unsatisfied one
                // is attempted and explained), so the path is not asked before the attempt.
                if needsPathFirst {
                    waited += try await clearance(
                        for: request, url: url, policy: policy, monitor: monitor, until: attempts.deadline)
                }
                guard attempts.deadline > clock.now else { throw .timedOut(path: monitor?.currentPath) }

                let failure: RetryAttempt.Failure
                let explained: NetworkError
                do throws(AttemptFailure) {
                    var head = attempts.head
                    prepare(&head)
                    if let interceptor {
                        do { try await interceptor.adapt(&head, attempt: attempt) } catch {
                            if error is CancellationError || Task.isCancelled { throw AttemptFailure.local(.cancelled) }
                            throw AttemptFailure.local(
                                .transport(
                                    TransportError(.other, "the request interceptor failed: \(error)"),
                                    path: monitor?.currentPath))
                        }
                    }
                    logger.debug(
                        "attempt",
                        metadata: [
                            "attempt": "\(attempt)", "method": "\(head.method)",
                            "url": "\(Self.withoutPassword(url))",
                        ])
                    let options = TransportOptions(
                        stallTimeout: policy.timeoutIntervalForRequest, deadline: attempts.deadline)
                    let response: HTTPResponse
                    let responseBody: HTTPBody
                    attempts.didSend()
                    metrics.attempts.increment()
                    do throws(TransportError) {
                        (response, responseBody) = try await transport.send(
                            head, body: attempts.body?.body(), options: options)
                    } catch {
                        throw .transport(error)
                    }
                    if let hop = try redirect(
                        from: response, body: responseBody, url: url, head: attempts.head,
                        requestBody: attempts.body, policy: policy, followed: attempts.redirects)
                    {
                        // Another hop, not another attempt: the retry budget and the deadline carry over.
                        if attempts.follow(hop) {
                            monitor = needsPathFirst ? await pathMonitor(for: hop.url) : self.monitor
                            monitorIsForURL = needsPathFirst
                        }
                        continue
                    }
                    if policy.acceptableStatusCodes.contains(response.status.code) || accepts(response) {
                        // An answer over the internet path is evidence that it works (a connectivity
                        // monitor of the same path monitor postpones its probes); one to a local
                        // address or localhost says nothing about the internet.
                        if let evidence = self.monitor?.evidence, evidence.isHeard, Self.isJudgedByInternetPath(url) {
                            evidence.report(.exchangeSucceeded)
                        }
                        return try await read(
                            Exchange(
                                head: response, body: responseBody, url: url, attempt: attempt,
                                waited: waited, policy: policy, monitor: monitor))
                    }
                    // What the server said about the failure: the start of its body, enough to read.
                    let errorBody: Data
                    do throws(AttemptFailure) {
                        errorBody = try await Self.collect(responseBody, upTo: Self.errorBodyLimit, progress: nil) {
                            prefix in
                            .local(.unsuccessfulStatus(response.status, body: prefix))
                        }
                    } catch {
                        // The status is the answer; a body that cannot be decoded only goes unsaid.
                        guard case .transport(let failure) = error, failure.kind == .badContentEncoding else {
                            throw error
                        }
                        errorBody = Data()
                    }
                    let retryAfter = response.headerFields[.retryAfter].flatMap { RetryAfter.delay(from: $0) }
                    failure = .status(response.status.code, retryAfter: retryAfter)
                    explained = .unsuccessfulStatus(response.status, body: errorBody)
                    logger.debug(
                        "unsuccessful status", metadata: ["attempt": "\(attempt)", "status": "\(response.status.code)"])
                    // The interceptor's one extra attempt (a refreshed token), under the safety rule.
                    if let interceptor, attempts.interceptorMayRetry(after: failure, now: clock.now),
                        await interceptor.retry(after: response, attempt: attempt)
                    {
                        attempts.interceptorRetries()
                        metrics.retryingForInterceptor()
                        logger.info(
                            "retrying at the interceptor's request", metadata: ["status": "\(response.status.code)"])
                        continue
                    }
                } catch {
                    switch error {
                    case .local(let error):
                        // An error body longer than what is kept: the status is the failure.
                        guard case .unsuccessfulStatus(let status, let body) = error.reason,
                            !policy.acceptableStatusCodes.contains(status.code)
                        else { throw error }
                        failure = .status(status.code, retryAfter: nil)
                        explained = .unsuccessfulStatus(status, body: body)
                    case .startOver(let reason):
                        logger.info("asking again", metadata: ["attempt": "\(attempt)", "reason": "\(reason)"])
                        continue
                    case .transport(let error):
                        if error.kind == .cancelled || Task.isCancelled { throw .cancelled }
                        if !monitorIsForURL {
                            monitor = await pathMonitor(for: url)
                            monitorIsForURL = true
                        }
                        failure = .transport(error)
                        explained = explain(error, policy: policy, monitor: monitor)
                    }
                }

                // An attempt that could not leave while the monitor sees no usable path: without waiting,
                // no back-off will bring the network back, so say so now (as URLSession's
                // notConnectedToInternet does). With waiting, the next attempt waits for the path first.
                if case .notConnected = explained.reason, !policy.waitsForConnectivity { throw explained }

                // The safety rule is the service's, not the policy's (``AttemptsStateMachine``).
                guard case .retry(let delay) = attempts.next(after: failure, now: clock.now) else {
                    logger.debug("giving up", metadata: ["attempt": "\(attempt)", "error": "\(explained.reason)"])
                    throw explained
                }
                metrics.retrying(after: failure)
                logger.info(
                    "retrying",
                    metadata: ["attempt": "\(attempt)", "after": "\(delay)", "error": "\(explained.reason)"])
                do { try await Task.sleep(for: delay) } catch { throw .cancelled }
            }
        } catch {
            throw error.after(attempts: attempts.sent)
        }
    }

    /// The next hop of a redirect the policy follows, or `nil` when `response` is not one (no
    /// `Location`, a status that is not 301, 302, 303, 307 or 308, or redirects not followed).
    private func redirect(
        from response: HTTPResponse, body responseBody: HTTPBody, url: URL, head: HTTPRequest,
        requestBody: ReplayTracker?, policy: RequestPolicy, followed: Int
    ) throws(AttemptFailure) -> Redirect.Hop? {
        guard case .follow(let limit, let allowsInsecure) = policy.redirects,
            let location = response.headerFields[.location]
        else { return nil }
        guard let hop = Redirect.hop(status: response.status.code, location: location, from: url, head: head) else {
            return nil
        }
        guard followed < limit else {
            throw .local(.redirectRefused("more than \(limit) redirects", location: hop.url))
        }
        if url.scheme?.lowercased() == "https" && hop.url.scheme?.lowercased() == "http" && !allowsInsecure {
            throw .local(.redirectRefused("from https to http", location: hop.url))
        }
        if hop.keepsBody, let requestBody, !requestBody.canReplay {
            throw .local(
                .redirectRefused(
                    "a \(response.status.code) must send the body again, and it was a single-pass stream",
                    location: hop.url))
        }
        _ = responseBody // dropped unread: the connection closes if the body was not empty
        return hop
    }

    /// How much of an unsuccessful response's body is kept for ``NetworkError/unsuccessfulStatus(_:body:)``.
    static let errorBodyLimit = 64 << 10

    /// Reads `body` whole, up to `limit` bytes; past that, throws what `tooLong` makes of the
    /// first `limit` bytes.
    static func collect(
        _ body: HTTPBody, upTo limit: Int, progress: (@Sendable (Int64, Int64?) -> Void)?,
        tooLong: (Data) -> AttemptFailure
    ) async throws(AttemptFailure) -> Data {
        var expected: Int64?
        if case .known(let length) = body.length { expected = length }
        var data = Data()
        if let expected, expected > 0 { data.reserveCapacity(Int(min(expected, Int64(limit), 64 << 20))) }
        do {
            for try await chunk in body {
                guard data.count + chunk.count <= limit else {
                    data.append(contentsOf: chunk.prefix(limit - data.count))
                    throw tooLong(data)
                }
                data.append(contentsOf: chunk)
                progress?(Int64(data.count), expected)
            }
        } catch let error as AttemptFailure {
            throw error
        } catch {
            throw .transport(error as? TransportError ?? TransportError(.other, String(describing: error)))
        }
        if data.isEmpty { progress?(0, expected) }
        return data
    }

    /// Sends `request` and delivers the result on `queue`: for code written in the completion-
    /// handler style. The returned handle cancels the request.
    ///
    /// ```swift
    /// let handle = service.send(.get("/v1/feed"), queue: .main) { result in
    ///     switch result {
    ///     case .success(let response): render(response.body)
    ///     case .failure(let error): show(error.description)
    ///     }
    /// }
    /// ```
    @discardableResult
    public func send(
        _ request: Request, queue: DispatchQueue,
        completion: @escaping @Sendable (Result<Response, NetworkError>) -> Void
    ) -> RequestHandle {
        let task = Task {
            let result: Result<Response, NetworkError>
            do throws(NetworkError) { result = .success(try await send(request)) } catch { result = .failure(error) }
            queue.async { completion(result) }
        }
        return RequestHandle(task: task)
    }

    // MARK: - Connectivity

    /// Returns once the request may be attempted (after how long a wait), or throws why not.
    private func clearance(
        for request: Request, url: URL, policy: RequestPolicy, monitor: PathMonitor?,
        until deadline: ContinuousClock.Instant
    ) async throws(NetworkError) -> Duration {
        guard let monitor else { return .zero }
        let path = monitor.currentPath
        // A monitor that cannot see the system explains nothing and must not hold requests back.
        guard path.unsatisfiedReason != .monitorUnavailable,
            let denial = ConnectivityGate.denial(for: path, policy: policy)
        else {
            return .zero
        }
        if policy.waitsForConnectivity {
            return try await waitForClearance(
                monitor: monitor, request: request, url: url, policy: policy,
                reason: denial, path: path, until: deadline)
        }
        if case .noPath = denial { return .zero } // don't preflight: attempt, and explain a failure
        throw .notConnected(denial, path: path)
    }

    private enum WaitOutcome: Sendable { case ready, deadline, cancelled }

    private func waitForClearance(
        monitor: PathMonitor, request: Request, url: URL, policy: RequestPolicy,
        reason: NotConnectedReason, path: NetworkPath, until deadline: ContinuousClock.Instant
    ) async throws(NetworkError) -> Duration {
        let started = ContinuousClock.now
        metrics.waits.increment()
        logger.info(
            "waiting for connectivity", metadata: ["reason": "\(reason)", "url": "\(Self.withoutPassword(url))"])
        let paths = monitor.paths // created before the event, so no change can slip between
        waiting.send(WaitingEvent(method: request.method, url: url, reason: reason, path: path))
        let outcome = await withTaskGroup(of: WaitOutcome.self) { group in
            group.addTask {
                for await path in paths
                where path.unsatisfiedReason == .monitorUnavailable
                    || ConnectivityGate.denial(for: path, policy: policy) == nil
                {
                    return .ready
                }
                return .cancelled
            }
            group.addTask {
                do { try await Task.sleep(until: deadline, clock: .continuous) } catch { return .cancelled }
                return .deadline
            }
            let first = await group.next() ?? .cancelled
            group.cancelAll()
            return first
        }
        let waited = ContinuousClock.now - started
        switch outcome {
        case .ready where !Task.isCancelled:
            metrics.waited(waited, .connected)
            return waited
        case .deadline where !Task.isCancelled:
            metrics.waited(waited, .timedOut)
            let now = monitor.currentPath
            throw .waitingForConnectivityTimedOut(
                ConnectivityGate.denial(for: now, policy: policy) ?? reason, path: now)
        default:
            metrics.waited(waited, .cancelled)
            throw .cancelled
        }
    }

    // MARK: - Building and explaining

    private func makeHead(_ request: Request, target: ResolvedTarget) -> HTTPRequest {
        var fields = request.headerFields
        for field in defaultHeaderFields where fields[field.name] == nil { fields.append(field) }
        if let key = request.idempotencyKey { fields[.idempotencyKey] = key }
        // `user:password@` in the URL is Basic authentication, as curl sends it; a header the
        // request sets itself wins.
        if let credentials = target.credentials, fields[.authorization] == nil {
            let token = Data("\(credentials.user):\(credentials.password)".utf8).base64EncodedString()
            fields[.authorization] = "Basic \(token)"
        }
        return HTTPRequest(
            method: request.method, scheme: target.scheme, authority: target.authority,
            path: target.pathAndQuery, headerFields: fields)
    }

    /// A transport failure as a ``NetworkError``, with the path at this moment: a request that could
    /// not connect while the path was unusable for this request's `policy` is "not connected", which
    /// is what happened.
    private func explain(_ error: TransportError, policy: RequestPolicy, monitor: PathMonitor?) -> NetworkError {
        let path = monitor?.currentPath
        switch error.kind {
        case .cannotConnect, .dnsFailure, .hostNotFound, .connectTimeout:
            if let path, path.unsatisfiedReason != .monitorUnavailable,
                let denial = ConnectivityGate.denial(for: path, policy: policy)
            {
                return .notConnected(denial, path: path)
            }
            return .transport(error, path: path)
        case .connectionLost: return .connectionLost(error.detail, path: path)
        case .timedOut: return .timedOut(path: path)
        case .invalidResponse: return .invalidResponse(error.detail)
        case .cancelled: return .cancelled
        case .invalidRequest, .other, .proxyFailure, .badContentEncoding, .partialBody:
            return .transport(error, path: path)
        case .tlsFailure, .decodedBodyTooLarge: return .transport(error, path: path)
        }
    }

    private static func describe(_ target: Request.Target, _ baseURL: URL?) -> String {
        switch target {
        case .url(let url): withoutPassword(url)
        case .path(let path): baseURL.map { "\(path) relative to \(withoutPassword($0))" } ?? "\(path) (no base URL)"
        }
    }

    /// `url` as text with any password replaced by `***`: error messages end up in logs.
    static func withoutPassword(_ url: URL) -> String {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: true),
            components.percentEncodedPassword != nil
        else { return url.absoluteString }
        components.percentEncodedPassword = "***"
        return components.string ?? "(a URL with a password)"
    }
}

/// Cancels a request sent with a completion handler.
public struct RequestHandle: Sendable {
    let task: Task<Void, Never>

    /// Cancels the request; its completion receives ``NetworkError/cancelled`` unless it already
    /// finished.
    public func cancel() { task.cancel() }
}

extension HTTPField.Name {
    /// `Idempotency-Key` (draft-ietf-httpapi-idempotency-key-header).
    static let idempotencyKey = HTTPField.Name("Idempotency-Key")!
}

/// The service's per-destination monitors, keyed by destination; at most `limit`, so a client
/// that talks to ever new addresses cannot grow them without bound (the least recently used is let go, and
/// stops once no request holds it).
private final class DestinationMonitors: Sendable {
    private struct State {
        var monitors: [PathDestination: PathMonitor] = [:]
        /// Least recently used first.
        var order: [PathDestination] = []
    }

    private let state = Locked(State())
    private let limit = 32

    /// The monitor kept for `destination`, now the most recently used.
    func existing(for destination: PathDestination) -> PathMonitor? {
        state.withLock { state in
            guard let monitor = state.monitors[destination] else { return nil }
            if let position = state.order.firstIndex(of: destination) {
                state.order.append(state.order.remove(at: position))
            }
            return monitor
        }
    }

    /// Keeps `made` for `destination`, unless another request kept one first (then that one).
    func keep(_ made: PathMonitor, for destination: PathDestination) -> PathMonitor {
        let raced = state.withLock { state -> PathMonitor? in
            if let raced = state.monitors[destination] { return raced }
            state.monitors[destination] = made
            state.order.append(destination)
            // The least recently used is dropped, not cancelled: a request may still be waiting
            // on it; it stops when released.
            if state.order.count > limit { state.monitors.removeValue(forKey: state.order.removeFirst()) }
            return nil
        }
        guard let raced else { return made }
        made.cancel()
        return raced
    }

    func cancelAll() {
        let all = state.withLock { state -> [PathMonitor] in
            defer { state = State() }
            return Array(state.monitors.values)
        }
        for monitor in all { monitor.cancel() }
    }
}
