import HTTPTypes
import NetReach

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Why a request failed, and how many times it was sent: ``reason`` is a closed set, each case
/// carrying what is needed to understand it without a debugger, including the network path at that
/// moment where the network is to blame.
///
/// ```swift
/// do {
///     let response = try await service.send(.get("/v1/feed"))
/// } catch {
///     switch error.reason {
///     case .notConnected(let reason, let path):
///         show("Offline: \(reason) (\(path))")
///     case .unsuccessfulStatus(let status, _) where status.code == 404:
///         show("Not found")
///     default:
///         show(error.description)   // "connection lost: reset by peer; path: …; 3 attempts"
///     }
/// }
/// ```
///
/// Like Foundation's `URLError` (a `code` and more), the failure is a struct: its reason, plus the
/// attempts it took, which a person reading a log needs ("timed out after 1 attempt" and "after
/// 5 attempts" are different problems). Each reason has a static function of the same name, so
/// code that makes errors reads as it did when this was an enum: `throw .timedOut(path: nil)`.
public struct NetworkError: Error, Sendable, CustomStringConvertible {
    /// Why the request failed.
    public enum Reason: Sendable, CustomStringConvertible {
        /// The request's URL could not be formed (the text given), or uses a scheme other than http(s).
        case invalidURL(String)
        /// The server answered with a status the policy does not accept.
        case unsuccessfulStatus(HTTPResponse.Status, body: Data)
        /// The server's answer was not valid HTTP.
        case invalidResponse(String)
        /// The network could not be used, and the request was not (or could not be) sent.
        case notConnected(NotConnectedReason, path: NetworkPath)
        /// The connection broke after the request may have reached the server.
        case connectionLost(String, path: NetworkPath?)
        /// No complete response came within the time allowed: the request timeout of one attempt, or
        /// what was left of the resource timeout (which bounds waiting, every attempt and back-off).
        case timedOut(path: NetworkPath?)
        /// The request waited for connectivity until its resource timeout ran out.
        case waitingForConnectivityTimedOut(NotConnectedReason, path: NetworkPath)
        /// The response body was longer than the buffered limit (``RequestPolicy/maximumBufferedBodySize``).
        case bodyTooLarge(limit: Int)
        /// A downloaded body could not be written where it was going (the file's path and the reason,
        /// such as `No space left on device`); the transfer was stopped.
        case cannotWrite(String)
        /// A request body's file could not be read (its path and the reason, such as `is a directory`);
        /// nothing was sent.
        case cannotRead(String)
        /// A redirect was not followed (why, and where it pointed): too many hops, https to http, or
        /// a 307/308 that must send again a body that could be sent only once.
        case redirectRefused(String, location: URL)
        /// The request's task was cancelled.
        case cancelled
        /// Any other transport failure.
        case transport(TransportError, path: NetworkPath?)

        /// The reason alone, in one line, such as `not connected (no path: no default route); path: …`
        /// or `HTTP 503 Service Unavailable: try later`; a status shows the first 200 bytes of the body.
        public var description: String {
            switch self {
            case .invalidURL(let text):
                return "invalid URL: \(text)"
            case .unsuccessfulStatus(let status, let body):
                // One line, whatever the body holds: logs and summaries are read line by line.
                let preview = String(decoding: body.prefix(200), as: UTF8.self)
                    .split(whereSeparator: { $0.isWhitespace }).joined(separator: " ")
                let head =
                    status.reasonPhrase.isEmpty ? "HTTP \(status.code)" : "HTTP \(status.code) \(status.reasonPhrase)"
                return head + (preview.isEmpty ? "" : ": \(preview)")
            case .invalidResponse(let detail):
                return "the server's answer is not valid HTTP: \(detail)"
            case .notConnected(let reason, let path):
                return "not connected (\(reason)); path: \(path)"
            case .connectionLost(let detail, let path):
                return "connection lost: \(detail)" + Self.suffix(path)
            case .timedOut(let path):
                return "timed out" + Self.suffix(path)
            case .waitingForConnectivityTimedOut(let reason, let path):
                return "gave up waiting for connectivity (\(reason)); path: \(path)"
            case .bodyTooLarge(let limit):
                return "response body larger than \(limit) bytes (stream it or download it to a file instead)"
            case .cannotWrite(let detail):
                return "cannot write the body: \(detail)"
            case .cannotRead(let detail):
                return "cannot read the body: \(detail)"
            case .redirectRefused(let why, let location):
                return "redirect not followed (\(why)): \(NetworkService.withoutPassword(location))"
            case .cancelled:
                return "cancelled"
            case .transport(let error, let path):
                // The transport's sentence names the host, port, proxy and reason.
                return error.detail + Self.suffix(path)
            }
        }

        private static func suffix(_ path: NetworkPath?) -> String { path.map { "; path: \($0)" } ?? "" }
    }

    /// Why the request failed.
    public var reason: Reason
    /// How many times the request was handed to the transport (redirect hops not counted): 0 when
    /// it failed before the first attempt (a bad URL, no network and no waiting, an unreadable
    /// body file), 1 when it was not retried.
    public var attempts: Int

    /// A failure for `reason` after `attempts` attempts.
    public init(_ reason: Reason, attempts: Int = 0) {
        self.reason = reason
        self.attempts = attempts
    }

    /// The reason, then the attempts: `timed out; path: satisfied via eth0; 3 attempts`, or
    /// `invalid URL: http://:80/; not sent` when no attempt was made.
    public var description: String {
        let tries = attempts == 0 ? "not sent" : attempts == 1 ? "1 attempt" : "\(attempts) attempts"
        return "\(reason); \(tries)"
    }

    /// Whether the request was cancelled (``Reason/cancelled``): usually nothing to report.
    ///
    /// ```swift
    /// } catch where !error.isCancelled {
    ///     show(error.description)
    /// }
    /// ```
    public var isCancelled: Bool {
        if case .cancelled = reason { return true }
        return false
    }

    /// This failure with its attempt count set.
    func after(attempts: Int) -> NetworkError { NetworkError(reason, attempts: attempts) }

    // One function per reason, so that `throw .timedOut(path: p)` reads as it would for an enum.

    /// ``Reason/invalidURL(_:)``, before any attempt.
    public static func invalidURL(_ text: String) -> NetworkError { NetworkError(.invalidURL(text)) }
    /// ``Reason/unsuccessfulStatus(_:body:)``.
    public static func unsuccessfulStatus(_ status: HTTPResponse.Status, body: Data) -> NetworkError {
        NetworkError(.unsuccessfulStatus(status, body: body))
    }
    /// ``Reason/invalidResponse(_:)``.
    public static func invalidResponse(_ detail: String) -> NetworkError { NetworkError(.invalidResponse(detail)) }
    /// ``Reason/notConnected(_:path:)``.
    public static func notConnected(_ reason: NotConnectedReason, path: NetworkPath) -> NetworkError {
        NetworkError(.notConnected(reason, path: path))
    }
    /// ``Reason/connectionLost(_:path:)``.
    public static func connectionLost(_ detail: String, path: NetworkPath?) -> NetworkError {
        NetworkError(.connectionLost(detail, path: path))
    }
    /// ``Reason/timedOut(path:)``.
    public static func timedOut(path: NetworkPath?) -> NetworkError { NetworkError(.timedOut(path: path)) }
    /// ``Reason/waitingForConnectivityTimedOut(_:path:)``.
    public static func waitingForConnectivityTimedOut(_ reason: NotConnectedReason, path: NetworkPath) -> NetworkError {
        NetworkError(.waitingForConnectivityTimedOut(reason, path: path))
    }
    /// ``Reason/bodyTooLarge(limit:)``.
    public static func bodyTooLarge(limit: Int) -> NetworkError { NetworkError(.bodyTooLarge(limit: limit)) }
    /// ``Reason/cannotWrite(_:)``.
    public static func cannotWrite(_ detail: String) -> NetworkError { NetworkError(.cannotWrite(detail)) }
    /// ``Reason/cannotRead(_:)``.
    public static func cannotRead(_ detail: String) -> NetworkError { NetworkError(.cannotRead(detail)) }
    /// ``Reason/redirectRefused(_:location:)``.
    public static func redirectRefused(_ why: String, location: URL) -> NetworkError {
        NetworkError(.redirectRefused(why, location: location))
    }
    /// ``Reason/cancelled``.
    public static var cancelled: NetworkError { NetworkError(.cancelled) }
    /// ``Reason/transport(_:path:)``.
    public static func transport(_ error: TransportError, path: NetworkPath?) -> NetworkError {
        NetworkError(.transport(error, path: path))
    }
}

/// Why the network could not be used for a request.
public enum NotConnectedReason: Sendable, Hashable, CustomStringConvertible {
    /// The path is not satisfied (with the path's own reason).
    case noPath(UnsatisfiedReason?)
    /// The path is expensive and the policy does not allow expensive access.
    case expensiveDenied
    /// The path is constrained and the policy does not allow constrained access.
    case constrainedDenied
    /// The path uses a cellular interface and the policy does not allow cellular access.
    case cellularDenied

    /// The reason in a few words, such as `no path: link down` or `expensive access denied`.
    public var description: String {
        switch self {
        case .noPath(let reason): "no path" + (reason.map { ": \($0)" } ?? "")
        case .expensiveDenied: "expensive access denied"
        case .constrainedDenied: "constrained access denied"
        case .cellularDenied: "cellular access denied"
        }
    }
}
