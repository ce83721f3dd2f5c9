import Foundation
import HTTPTypes

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
/// let (response, body) = try await transport.send(request, body: nil, options: TransportOptions(timeout: .seconds(5)))
/// print(response.status, body.count)
/// ```
///
/// Failures are classified from FoundationNetworking's `URLError` codes. On Linux a connection
/// closed without a reply comes back as `badServerResponse`; the request may have reached the
/// server, so that is reported as ``TransportError/Kind/connectionLost``, never as a kind that
/// allows repeating a POST.
public struct URLSessionTransport: HTTPTransport {
    /// The session every request goes through.
    public let session: URLSession

    /// Creates a transport that sends requests through `session`.
    ///
    /// The default is one ephemeral-configuration session shared by every transport created
    /// without an argument: nothing is written to disk and connections are reused.
    ///
    /// ```swift
    /// let configuration = URLSessionConfiguration.ephemeral
    /// configuration.httpAdditionalHeaders = ["User-Agent": "netreach"]
    /// let transport = URLSessionTransport(session: URLSession(configuration: configuration))
    /// ```
    public init(session: URLSession = URLSessionTransport.defaultSession) {
        self.session = session
    }

    /// The session used when none is given: ephemeral configuration, created once per process.
    public static let defaultSession = URLSession(configuration: .ephemeral)

    /// Sends `request` with `body` and returns the response head and its whole body.
    ///
    /// Statuses are not judged: a 503 is a response like a 200. `options.progress`, if set, is
    /// called as body bytes arrive and once more with the final count.
    ///
    /// ```swift
    /// var request = HTTPRequest(method: .post, scheme: "http", authority: "127.0.0.1:8080", path: "/items")
    /// request.headerFields[.contentType] = "application/json"
    /// let (response, data) = try await URLSessionTransport().send(
    ///     request, body: Data(#"{"name":"a"}"#.utf8), options: TransportOptions(timeout: .seconds(10)))
    /// ```
    public func send(
        _ request: HTTPRequest,
        body: Data?,
        options: TransportOptions
    ) async throws(TransportError) -> (HTTPResponse, Data) {
        let urlRequest = try Self.makeURLRequest(request, body: body, timeout: options.timeout)
        let session = self.session
        let progress = options.progress
        do {
            return try await withOverallDeadline(options.timeout) {
                // `data(for:delegate:)` cancels its URLSession task when this task is cancelled, and
                // (unlike a task's own `delegate` on Linux) it reports body bytes to the delegate.
                let delegate = progress.map(ProgressDelegate.init)
                let (data, urlResponse) = try await session.data(for: urlRequest.value, delegate: delegate)
                let response = try Self.makeResponse(urlResponse)
                delegate?.finish(total: Int64(data.count))
                if delegate == nil {
                    progress?(Int64(data.count), urlResponse.expectedContentLength >= 0 ? urlResponse.expectedContentLength : nil)
                }
                return (response, data)
            }
        } catch {
            throw Self.classify(error)
        }
    }

    // MARK: Conversions

    private static func makeURLRequest(_ request: HTTPRequest, body: Data?, timeout: Duration) throws(TransportError) -> SendableURLRequest {
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
        // The overall deadline is enforced by `withOverallDeadline`. URLSession's own timeout is an
        // idle timeout, and on Linux it fires early (measured: after ~140-180 ms for 300 ms), so it
        // is set past ours and only ever acts as a backstop.
        let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) * 1e-18
        urlRequest.timeoutInterval = max(seconds * 2 + 1, 1)
        return SendableURLRequest(value: urlRequest)
    }

    private static func makeResponse(_ urlResponse: URLResponse) throws -> HTTPResponse {
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

    private static func classify(_ error: any Error) -> TransportError {
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

/// Reports body bytes to `TransportOptions.progress` as URLSession delivers them.
///
/// `@unchecked Sendable`: the mutable state is guarded by `lock` (an `NSLock`, which TSan
/// understands, unlike `Mutex`). The callback runs while the lock is held: URLSession may deliver
/// two chunks on two threads at once, and a count computed first must not be reported last.
private final class ProgressDelegate: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    private let progress: @Sendable (Int64, Int64?) -> Void
    private let lock = NSLock()
    private var received: Int64 = 0
    private var reported: Int64 = -1
    private var expected: Int64?

    init(_ progress: @escaping @Sendable (Int64, Int64?) -> Void) {
        self.progress = progress
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let length = dataTask.response?.expectedContentLength ?? -1
        lock.withLock {
            received += Int64(data.count)
            expected = length >= 0 ? length : nil
            // A chunk delivered after `finish` has nothing new to say.
            guard received > reported else { return }
            reported = received
            progress(received, expected)
        }
    }

    /// Reports the final count unless a callback already did (an empty body has none).
    func finish(total: Int64) {
        lock.withLock {
            guard reported < total else { return }
            reported = total
            progress(total, expected)
        }
    }
}
