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

extension AsyncHTTPClientTransport {
    // MARK: Classification

    /// Where a request was going, for the sentences of its failures.
    struct Destination: Sendable {
        /// The URL's host (no brackets) and port (the scheme's default when the URL has none).
        var host: String
        var port: Int
        /// The proxy it went through, if any.
        var proxy: (host: String, port: Int)?
        /// Where the connection went instead of the host and port (``NetReachHTTP/ConnectionOverrides``), if anywhere.
        var connection: (host: String, port: Int)?

        init(_ request: HTTPRequest, proxy: HTTPClient.Configuration.Proxy?) {
            let authority = request.authority ?? ""
            host = AsyncHTTPClientTransport.host(of: authority)
            let defaultPort = request.scheme?.lowercased() == "https" ? 443 : 80
            var port = defaultPort
            if let colon = authority.lastIndex(of: ":"), !authority.hasSuffix("]"),
                let parsed = Int(authority[authority.index(after: colon)...])
            {
                port = parsed
            }
            self.port = port
            self.proxy = proxy.map { ($0.host, $0.port) }
        }

        /// `example.com:443`, `[::1]:8080`; `example.com:443 (at 127.0.0.1:8443)` when the
        /// connection went elsewhere.
        var hostPort: String {
            guard let connection else { return Self.hostPort(host, port) }
            return "\(Self.hostPort(host, port)) (at \(Self.hostPort(connection.host, connection.port)))"
        }
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
            case .connectTimeout:
                return TransportError(
                    .connectTimeout, "no connection to \(destination.connectionEnd) within the connect timeout")
            case .connectPending where destination.proxy != nil, .writeHostUnreachable where destination.proxy != nil:
                return TransportError(.proxyFailure, "cannot connect to \(destination.proxyName): host unreachable")
            case .connectPending, .writeHostUnreachable:
                return TransportError(.cannotConnect, "cannot connect to \(target): host unreachable")
            case .ioOnClosedChannel, .alreadyClosed, .outputClosed, .inputClosed, .eof:
                return TransportError(
                    .connectionLost, "\(target) closed the connection before the response was complete")
            default: return TransportError(.other, "the request to \(target) failed: \(error)")
            }
        case let error as HTTPParserError:
            // The connection closed before the message was complete: a body cut short, not garbage.
            if case .invalidEOFState = error {
                return TransportError(
                    .connectionLost, "\(target) closed the connection before the response was complete")
            }
            return TransportError(.invalidResponse, "the answer from \(target) is not valid HTTP (\(error))")
        case let error as ContentDecoder.Failure:
            switch error {
            case .tooLarge(let limit):
                return TransportError(
                    .decodedBodyTooLarge,
                    "the decoded body of the response from \(target) passed the limit of \(limit) bytes (TransportSettings.maximumDecodedBodySize)"
                )
            case .invalid(let reason):
                return TransportError(
                    .badContentEncoding,
                    "the body from \(target) does not decode as its Content-Encoding says (\(reason))")
            case .truncated:
                return TransportError(
                    .badContentEncoding,
                    "the body from \(target) ended, as its framing says, before its compressed stream did")
            case .unsupported(let coding):
                return TransportError(
                    .badContentEncoding,
                    "the body from \(target) is coded with \(coding), which NetReach does not decode (it decodes gzip and deflate, which it asked for); not handed on as if it were decoded"
                )
            case .tooManyCodings(let count):
                return TransportError(
                    .badContentEncoding,
                    "the body from \(target) lists \(count) content codings, more than the \(ContentDecoder.maximumCodings) NetReach undoes (as curl)"
                )
            }
        // A client of the caller's with AsyncHTTPClient's own decompression.
        case let error as NIOHTTPDecompression.DecompressionError:
            if error == .limit {
                return TransportError(
                    .decodedBodyTooLarge,
                    "the decoded body of the response from \(target) passed the limit (TransportSettings.maximumDecodedBodySize)"
                )
            }
            return TransportError(
                .badContentEncoding, "the body from \(target) does not decode as its Content-Encoding says (\(error))")
        case is NIOHTTPDecompression.ExtraDecompressionError:
            return TransportError(
                .badContentEncoding, "the body from \(target) does not decode as its Content-Encoding says")
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
            return TransportError(
                .connectTimeout, "no connection to \(destination.connectionEnd) within the connect timeout")
        case .httpProxyHandshakeTimeout:
            return TransportError(
                .proxyFailure, "\(destination.proxyName) did not open a tunnel to \(target) within the connect timeout")
        case .deadlineExceeded, .readTimeout, .writeTimeout:
            // AHC reports a deadline hit before any connection with the connection's error (or
            // `connectTimeout`), but a bare `deadlineExceeded` can also mean "sent, no answer".
            return TransportError(.timedOut, "no response from \(target) in time")
        case .remoteConnectionClosed, .uncleanShutdown:
            return TransportError(.connectionLost, "\(target) closed the connection before the response was complete")
        case .proxyAuthenticationRequired:
            return TransportError(
                .proxyFailure, "\(destination.proxyName) asks for authentication (407) to open a tunnel to \(target)")
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
                return nameFailure(
                    lookup.host, code: lookup.errorCode, description: lookup.errorDescription, to: destination)
            }
            return TransportError(
                toProxy ? .proxyFailure : .dnsFailure, "cannot resolve \(toProxy ? name : error.host)")
        }
        var reasons: [String] = []
        for failure in error.connectionErrors {
            let reason = (failure.error as? IOError).map { systemMessage($0.errnoCode) } ?? "\(failure.error)"
            if !reasons.contains(reason) { reasons.append(reason) }
        }
        return TransportError(
            toProxy ? .proxyFailure : .cannotConnect, "cannot connect to \(name): \(reasons.joined(separator: "; "))")
    }

    /// A failed lookup of `host`: the name does not exist (or has no address), or the resolver
    /// could not answer now (`EAI_AGAIN`); for the proxy's name, a proxy failure.
    private static func nameFailure(
        _ host: String, code: Int, description: String, to destination: Destination
    ) -> TransportError {
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

// MARK: - TLS failures

extension TLSFailureReason {
    /// The reason NIOSSL gives for a failed handshake, or `nil` if `error` is not a TLS failure.
    /// BoringSSL's error stack names the failure by a token (`CERTIFICATE_VERIFY_FAILED`); its file
    /// paths and numbers are left out of the detail.
    init?(_ error: any Error) {
        if error is ServerIdentity.Mismatch {
            self = .hostnameMismatch
            return
        }
        if let refusal = error as? StrengthRefusal {
            self = refusal.reason
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

    /// Whether the failure may be a server that speaks only TLS versions below the minimum: BoringSSL
    /// says `UNSUPPORTED_PROTOCOL` when the server chose one, and the server may instead answer the
    /// offer with a `protocol_version` alert, which also means "no version in common".
    var mayBeAnOldProtocol: Bool {
        switch self {
        case .protocolVersionTooOld: true
        case .protocolMismatch(let token): token.contains("PROTOCOL_VERSION")
        default: false
        }
    }

    /// `error:1000007d:SSL routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED at /path/file.cc:123`
    /// → `CERTIFICATE_VERIFY_FAILED`.
    private static func token(of description: String) -> String {
        var text = Substring(description)
        if let at = text.firstRange(of: " at ") { text = text[..<at.lowerBound] }
        return String(text.split(separator: ":").last ?? text).trimmingSpaces()
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
        // The server chose a version below the client's minimum (the transport names both after).
        if all.contains("UNSUPPORTED_PROTOCOL") {
            return .protocolVersionTooOld("the server speaks only TLS versions older than the oldest allowed")
        }
        if all.contains("PROTOCOL_VERSION") || all.contains("NO_SHARED_CIPHER")
            || all.contains("HANDSHAKE_FAILURE") || all.contains("NO_CIPHERS")
        {
            return .protocolMismatch(tokens.first ?? all)
        }
        return .other("handshake error \(tokens.first ?? all)")
    }
}
