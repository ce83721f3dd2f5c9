import AsyncHTTPClient
import Foundation
import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPCompression
import NIOPosix
import NIOSSL
import NetReach
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
/// Like ``NetReachHTTP/URLSessionTransport`` it never follows a redirect (a 3xx is a response, with
/// its `Location`), asks for `gzip` and `deflate` (`Accept-Encoding: deflate, gzip` unless the
/// request says otherwise) and decodes them whatever the compression ratio, up to
/// ``NetReachHTTP/TransportSettings/maximumDecodedBodySize``, and goes through the proxy that
/// ``NetReachHTTP/ProxySettings`` chooses, by curl's rules: as curl, an `https` request through a
/// `CONNECT` tunnel, a plain `http` one to the proxy in absolute form (`GET http://host/path`),
/// which stock proxies allow where they refuse `CONNECT` to any port but 443.
///
/// With settings (``init(settings:)``, ``init()``), a server's certificate must name the URL's
/// host, as curl checks it: an address-only certificate is not one for a name, whatever address
/// the name led to.
///
/// Failures are classified from AsyncHTTPClient's, SwiftNIO's and NIOSSL's errors: a refused
/// connection, a failed DNS lookup or a failed TLS handshake is provably unsent; a reset, an early
/// close or a timeout after the connection was up is not.
public struct AsyncHTTPClientTransport: HTTPTransport {
    /// The client requests go through when no proxy applies (with settings, one of the clients
    /// this transport made and owns).
    public let client: HTTPClient
    private let routing: Routing

    /// Which client a request goes through.
    private enum Routing: Sendable {
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
    /// they are; ``init(settings:)`` makes clients with all of that set as
    /// ``NetReachHTTP/TransportSettings`` says. Passing `HTTPClient.shared` works too, but that
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

    /// Creates a transport whose clients are configured by `settings`: trust roots, client
    /// certificate, certificate verification, proxies (one client per distinct proxy, chosen per
    /// request by ``NetReachHTTP/ProxySettings/proxy(forScheme:host:)``), connect timeout and the
    /// decoded-body limit.
    ///
    /// Files are read now, so a missing or malformed one throws here rather than on the first
    /// request. The clients are shut down when the last copy of this transport (and the last
    /// transfer it started) is gone.
    ///
    /// ```swift
    /// var settings = TransportSettings()
    /// settings.tls.trustRoots = .file("/etc/my-company/ca.pem")
    /// settings.connectTimeout = .seconds(5)
    /// let transport = try AsyncHTTPClientTransport(settings: settings)
    /// ```
    ///
    /// - Throws: ``NetReachHTTP/TransportSettingsError``: a file that cannot be read, a
    ///   certificate or key that does not load, a proxy URL that is not `http://host[:port]`.
    public init(settings: TransportSettings) throws(TransportSettingsError) {
        try self.init(settings: settings, environment: ProcessInfo.processInfo.environment)
    }

    /// As ``init(settings:)``, reading `SSL_CERT_FILE` and `SSL_CERT_DIR` from `environment`
    /// instead of the process's (for tests).
    package init(settings: TransportSettings, environment: [String: String]) throws(TransportSettingsError) {
        try self.init(settings: settings, environment: environment, dnsOverride: [:])
    }

    /// As ``init(settings:)``, connecting to the addresses `dnsOverride` gives for its host names
    /// (TLS still names and checks the host): how a connectivity probe is sent over one family.
    package init(settings: TransportSettings, environment: [String: String] = ProcessInfo.processInfo.environment,
                 dnsOverride: [String: String]) throws(TransportSettingsError) {
        let clients = try ClientSet(settings: settings, environment: environment, dnsOverride: dnsOverride)
        self.client = clients.direct
        self.routing = .owned(clients)
    }

    /// The client used by ``init(client:)`` callers who want the old default: one per process,
    /// never shut down, with no TLS or proxy settings of its own.
    ///
    /// It is `HTTPClient.shared`'s configuration except that a connection that cannot be
    /// established fails the waiting requests at once (`retryConnectionEstablishment = false`),
    /// redirects are returned rather than followed, and a gzip or deflate body may decode to
    /// ``NetReachHTTP/TransportSettings/defaultMaximumDecodedBodySize`` whatever its compression ratio:
    /// retrying and redirecting are the service's decisions, and a refused connection should say
    /// so in milliseconds, not after the timeout.
    ///
    /// ```swift
    /// let transport = AsyncHTTPClientTransport(client: AsyncHTTPClientTransport.defaultClient)
    /// ```
    public static let defaultClient: HTTPClient = {
        var configuration = HTTPClient.Configuration.singletonConfiguration
        ClientSet.applyCommonSettings(to: &configuration, maximumDecodedBodySize: TransportSettings.defaultMaximumDecodedBodySize)
        return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
    }()

    /// The clients of ``init()``, made once from the environment.
    private static let defaultClients: Result<ClientSet, TransportSettingsError> = {
        do throws(TransportSettingsError) {
            return .success(try ClientSet(settings: TransportSettings(), environment: ProcessInfo.processInfo.environment, shutsDownOnDeinit: false))
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
        let exchange = Exchange()
        let watchdog = StallWatchdog(stall: options.stallTimeout, deadline: options.deadline) { error in
            exchange.fail(error)
        }
        var clientRequest = try Self.makeClientRequest(request, body: body, watchdog: watchdog)
        let client: HTTPClient
        let owner: ClientSet?
        let holder: (AnyObject & Sendable)?
        switch routing {
        case .single:
            (client, owner, holder) = (self.client, nil, nil)
        case .owned(let clients):
            let chosen = clients.client(for: request)
            (client, owner, holder) = (chosen.0, clients, chosen.holder)
        case .unusable(let error):
            throw TransportError(.invalidRequest, "the environment's transport settings cannot be used: \(error)")
        }
        let host = Self.host(of: request.authority ?? "")
        let route = owner?.route(for: request)
        let destination = Destination(request, proxy: route)
        if let route, request.scheme?.lowercased() == "http" {
            clientRequest = AbsoluteFormProxy.request(clientRequest, scheme: "http", authority: request.authority ?? "",
                                                      path: request.path ?? "/", proxy: route)
        }
        let channel = BodyChannel(watchdog: watchdog)
        // AHC's own deadline would also cut a body that keeps flowing; the watchdog times stalls and
        // the overall deadline, and this one only stops AHC from waiting forever.
        let deadline = NIODeadline.now() + TimeAmount(options.deadline.map { $0 - .now } ?? .seconds(7 * 24 * 3600))
        let producer = Task {
            // Holding them keeps the clients up until this transfer is over.
            _ = holder
            do {
                let response = try await client.execute(clientRequest, deadline: deadline)
                watchdog.touch()
                let head = try Self.makeResponse(response)
                exchange.head(head, body: HTTPBody(channel: channel, length: Self.bodyLength(response, method: request.method)))
                for try await buffer in response.body {
                    watchdog.touch()
                    guard await channel.send(HTTPBody.ByteChunk(buffer.readableBytesView)) else { break }
                }
                // A cancelled body stream may simply end; a truncated body must not pass as whole.
                try Task.checkCancellation()
                channel.finish()
            } catch {
                var failure = exchange.failure ?? Self.classify(error, to: destination)
                if failure.tlsFailureReason == .verificationFailed, let owner,
                   let reason = await owner.diagnoseRefusedCertificate(request, deadline: min(deadline, .now() + .seconds(10)))
                {
                    failure = TransportError(tlsFailure: reason, host: host)
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

    package static func makeClientRequest(
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

    /// The body's length as the caller will read it: unknown when a content coding is decoded on
    /// the way (`Content-Length` counts the encoded bytes), none for HEAD.
    private static func bodyLength(_ response: HTTPClientResponse, method: HTTPRequest.Method) -> HTTPBody.Length {
        if method == .head { return .known(0) }
        let coding = response.headers.first(name: "content-encoding")?.trimmingCharacters(in: .whitespaces).lowercased()
        if let coding, !coding.isEmpty, coding != "identity" { return .unknown }
        return response.headers.first(name: "content-length").flatMap(Int64.init).map { .known($0) } ?? .unknown
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

    /// Where a request was going, for the sentences of its failures.
    struct Destination: Sendable {
        /// The URL's host (no brackets) and port (the scheme's default when the URL has none).
        var host: String
        var port: Int
        /// The proxy it went through, if any.
        var proxy: (host: String, port: Int)?

        init(_ request: HTTPRequest, proxy: HTTPClient.Configuration.Proxy?) {
            let authority = request.authority ?? ""
            host = AsyncHTTPClientTransport.host(of: authority)
            let defaultPort = request.scheme?.lowercased() == "https" ? 443 : 80
            var port = defaultPort
            if let colon = authority.lastIndex(of: ":"), !authority.hasSuffix("]"), let parsed = Int(authority[authority.index(after: colon)...]) {
                port = parsed
            }
            self.port = port
            self.proxy = proxy.map { ($0.host, $0.port) }
        }

        /// `example.com:443`, `[::1]:8080`.
        var hostPort: String { Self.hostPort(host, port) }
        /// `the proxy 127.0.0.1:3128`.
        var proxyName: String { proxy.map { "the proxy \(Self.hostPort($0.host, $0.port))" } ?? "the proxy" }
        /// What the connection goes to: the proxy, or the host.
        var connectionEnd: String { proxy == nil ? hostPort : proxyName }

        static func hostPort(_ host: String, _ port: Int) -> String {
            host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        }
    }

    /// A failure of AsyncHTTPClient, SwiftNIO or NIOSSL as a ``NetReachHTTP/TransportError`` whose
    /// detail is one sentence naming the host and port (and the proxy), never a library's type.
    static func classify(_ error: any Error, to destination: Destination) -> TransportError {
        if let error = error as? TransportError {
            return error
        }
        let target = destination.hostPort
        if let reason = TLSFailureReason(error) {
            return TransportError(tlsFailure: reason, host: destination.host)
        }
        // While a request waits for a connection, AHC answers cancellation with the last
        // connection error; the caller asked to stop, so say that.
        if error is CancellationError || Task.isCancelled {
            return TransportError(.cancelled, "the request to \(target) was cancelled")
        }
        switch error {
        case let error as HTTPClientError:
            return classify(error, to: destination)
        case let error as IOError:
            // NIO's own wording ("connection reset (error set): Connection refused) (errno: 111)")
            // names its internal step; the system's message is what a person recognises.
            let kind = kind(ofErrno: error.errnoCode)
            let system = Self.systemMessage(error.errnoCode)
            switch kind {
            // Through a proxy, the only connection made is the one to the proxy.
            case .cannotConnect where destination.proxy != nil:
                return TransportError(.proxyFailure, "cannot connect to \(destination.proxyName): \(system)")
            case .cannotConnect: return TransportError(kind, "cannot connect to \(target): \(system)")
            case .connectionLost: return TransportError(kind, "the connection to \(target) broke: \(system)")
            case .timedOut: return TransportError(kind, "the connection to \(target) timed out: \(system)")
            default: return TransportError(kind, "the request to \(target) failed: \(system)")
            }
        case let error as ChannelError:
            switch error {
            case .connectTimeout: return TransportError(.connectTimeout, "no connection to \(destination.connectionEnd) within the connect timeout")
            case .connectPending where destination.proxy != nil, .writeHostUnreachable where destination.proxy != nil:
                return TransportError(.proxyFailure, "cannot connect to \(destination.proxyName): host unreachable")
            case .connectPending, .writeHostUnreachable: return TransportError(.cannotConnect, "cannot connect to \(target): host unreachable")
            case .ioOnClosedChannel, .alreadyClosed, .outputClosed, .inputClosed, .eof:
                return TransportError(.connectionLost, "\(target) closed the connection before the response was complete")
            default: return TransportError(.other, "the request to \(target) failed: \(error)")
            }
        case let error as HTTPParserError:
            // The connection closed before the message was complete: a body cut short, not garbage.
            if case .invalidEOFState = error {
                return TransportError(.connectionLost, "\(target) closed the connection before the response was complete")
            }
            return TransportError(.invalidResponse, "the answer from \(target) is not valid HTTP (\(error))")
        case let error as NIOHTTPDecompression.DecompressionError:
            if error == .limit {
                return TransportError(.decodedBodyTooLarge, "the decoded body of the response from \(target) passed the limit (TransportSettings.maximumDecodedBodySize)")
            }
            return TransportError(.badContentEncoding, "the body from \(target) does not decode as its Content-Encoding says (\(error))")
        case is NIOHTTPDecompression.ExtraDecompressionError:
            return TransportError(.badContentEncoding, "the body from \(target) does not decode as its Content-Encoding says")
        case let error as SocketAddressError.UnknownHost:
            return nameFailure(error.host, code: error.errorCode, description: error.errorDescription, to: destination)
        case is SocketAddressError:
            return TransportError(.dnsFailure, "cannot resolve \(destination.host)")
        case let error as NIOConnectionError:
            return classify(error, to: destination)
        default:
            return TransportError(.other, "the request to \(target) failed: \(error)")
        }
    }

    private static func classify(_ error: HTTPClientError, to destination: Destination) -> TransportError {
        let target = destination.hostPort
        switch error {
        case .cancelled:
            return TransportError(.cancelled, "the request to \(target) was cancelled")
        case .connectTimeout, .getConnectionFromPoolTimeout, .tlsHandshakeTimeout, .socksHandshakeTimeout:
            // The request was still queued: no connection carried it.
            return TransportError(.connectTimeout, "no connection to \(destination.connectionEnd) within the connect timeout")
        case .httpProxyHandshakeTimeout:
            return TransportError(.proxyFailure, "\(destination.proxyName) did not open a tunnel to \(target) within the connect timeout")
        case .deadlineExceeded, .readTimeout, .writeTimeout:
            // AHC reports a deadline hit before any connection with the connection's error (or
            // `connectTimeout`), but a bare `deadlineExceeded` can also mean "sent, no answer".
            return TransportError(.timedOut, "no response from \(target) in time")
        case .remoteConnectionClosed, .uncleanShutdown:
            return TransportError(.connectionLost, "\(target) closed the connection before the response was complete")
        case .proxyAuthenticationRequired:
            return TransportError(.proxyFailure, "\(destination.proxyName) asks for authentication (407) to open a tunnel to \(target)")
        case .invalidProxyResponse:
            // The proxy answered CONNECT with something other than 2xx: nothing went through it.
            return TransportError(.proxyFailure, "\(destination.proxyName) refused to open a tunnel to \(target)")
        case .invalidURL, .emptyHost, .emptyScheme, .missingSocketPath, .traceRequestWithBody:
            return TransportError(.invalidRequest, "the request to \(target) cannot be sent: \(Self.words(error))")
        default:
            // Cases with associated values cannot be matched by `==`; their descriptions name them.
            let description = error.description
            if description.hasPrefix("HTTPClientError.unsupportedScheme")
                || description.hasPrefix("HTTPClientError.invalidHeaderField")
            {
                return TransportError(.invalidRequest, "the request to \(target) cannot be sent: \(Self.words(error))")
            }
            return TransportError(.other, "the request to \(target) failed: \(Self.words(error))")
        }
    }

    /// What happened-eyeballs connecting to a host name fails with: the lookup failed, or every
    /// address refused or could not be reached (for the proxy, when the name is the proxy's).
    private static func classify(_ error: NIOConnectionError, to destination: Destination) -> TransportError {
        // Through a proxy, the only connection made is the one to the proxy.
        let toProxy = destination.proxy != nil
        let name = toProxy ? destination.proxyName : destination.hostPort
        if error.connectionErrors.isEmpty {
            if let lookup = (error.dnsAAAAError ?? error.dnsAError) as? SocketAddressError.UnknownHost {
                return nameFailure(lookup.host, code: lookup.errorCode, description: lookup.errorDescription, to: destination)
            }
            return TransportError(toProxy ? .proxyFailure : .dnsFailure, "cannot resolve \(toProxy ? name : error.host)")
        }
        var reasons: [String] = []
        for failure in error.connectionErrors {
            let reason = (failure.error as? IOError).map { systemMessage($0.errnoCode) } ?? "\(failure.error)"
            if !reasons.contains(reason) { reasons.append(reason) }
        }
        return TransportError(toProxy ? .proxyFailure : .cannotConnect, "cannot connect to \(name): \(reasons.joined(separator: "; "))")
    }

    /// A failed lookup of `host`: the name does not exist (or has no address), or the resolver
    /// could not answer now (`EAI_AGAIN`); for the proxy's name, a proxy failure.
    private static func nameFailure(_ host: String, code: Int, description: String, to destination: Destination) -> TransportError {
        if destination.proxy != nil {
            return TransportError(.proxyFailure, "cannot resolve \(destination.proxyName): \(description)")
        }
        // EAI_NODATA (-5, "no address associated with hostname") is a GNU extension Glibc's
        // module may not export.
        let permanent = [Int(EAI_NONAME), Int(EAI_FAIL), -5].contains(code)
        let kind: TransportError.Kind = permanent ? .hostNotFound : .dnsFailure
        return TransportError(kind, "cannot resolve \(host): \(description)")
    }

    /// `strerror` with the number: `Connection refused (errno 111)`.
    private static func systemMessage(_ code: CInt) -> String {
        "\(String(cString: strerror(code))) (errno \(code))"
    }

    /// AsyncHTTPClient's description of `error` without its type name:
    /// `HTTPClientError.unsupportedScheme("ftp")` → `unsupported scheme "ftp"`.
    private static func words(_ error: HTTPClientError) -> String {
        var text = Substring(error.description)
        if text.hasPrefix("HTTPClientError.") { text = text.dropFirst("HTTPClientError.".count) }
        var words = ""
        for character in text {
            if character.isUppercase, !words.isEmpty, words.last != " " { words.append(" ") }
            words.append(contentsOf: character == "(" ? " " : character == ")" ? "" : character.lowercased())
        }
        return words
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

/// The outcome of one exchange: the response head (with its body), or the first failure, and what
/// to do when it fails.
///
/// `@unchecked Sendable`: `failed` and `failureAction` are only touched while `lock` (an `NSLock`,
/// which TSan understands) is held; callbacks run outside it.
private final class Exchange: @unchecked Sendable {
    private let lock = NSLock()
    private let promise = ResponseHeadPromise()
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

    func response() async throws -> (HTTPResponse, HTTPBody) { try await promise.value() }

    private func settle(_ outcome: Result<(HTTPResponse, HTTPBody), TransportError>) { promise.settle(outcome) }
}

extension TimeAmount {
    fileprivate init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}

// MARK: - Clients made from settings

/// The clients of one transport made from ``NetReachHTTP/TransportSettings``: one per route
/// (direct, through the http proxy, through the https proxy), since AsyncHTTPClient sets a proxy
/// per client, and for https with verification one per route and host, since the certificate's
/// name is checked against the URL's host ([`ServerIdentity`](x-source-tag://ServerIdentity))
/// and AsyncHTTPClient tells a connection's initialiser nothing about the host.
///
/// Per-host clients are kept for the ``hostClientLimit`` hosts used last; one that falls out is
/// shut down once no transfer holds it. Shuts its other clients down when released (every
/// transfer holds it until it ends), unless it is the process-wide default.
private final class ClientSet: Sendable {
    let direct: HTTPClient
    /// https through the proxy without verification (with it, a per-host client).
    private let viaHTTPSProxy: HTTPClient?
    private let httpProxy: HTTPClient.Configuration.Proxy?
    private let httpsProxy: HTTPClient.Configuration.Proxy?
    private let proxy: ProxySettings
    private let shutsDownOnDeinit: Bool
    /// The configuration every client starts from (no proxy).
    private let base: HTTPClient.Configuration
    private let verifiesCertificates: Bool
    /// Per route and host, most recently used last.
    private let hostClients = Locked<[HostClient]>([])
    /// Clients that verify nothing and send nothing: they read a refused certificate's dates.
    private let inspectors = Locked<[String: OwnedClient]>([:])

    /// How many per-host clients are kept.
    static let hostClientLimit = 32

    init(settings: TransportSettings, environment: [String: String], shutsDownOnDeinit: Bool = true,
         dnsOverride: [String: String] = [:]) throws(TransportSettingsError) {
        try settings.checkFiles(environment: environment)
        var configuration = HTTPClient.Configuration.singletonConfiguration
        configuration.dnsOverride = dnsOverride
        configuration.tlsConfiguration = try Self.makeTLSConfiguration(settings.tls, environment: environment)
        Self.applyCommonSettings(to: &configuration, maximumDecodedBodySize: settings.maximumDecodedBodySize)
        if let connectTimeout = settings.connectTimeout {
            configuration.timeout.connect = TimeAmount(connectTimeout)
        }
        let httpProxy = try settings.proxy.http.map(Self.makeProxy)
        let httpsProxy = try settings.proxy.https.map(Self.makeProxy)

        func makeClient(_ proxy: HTTPClient.Configuration.Proxy?) -> HTTPClient {
            var configuration = configuration
            configuration.proxy = proxy
            return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
        }
        var directConfiguration = configuration
        if httpProxy != nil {
            // Plain http through the proxy goes on direct connections to it, in absolute form.
            directConfiguration.http1_1ConnectionDebugInitializer = AbsoluteFormProxy.connectionSetup()
        }
        direct = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: directConfiguration)
        viaHTTPSProxy = httpsProxy.map(makeClient)
        self.httpProxy = httpProxy
        self.httpsProxy = httpsProxy
        proxy = settings.proxy
        base = configuration
        verifiesCertificates = settings.tls.verifiesCertificates
        self.shutsDownOnDeinit = shutsDownOnDeinit
    }

    deinit {
        guard shutsDownOnDeinit else { return }
        // The callback form keeps each client alive until it has shut down.
        for client in [direct, viaHTTPSProxy].compactMap({ $0 }) {
            client.shutdown { _ in }
        }
    }

    /// The proxy `request` goes through, if any (`nil`: direct).
    func route(for request: HTTPRequest) -> HTTPClient.Configuration.Proxy? {
        let scheme = request.scheme?.lowercased() ?? "http"
        guard proxy.proxy(forScheme: scheme, host: AsyncHTTPClientTransport.host(of: request.authority ?? "")) != nil else {
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
            // The chain is verified by NIOSSL, the name here, against the URL's host only.
            configuration.tlsConfiguration?.certificateVerification = .noHostnameVerification
            configuration.http1_1ConnectionDebugInitializer = identity.connectionCheck()
            configuration.http2ConnectionDebugInitializer = identity.connectionCheck()
            let made = HostClient(identity: identity, route: route, client: OwnedClient(configuration))
            clients.append(made)
            if clients.count > Self.hostClientLimit { clients.removeFirst() }
            return made
        }
        return (holder.client.client, HolderPair(holder, self))
    }

    /// Why the certificate of `request`'s server did not verify: expired, not valid yet, or not
    /// trusted, read on a connection of its own that verifies nothing and sends nothing (over the
    /// same route), or `nil` if that connection did not get as far as a certificate.
    func diagnoseRefusedCertificate(_ request: HTTPRequest, deadline: NIODeadline) async -> TLSFailureReason? {
        guard let scheme = request.scheme, let authority = request.authority else { return nil }
        let route = route(for: request)
        let key = route.map { "\($0.host):\($0.port)" } ?? ""
        let inspector = inspectors.withLock { inspectors -> OwnedClient in
            if let found = inspectors[key] { return found }
            var configuration = base
            configuration.proxy = route
            configuration.tlsConfiguration?.certificateVerification = .none
            configuration.http1_1ConnectionDebugInitializer = CertificateDates.connectionProbe()
            configuration.http2ConnectionDebugInitializer = CertificateDates.connectionProbe()
            let made = OwnedClient(configuration)
            inspectors[key] = made
            return made
        }
        var probe = HTTPClientRequest(url: "\(scheme)://\(authority)/")
        probe.method = .HEAD
        do {
            _ = try await inspector.client.execute(probe, deadline: deadline)
        } catch let dates as CertificateDates {
            return dates.reason()
        } catch {
            return nil
        }
        return nil
    }

    /// What every client this module makes has in common: refused connections fail at once,
    /// redirects are responses, and gzip/deflate decode to a size limit, not a ratio.
    static func applyCommonSettings(to configuration: inout HTTPClient.Configuration, maximumDecodedBodySize: Int64) {
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.redirectConfiguration = .disallow
        configuration.decompression = .enabled(limit: .size(Int(clamping: maximumDecodedBodySize)))
    }

    private static func makeTLSConfiguration(_ settings: TLSSettings, environment: [String: String]) throws(TransportSettingsError) -> TLSConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        let roots = settings.trustRoots.resolved(in: environment)
        let fromEnvironment = settings.trustRoots.isDefault
        if let file = roots.file {
            // Looked at now to report a file that is not PEM, but parsed by BoringSSL only when the
            // first https connection is made (a system bundle takes a while in a debug build), and
            // by path, which takes a bundle with duplicates where adding them one by one fails.
            try checkHoldsPEMCertificates(file, what: fromEnvironment ? "SSL_CERT_FILE" : "the trust roots file")
        }
        // A directory must be the main root: NIOSSL refuses one among the additional roots.
        switch (roots.file, roots.directory) {
        case (let file?, let directory?):
            tls.trustRoots = .file(directory)
            tls.additionalTrustRoots = [.file(file)]
        case (let file?, nil):
            tls.trustRoots = .file(file)
        case (nil, let directory?):
            tls.trustRoots = .file(directory)
        case (nil, nil):
            break
        }
        if let identity = settings.clientIdentity {
            let chain = try loadCertificates(identity.certificateChainFile, what: "the client certificate")
            tls.certificateChain = chain.map { .certificate($0) }
            do {
                tls.privateKey = .privateKey(try NIOSSLPrivateKey(file: identity.privateKeyFile, format: .pem))
            } catch {
                throw TransportSettingsError(.invalidCredentials, "the client private key \(identity.privateKeyFile) holds no unencrypted PEM private key")
            }
            do {
                // A context made once here reports a key that does not match its certificate now,
                // not on the first request.
                _ = try NIOSSLContext(configuration: tls)
            } catch {
                throw TransportSettingsError(.invalidCredentials, "the client private key \(identity.privateKeyFile) does not match the certificate \(identity.certificateChainFile)")
            }
        }
        if !settings.verifiesCertificates {
            tls.certificateVerification = .none
        }
        return tls
    }

    private static func checkHoldsPEMCertificates(_ path: String, what: String) throws(TransportSettingsError) {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw TransportSettingsError(.unreadableFile, "\(what) \(path) cannot be read")
        }
        guard data.range(of: Data("-----BEGIN CERTIFICATE-----".utf8)) != nil else {
            throw TransportSettingsError(.invalidCredentials, "\(what) \(path) holds no PEM certificate")
        }
    }

    private static func loadCertificates(_ path: String, what: String) throws(TransportSettingsError) -> [NIOSSLCertificate] {
        let certificates: [NIOSSLCertificate]
        do {
            certificates = try NIOSSLCertificate.fromPEMFile(path)
        } catch {
            throw TransportSettingsError(.invalidCredentials, "\(what) \(path) is not a PEM certificate file")
        }
        guard !certificates.isEmpty else {
            throw TransportSettingsError(.invalidCredentials, "\(what) \(path) holds no PEM certificate")
        }
        return certificates
    }

    /// An AsyncHTTPClient proxy from `http://[user:password@]host[:port]` (port 1080 by default, as curl).
    private static func makeProxy(_ url: URL) throws(TransportSettingsError) -> HTTPClient.Configuration.Proxy {
        guard (url.scheme?.lowercased() ?? "http") == "http" else {
            throw TransportSettingsError(.invalidProxy, "proxy \(url.absoluteString): AsyncHTTPClientTransport speaks to http:// proxies only")
        }
        guard let host = url.host, !host.isEmpty else {
            throw TransportSettingsError(.invalidProxy, "proxy \(url.absoluteString) has no host")
        }
        let bareHost = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        let authorization = url.user.map { HTTPClient.Authorization.basic(username: $0.removingPercentEncoding ?? $0, password: url.password?.removingPercentEncoding ?? "") }
        return .server(host: bareHost, port: url.port ?? 1080, authorization: authorization)
    }
}

/// A client this module made, shut down when the last holder lets go of it.
private final class OwnedClient: Sendable {
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
private final class HostClient: Sendable {
    let identity: ServerIdentity
    let route: HTTPClient.Configuration.Proxy?
    let client: OwnedClient

    init(identity: ServerIdentity, route: HTTPClient.Configuration.Proxy?, client: OwnedClient) {
        self.identity = identity
        self.route = route
        self.client = client
    }
}

/// Two objects a transfer holds until it ends.
private final class HolderPair: Sendable {
    let first: AnyObject & Sendable
    let second: AnyObject & Sendable

    init(_ first: AnyObject & Sendable, _ second: AnyObject & Sendable) {
        self.first = first
        self.second = second
    }
}


// MARK: - TLS failures

extension TLSFailureReason {
    /// The reason NIOSSL gives for a failed handshake, or `nil` if `error` is not a TLS failure.
    /// BoringSSL's error stack names the failure by a token (`CERTIFICATE_VERIFY_FAILED`); its file
    /// paths and numbers are left out of the detail.
    fileprivate init?(_ error: any Error) {
        if error is ServerIdentity.Mismatch {
            self = .hostnameMismatch
            return
        }
        if let error = error as? NIOSSLExtraError {
            guard error == .failedToValidateHostname || error == .serverHostnameImpossibleToMatch else { return nil }
            self = .hostnameMismatch
            return
        }
        guard let error = error as? NIOSSLError, case .handshakeFailed(let failure) = error else { return nil }
        let tokens: [String]
        switch failure {
        case .sslError(let stack), .unknownError(let stack):
            tokens = stack.map { Self.token(of: $0.description) }
        default:
            tokens = [String(describing: failure)]
        }
        self = Self.reason(forTokens: tokens)
    }

    /// `error:1000007d:SSL routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED at /path/file.cc:123`
    /// → `CERTIFICATE_VERIFY_FAILED`.
    private static func token(of description: String) -> String {
        var text = Substring(description)
        if let at = text.range(of: " at ") { text = text[..<at.lowerBound] }
        return String(text.split(separator: ":").last ?? text).trimmingCharacters(in: .whitespaces)
    }

    private static func reason(forTokens tokens: [String]) -> TLSFailureReason {
        let all = tokens.joined(separator: " ")
        // BoringSSL does not say why verification failed (untrusted, expired, not yet valid).
        if all.contains("CERTIFICATE_VERIFY_FAILED") { return .verificationFailed }
        if all.contains("CERTIFICATE_REQUIRED") || all.contains("BAD_CERTIFICATE") || all.contains("UNKNOWN_CA")
            || all.contains("CERTIFICATE_UNKNOWN") || all.contains("ACCESS_DENIED")
        {
            return .clientCertificateRejected
        }
        if all.contains("CERTIFICATE_EXPIRED") { return .clientCertificateRejected }
        if all.contains("WRONG_VERSION_NUMBER") { return .protocolMismatch("the server did not answer with TLS") }
        if all.contains("PROTOCOL_VERSION") || all.contains("UNSUPPORTED_PROTOCOL") || all.contains("NO_SHARED_CIPHER")
            || all.contains("HANDSHAKE_FAILURE") || all.contains("NO_CIPHERS")
        {
            return .protocolMismatch(tokens.first ?? all)
        }
        return .other("handshake error \(tokens.first ?? all)")
    }
}
