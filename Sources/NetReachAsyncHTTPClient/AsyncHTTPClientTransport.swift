import AsyncHTTPClient
import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPCompression
import NIOPosix
import NIOSSL
import NetReach
import NetReachHTTP
import NetReachSystem
import OpenAPIRuntime

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

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
/// Like ``NetReachHTTP/URLSessionTransport`` it never follows a redirect (a 3xx is a response, with
/// its `Location`), asks for `gzip` and `deflate` (`Accept-Encoding: deflate, gzip` unless the
/// request says otherwise) and decodes them whatever the compression ratio, up to
/// ``NetReachHTTP/TransportSettings/maximumDecodedBodySize`` (neither with
/// ``NetReachHTTP/TransportSettings/decodesContentCodings`` off), and goes through the proxy that
/// ``NetReachHTTP/ProxySettings`` chooses, by curl's rules: as curl, an `https` request through a
/// `CONNECT` tunnel, a plain `http` one to the proxy in absolute form (`GET http://host/path`),
/// which stock proxies allow where they refuse `CONNECT` to any port but 443.
///
/// With settings (``init(settings:)``, ``init()``), a server's certificate must name the URL's
/// host, as curl checks it: an address-only certificate is not one for a name, whatever address
/// the name led to; the connection speaks ``NetReachHTTP/TLSSettings/minimumProtocolVersion`` or
/// newer (TLS 1.2 by default); and, unless ``NetReachHTTP/TLSSettings/allowsWeakCertificates``,
/// the server's certificates must be strong enough: the leaf is judged on every connection, the
/// rest of its chain on one more handshake to the same address, once per leaf certificate in the
/// process (the leaf alone through a proxy). A client given to ``init(client:)`` keeps its own TLS
/// configuration and none of these checks.
///
/// Failures are classified from AsyncHTTPClient's, SwiftNIO's and NIOSSL's errors: a refused
/// connection, a failed DNS lookup or a failed TLS handshake is provably unsent; a reset, an early
/// close or a timeout after the connection was up is not.
public struct AsyncHTTPClientTransport: HTTPTransport {
    /// The client requests go through when no proxy applies (with settings, one of the clients
    /// this transport made and owns).
    public let client: HTTPClient
    /// Set by the initialisers (those from settings are in ClientSet.swift).
    let routing: Routing

    /// Which client a request goes through.
    enum Routing: Sendable {
        /// Always the one client given.
        case single
        /// Clients made from settings (or the environment's defaults).
        case owned(ClientSet)
        /// The environment's default settings could not be used, for this reason.
        case unusable(TransportSettingsError)
    }

    /// Creates a transport that sends every request through `client`, as it is configured.
    ///
    /// `client` should not follow redirects (`redirectConfiguration = .disallow`): a transport
    /// returns a 3xx as a response and the service decides, and AsyncHTTPClient does not say
    /// which configuration a client has. Its TLS, proxy and decompression settings are used as
    /// they are (AsyncHTTPClient's decompression inflates each network read whole, however large it
    /// becomes; a client without it gets bodies as they were sent, except ``defaultClient``, whose
    /// bodies this transport decodes in bounded pieces); ``init(settings:)`` makes clients with
    /// all of that set as ``NetReachHTTP/TransportSettings`` says. Passing `HTTPClient.shared` works too, but that
    /// client follows redirects and keeps retrying a refused connection until the request's timeout
    /// runs out, so "nothing listening" takes the whole timeout to report.
    ///
    /// ```swift
    /// var configuration = HTTPClient.Configuration()
    /// configuration.connectionPool.retryConnectionEstablishment = false   // report "refused" at once
    /// configuration.redirectConfiguration = .disallow                       // a 3xx is a response
    /// let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    /// let transport = AsyncHTTPClientTransport(client: client)
    /// // ... send requests ...
    /// try await client.shutdown()
    /// ```
    public init(client: HTTPClient) {
        self.client = client
        self.routing = .single
    }

    /// Creates a transport with the default settings, `TransportSettings()`: the system's trust
    /// roots (or `SSL_CERT_FILE` / `SSL_CERT_DIR`) and the environment's proxies (`http_proxy`,
    /// `https_proxy`, `no_proxy`, ...), read once per process, when the first such transport is made.
    ///
    /// Transports made this way share their clients, which are never shut down. Should the
    /// environment name a trust file that cannot be used, every request fails with
    /// ``NetReachHTTP/TransportError/Kind/invalidRequest`` saying why (nothing is sent);
    /// ``init(settings:)`` throws that at once instead.
    ///
    /// ```swift
    /// let transport = AsyncHTTPClientTransport()
    /// ```
    public init() {
        switch Self.defaultClients {
        case .success(let clients):
            self.client = clients.direct
            self.routing = .owned(clients)
        case .failure(let error):
            self.client = Self.defaultClient
            self.routing = .unusable(error)
        }
    }

    /// The client used by ``init(client:)`` callers who want the old default: one per process,
    /// never shut down, with no TLS or proxy settings of its own.
    ///
    /// It is `HTTPClient.shared`'s configuration except that a connection that cannot be
    /// established fails the waiting requests at once (`retryConnectionEstablishment = false`),
    /// redirects are returned rather than followed, and bodies arrive as they were sent: the
    /// transport decodes gzip and deflate in pieces of 64 KiB, up to
    /// ``NetReachHTTP/TransportSettings/defaultMaximumDecodedBodySize`` whatever the compression ratio:
    /// retrying and redirecting are the service's decisions, and a refused connection should say
    /// so in milliseconds, not after the timeout.
    ///
    /// ```swift
    /// let transport = AsyncHTTPClientTransport(client: AsyncHTTPClientTransport.defaultClient)
    /// ```
    public static let defaultClient: HTTPClient = {
        var configuration = HTTPClient.Configuration.singletonConfiguration
        ClientSet.applyCommonSettings(to: &configuration)
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }()

    /// The clients of ``init()``, made once from the environment.
    private static let defaultClients: Result<ClientSet, TransportSettingsError> = {
        do throws(TransportSettingsError) {
            return .success(
                try ClientSet(
                    settings: TransportSettings(), environment: ProcessInfo.processInfo.environment,
                    shutsDownOnDeinit: false))
        } catch {
            return .failure(error)
        }
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
        // curl's --resolve and --connect-to: on every connection, a redirect's too; never through
        // a proxy, which connects to the URL's host itself.
        guard case .owned(let clients) = routing, !clients.overrides.isEmpty, !request.hasIPv6Zone,
            clients.route(for: request) == nil, let authority = request.authority,
            let target = clients.overrides.target(
                host: Self.host(of: authority), port: Self.port(of: authority, scheme: request.scheme))
        else {
            return try await send(request, body: body, options: options, connectingTo: nil)
        }
        // Each address in turn while the last one refused the connection or did not answer in
        // time, as curl tries a name's addresses: nothing was sent to it.
        let candidates = target.addresses.isEmpty ? [target.host] : target.addresses
        for candidate in candidates.dropLast() {
            do throws(TransportError) {
                return try await send(
                    request, body: body, options: options, connectingTo: (candidate, target.port))
            } catch  where error.kind == .cannotConnect || error.kind == .connectTimeout {
                continue
            }
        }
        return try await send(request, body: body, options: options, connectingTo: (candidates.last!, target.port))
    }

    /// Sends `request`, connecting to `connectingTo` (an address or a name, and a port) instead of
    /// the URL's host and port when given; the `Host` field, the TLS server name and the name the
    /// certificate is checked against stay the URL's host.
    private func send(
        _ request: HTTPRequest, body: HTTPBody?, options: TransportOptions,
        connectingTo connection: (host: String, port: Int)?
    ) async throws(TransportError) -> (HTTPResponse, HTTPBody) {
        let exchange = Exchange()
        let watchdog = StallWatchdog(stall: options.stallTimeout, deadline: options.deadline) { error in
            exchange.fail(error)
        }
        let client: HTTPClient
        let owner: ClientSet?
        let holder: (AnyObject & Sendable)?
        switch routing {
        case .single:
            (client, owner, holder) = (self.client, nil, nil)
        case .owned(let allClients):
            var clients = allClients
            if let connection {
                // AsyncHTTPClient connects to another address, with the URL's host as TLS server
                // name, through its DNS override, which is set per client: clients of their own.
                let name = Self.overrideKey(request.authority ?? "")
                if name != connection.host { clients = try allClients.connecting(name, to: connection.host) }
            }
            let chosen = clients.client(for: request)
            (client, owner, holder) = (chosen.0, clients, chosen.holder)
        case .unusable(let error):
            throw TransportError(.invalidRequest, "the environment's transport settings cannot be used: \(error)")
        }
        var clientRequest = try Self.makeClientRequest(
            request, body: body, watchdog: watchdog, eventLoops: Array(client.eventLoopGroup.makeIterator()),
            connectPort: connection?.port)
        // The clients this module made get bodies as they were sent and decode them here.
        let decodingLimit: Int64? =
            switch routing {
            case .owned(let clients): clients.maximumDecodedBodySize
            case .single where client === Self.defaultClient: TransportSettings.defaultMaximumDecodedBodySize
            default: nil
            }
        // The caller who names codings of their own takes those not decoded here as they came.
        let callerChoseCodings = clientRequest.headers.contains(name: "accept-encoding")
        if decodingLimit != nil, !callerChoseCodings {
            clientRequest.headers.add(name: "Accept-Encoding", value: "deflate, gzip")
        }
        let host = Self.host(of: request.authority ?? "")
        let route = owner?.route(for: request)
        if route != nil, request.scheme?.lowercased() == "https", request.hasIPv6Zone {
            // AsyncHTTPClient writes the host as given in its CONNECT, zone and all (curl leaves the
            // zone out), and a zone names an interface of this host, which the proxy cannot use.
            throw TransportError(
                .invalidRequest,
                "https to \(request.authority ?? "") through a proxy: its IPv6 zone names an interface of this host, which means nothing to the proxy and would be sent to it; reach the address directly (no_proxy)"
            )
        }
        var destination = Destination(request, proxy: route)
        destination.connection = connection
        if let route, request.scheme?.lowercased() == "http" {
            clientRequest = AbsoluteFormProxy.request(
                // As `Host` says it: no user info, and no IPv6 zone, which names an interface of
                // this host and means nothing to the proxy.
                clientRequest, scheme: "http", hostPort: request.hostField ?? "",
                path: request.path ?? "/", proxy: route)
        }
        let channel = BodyChannel(watchdog: watchdog)
        // AHC's own deadline would also cut a body that keeps flowing; the watchdog times stalls and
        // the overall deadline, and this one only stops AHC from waiting forever.
        let deadline = NIODeadline.now() + TimeAmount(options.deadline.map { $0 - .now } ?? .seconds(7 * 24 * 3600))
        let producer = Task {
            // Holding them keeps the clients up until this transfer is over.
            _ = holder
            // What came before a failure, for telling a body cut short from a broken connection.
            var received: BodyReceipt?
            do {
                let response = try await client.execute(clientRequest, deadline: deadline)
                watchdog.touch()
                let head = try Self.makeResponse(response)
                exchange.head(
                    head, body: HTTPBody(channel: channel, length: Self.bodyLength(response, method: request.method)))
                received = BodyReceipt(response)
                let decoding = Self.decoding(response, limit: decodingLimit, callerChoseCodings: callerChoseCodings)
                reading: for try await buffer in response.body {
                    watchdog.touch()
                    received?.bytes += Int64(buffer.readableBytes)
                    let decoder: ContentDecoder
                    switch decoding {
                    case .asSent:
                        guard await channel.send(HTTPBody.ByteChunk(buffer.readableBytesView)) else { break reading }
                        continue
                    case .refused(let failure):
                        // Never handed on as if it were decoded; a body with no bytes passes (HEAD, 304).
                        guard buffer.readableBytes == 0 else { throw failure }
                        continue
                    case .decoded(let made):
                        decoder = made
                    }
                    // One piece at a time: the next is made only once the channel has room for it
                    // (at most 1 MiB waits for the reader), whatever the compression ratio.
                    decoder.feed(buffer)
                    while let piece = try decoder.nextPiece() {
                        guard await channel.send(HTTPBody.ByteChunk(piece.readableBytesView)) else { break reading }
                    }
                }
                // A cancelled body stream may simply end; a truncated body must not pass as whole.
                try Task.checkCancellation()
                if case .decoded(let decoder) = decoding {
                    do throws(ContentDecoder.Failure) { try decoder.finish() } catch {
                        // A body whose end is the close: the compressed stream tells it was cut.
                        if error == .truncated, let received, received.framing == .close {
                            throw received.cutShort(at: destination, what: "before its compressed stream ended")
                        }
                        throw error
                    }
                }
                channel.finish()
            } catch {
                var failure = exchange.failure ?? Self.classify(error, to: destination)
                // A close (not a reset) after the head and before the body's end: curl's partial file.
                if let received, failure.kind == .connectionLost, Self.isEndOfStream(error) {
                    failure = received.cutShort(at: destination)
                }
                let diagnosisDeadline = min(deadline, .now() + .seconds(10))
                if failure.tlsFailureReason == .verificationFailed, let owner,
                    let reason = await owner.diagnoseRefusedCertificate(request, deadline: diagnosisDeadline)
                {
                    failure = TransportError(tlsFailure: reason, host: host)
                }
                if let reason = failure.tlsFailureReason, reason.mayBeAnOldProtocol, let owner,
                    let older = await owner.diagnoseOldProtocol(request, deadline: diagnosisDeadline)
                {
                    failure = TransportError(tlsFailure: older, host: host)
                }
                exchange.fail(failure)
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
        return try await exchange.response()
    }

    // MARK: Conversions

    /// `eventLoops`: the client's, on which a request body's parts are written (see ``RequestChunks``).
    /// `connectPort`: the port to connect to instead of the URL's (the `Host` field keeps the URL's).
    package static func makeClientRequest(
        _ request: HTTPRequest, body: HTTPBody?, watchdog: StallWatchdog, eventLoops: [any EventLoop] = [],
        connectPort: Int? = nil
    ) throws(TransportError) -> HTTPClientRequest {
        let (scheme, authority, path) = try request.target()
        let connectAuthority = connectPort.map { Self.authority(authority, port: $0) } ?? authority
        var clientRequest = HTTPClientRequest(url: "\(scheme)://\(connectAuthority)\(path)")
        clientRequest.method = HTTPMethod(rawValue: request.method.rawValue)
        // AsyncHTTPClient would write the URL's host as it is, an IPv6 zone included (and, with a
        // port to connect to, that port). First, as RFC 9110 §7.2 asks and curl sends it.
        if !request.headerFields.contains(where: { $0.name.canonicalName == "host" }), let host = request.hostField {
            clientRequest.headers.add(name: "Host", value: host)
        }
        for field in request.headerFields {
            clientRequest.headers.add(name: field.name.rawName, value: field.value)
        }
        if let body {
            let length: HTTPClientRequest.Body.Length
            switch body.length {
            case .known(let count): length = .known(count)
            case .unknown: length = .unknown
            }
            clientRequest.body = .stream(
                RequestChunks(body: body, watchdog: watchdog, eventLoops: eventLoops), length: length)
        }
        return clientRequest
    }

    /// The body's length as the caller will read it: unknown when a content coding is decoded on
    /// the way (`Content-Length` counts the encoded bytes), none for HEAD.
    private static func bodyLength(_ response: HTTPClientResponse, method: HTTPRequest.Method) -> HTTPBody.Length {
        if method == .head { return .known(0) }
        let coding = response.headers.first(name: "content-encoding")?.trimmingSpaces().lowercased()
        if let coding, !coding.isEmpty, coding != "identity" { return .unknown }
        return response.headers.first(name: "content-length").flatMap(Int64.init).map { .known($0) } ?? .unknown
    }

    /// What becomes of a response's body on its way to the caller.
    enum Decoding {
        /// Handed on as it came: no coding, a client that decodes (or not) by itself, or a coding
        /// the caller asked for.
        case asSent
        /// Decoded here.
        case decoded(ContentDecoder)
        /// A coding not decoded here, sent though not asked for: the body fails with this.
        case refused(ContentDecoder.Failure)
    }

    /// How `response`'s body is decoded: with a decoder when the transport decodes (`limit` set)
    /// and its codings are gzip and deflate; refused when it names another coding the request
    /// did not ask for (only the transport's own `Accept-Encoding` was sent).
    static func decoding(_ response: HTTPClientResponse, limit: Int64?, callerChoseCodings: Bool) -> Decoding {
        guard let limit else { return .asSent }
        do throws(ContentDecoder.Failure) {
            guard
                let decoder = try ContentDecoder.make(
                    contentEncoding: response.headers[canonicalForm: "content-encoding"].joined(separator: ","),
                    limit: limit)
            else { return .asSent }
            return .decoded(decoder)
        } catch {
            return callerChoseCodings ? .asSent : .refused(error)
        }
    }

    /// Whether `error` is the connection's end (a FIN) where more was due, as opposed to a reset.
    static func isEndOfStream(_ error: any Error) -> Bool {
        switch error {
        case let error as HTTPParserError:
            if case .invalidEOFState = error { return true }
            return false
        case let error as ChannelError:
            return [.eof, .inputClosed, .ioOnClosedChannel, .alreadyClosed, .outputClosed].contains(error)
        case let error as HTTPClientError:
            return error == .remoteConnectionClosed
        default:
            return false
        }
    }

    /// The host of an authority: `[::1]:8080` → `::1`, `example.com:443` → `example.com`.
    static func host(of authority: String) -> String {
        var hostPort = Substring(authority)
        if let at = hostPort.lastIndex(of: "@") { hostPort = hostPort[hostPort.index(after: at)...] }
        if hostPort.hasPrefix("["), let close = hostPort.firstIndex(of: "]") {
            return String(hostPort[hostPort.index(after: hostPort.startIndex)..<close])
        }
        if let colon = hostPort.lastIndex(of: ":") { return String(hostPort[..<colon]) }
        return String(hostPort)
    }

    /// The port of an authority: `[::1]:8080` → 8080; the scheme's default when it has none.
    static func port(of authority: String, scheme: String?) -> Int {
        let (_, _, port) = parts(of: authority)
        return port.flatMap { Int($0) } ?? (scheme?.lowercased() == "https" ? 443 : 80)
    }

    /// `authority` with `port` in place of its own: `user@example.com` → `user@example.com:8443`.
    static func authority(_ authority: String, port: Int) -> String {
        let (userInfo, host, _) = parts(of: authority)
        return "\(userInfo)\(host):\(port)"
    }

    /// An authority's user info (with its `@`, or empty), host as written (an IPv6 address in its
    /// brackets) and port, if any.
    private static func parts(of authority: String) -> (userInfo: Substring, host: Substring, port: Substring?) {
        var hostPort = Substring(authority)
        var userInfo = hostPort.prefix(0)
        if let at = hostPort.lastIndex(of: "@") {
            userInfo = hostPort[...at]
            hostPort = hostPort[hostPort.index(after: at)...]
        }
        var hostEnd = hostPort.firstIndex(of: ":") ?? hostPort.endIndex
        if hostPort.hasPrefix("["), let close = hostPort.firstIndex(of: "]") { hostEnd = hostPort.index(after: close) }
        let rest = hostPort[hostEnd...]
        return (userInfo, hostPort[..<hostEnd], rest.hasPrefix(":") ? rest.dropFirst() : nil)
    }

    /// The name AsyncHTTPClient gives the host of `authority` when it looks up its DNS override:
    /// as written, an IPv6 address in brackets.
    static func overrideKey(_ authority: String) -> String {
        let host = host(of: authority)
        if case .v6? = try? SocketAddress(ipAddress: host, port: 0) { return "[\(host)]" }
        return host
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
}

/// A request `HTTPBody` as the `ByteBuffer`s AsyncHTTPClient writes, marking activity as it is
/// pulled, with a bounded amount of it in memory.
///
/// AsyncHTTPClient pulls the next part as soon as it has handed the last one to the connection's
/// event loop (`EventLoop.execute`), and pauses only once that loop has written enough to make the
/// channel unwritable. A file is read far faster than a loop writes, so while the loop is busy
/// or not scheduled, parts pile up in its task queue: 9.4 MB of them at once for a 100 MB upload
/// here (heaptrack), up to 97 MB of resident memory for 1 GiB on a busy machine. So after every
/// ``barrierBytes`` the iterator queues a marker on each of the client's loops (they run their
/// tasks in order) and waits for the markers of the interval before: what is in memory is then at
/// most two intervals, plus what the channel buffers before it turns unwritable, and a loop that
/// keeps up never makes the body wait (waiting for the newest markers instead cost a third of the
/// throughput: the pipe ran dry at every MiB).
struct RequestChunks: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    /// How much is pulled between two markers: 4 MiB, 64 file chunks. Each marker wakes every loop
    /// of the group; at 1 MiB that was ~5,000 context switches per GiB and 10-30 % of the
    /// throughput on a busy machine.
    static let barrierBytes = 4 << 20
    let body: HTTPBody
    let watchdog: StallWatchdog
    /// The client's event loops; none: no waiting (a body built for inspection only).
    let eventLoops: [any EventLoop]

    func makeAsyncIterator() -> Iterator {
        Iterator(base: body.makeAsyncIterator(), watchdog: watchdog, eventLoops: eventLoops)
    }

    struct Iterator: AsyncIteratorProtocol {
        var base: HTTPBody.Iterator
        let watchdog: StallWatchdog
        let eventLoops: [any EventLoop]
        /// Bytes pulled since the last markers were queued.
        var pulled = 0
        /// The markers queued at the last interval's end, one per loop.
        var markers: [EventLoopFuture<Void>] = []

        init(base: HTTPBody.Iterator, watchdog: StallWatchdog, eventLoops: [any EventLoop]) {
            self.base = base
            self.watchdog = watchdog
            self.eventLoops = eventLoops
        }

        mutating func next() async throws -> ByteBuffer? {
            if pulled >= RequestChunks.barrierBytes {
                pulled = 0
                for marker in markers { try await marker.get() }
                markers = eventLoops.map { $0.submit {} }
            }
            guard let chunk = try await base.next() else { return nil }
            watchdog.touch()
            pulled += chunk.count
            return ByteBuffer(bytes: chunk)
        }
    }
}

/// The outcome of one exchange: the response head (with its body), or the first failure, and what
/// to do when it fails. Callbacks run outside the lock.
private final class Exchange: Sendable {
    private struct State {
        var failed: TransportError?
        var failureAction: (@Sendable (TransportError) -> Void)?
    }

    private let state = Locked(State())
    private let promise = ResponseHeadPromise()

    /// The first failure, if there was one.
    var failure: TransportError? { state.withLock { $0.failed } }

    func head(_ head: HTTPResponse, body: HTTPBody) { settle(.success((head, body))) }

    /// Records `error` (the first failure wins) and stops the transfer, whether or not the head came.
    func fail(_ error: TransportError) {
        let action = state.withLock { state -> (@Sendable (TransportError) -> Void)? in
            guard state.failed == nil else { return nil }
            state.failed = error
            return state.failureAction
        }
        settle(.failure(error))
        action?(error)
    }

    /// What to do on the first failure (runs at once if it already happened).
    func onFailure(_ action: @escaping @Sendable (TransportError) -> Void) {
        let already = state.withLock { state -> TransportError? in
            state.failureAction = action
            return state.failed
        }
        if let already { action(already) }
    }

    /// The head and body, or the first failure; cancelling the waiting task fails the exchange.
    func response() async throws(TransportError) -> (HTTPResponse, HTTPBody) {
        try await promise.response(failingWith: { [self] in fail($0) })
    }

    private func settle(_ outcome: Result<(HTTPResponse, HTTPBody), TransportError>) { promise.settle(outcome) }
}

extension TimeAmount {
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}

// MARK: - The client a request goes through

extension ClientSet {
    /// The proxy `request` goes through, if any (`nil`: direct).
    func route(for request: HTTPRequest) -> HTTPClient.Configuration.Proxy? {
        let scheme = request.scheme?.lowercased() ?? "http"
        guard proxy.proxy(forScheme: scheme, host: AsyncHTTPClientTransport.host(of: request.authority ?? "")) != nil
        else {
            return nil
        }
        switch scheme {
        case "http": return httpProxy
        case "https": return httpsProxy
        default: return nil
        }
    }

    /// The client for `request`'s scheme and host, and what the transfer must hold until it ends:
    /// through its proxy unless ``ProxySettings`` says direct; for https with verification, the
    /// client of that route and host.
    func client(for request: HTTPRequest) -> (HTTPClient, holder: AnyObject & Sendable) {
        let scheme = request.scheme?.lowercased() ?? "http"
        let route = route(for: request)
        guard scheme == "https", verifiesCertificates else {
            switch (scheme, route) {
            case ("https", _?): return (viaHTTPSProxy ?? direct, self)
            // Plain http through a proxy too: a direct connection to it, the request in absolute form.
            default: return (direct, self)
            }
        }
        let identity = ServerIdentity(host: AsyncHTTPClientTransport.host(of: request.authority ?? ""))
        let holder = hostClients.withLock { clients -> HostClient in
            if let index = clients.firstIndex(where: { $0.identity == identity && $0.route == route }) {
                let found = clients.remove(at: index)
                clients.append(found)
                return found
            }
            var configuration = base
            configuration.proxy = route
            // The chain is verified by NIOSSL, the name here, against the URL's host only, and
            // then the strength of the certificates.
            configuration.tlsConfiguration?.certificateVerification = .noHostnameVerification
            let check: @Sendable (Channel) -> EventLoopFuture<Void>
            if let strength = strengthCheck {
                check = { channel in
                    identity.checkConnection(channel).flatMap {
                        strength.check(channel, host: identity.host, direct: route == nil)
                    }
                }
            } else {
                check = identity.checkConnection
            }
            configuration.http1_1ConnectionDebugInitializer = check
            configuration.http2ConnectionDebugInitializer = check
            let made = HostClient(identity: identity, route: route, client: OwnedClient(configuration))
            clients.append(made)
            if clients.count > Self.hostClientLimit { clients.removeFirst() }
            return made
        }
        return (holder.client.client, ClientLease(hostClient: holder, clients: self))
    }
}

/// A client this module made, shut down when the last holder lets go of it.
final class OwnedClient: Sendable {
    let client: HTTPClient

    init(_ configuration: HTTPClient.Configuration) {
        client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }

    deinit {
        // The callback form keeps the client alive until it has shut down.
        client.shutdown { _ in }
    }
}

/// The https client of one route and host (its connections check the certificate's name).
final class HostClient: Sendable {
    let identity: ServerIdentity
    let route: HTTPClient.Configuration.Proxy?
    let client: OwnedClient

    init(identity: ServerIdentity, route: HTTPClient.Configuration.Proxy?, client: OwnedClient) {
        self.identity = identity
        self.route = route
        self.client = client
    }
}

/// What an https transfer keeps alive until it ends: the client of its host, which the set may
/// let go of meanwhile (it keeps only the last few hosts'), and the set, whose direct and proxied
/// clients share the event loops.
final class ClientLease: Sendable {
    let hostClient: HostClient
    let clients: ClientSet

    init(hostClient: HostClient, clients: ClientSet) {
        self.hostClient = hostClient
        self.clients = clients
    }
}
