import Foundation
import HTTPTypes
import NetReachSystem
import OpenAPIRuntime

extension NetworkService {
    /// Sends the file at `fileURL` as the request body, read in chunks as the transport sends
    /// them (constant memory with `AsyncHTTPClientTransport`; the URLSession transport reads bodies
    /// whole first, up to its limit). The body can be sent again on a retry: the file is read anew.
    ///
    /// - Parameters:
    ///   - request: what to send, usually a PUT or POST; its own body is replaced by the file.
    ///   - fileURL: the file to send.
    ///   - progress: bytes handed to the transport so far, and the file's size.
    /// - Throws: ``NetworkError``; ``NetworkError/cannotRead(_:)`` when the file cannot be opened
    ///   (missing, a directory, no permission), before anything is sent.
    ///
    /// ```swift
    /// let response = try await service.upload(.put("/backups/today.tar"),
    ///                                         fromFile: URL(fileURLWithPath: "today.tar")) { sent, total in
    ///     print(sent, total ?? -1)
    /// }
    /// ```
    public func upload(
        _ request: Request, fromFile fileURL: URL,
        progress: (@Sendable (_ sent: Int64, _ expected: Int64?) -> Void)? = nil
    ) async throws(NetworkError) -> Response {
        let body: HTTPBody
        do throws(FileBodyError) { body = try FileBody.make(path: fileURL.path, progress: progress) } catch {
            throw .cannotRead(error.description)
        }
        return try await perform(request, body: body) { exchange throws(AttemptFailure) in
            let limit = exchange.policy.maximumBufferedBodySize
            let data = try await Self.collect(exchange.body, upTo: limit, progress: nil) { _ in
                .local(.bodyTooLarge(limit: limit))
            }
            return Response(
                status: exchange.head.status, headerFields: exchange.head.headerFields, body: data,
                url: exchange.url, attempts: exchange.attempt, waitedForConnectivity: exchange.waited)
        }
    }
}

/// What a finished ``NetworkService/download(_:to:resume:progress:)`` did.
public struct DownloadResponse: Sendable {
    /// The final response's status: 200, 206 when it continued a partial file, or 416 when the
    /// file was already whole.
    public var status: HTTPResponse.Status
    /// The final response's header fields.
    public var headerFields: HTTPFields
    /// The URL the final attempt went to.
    public var url: URL
    /// Where the body is now.
    public var fileURL: URL
    /// The file's length.
    public var bytes: Int64
    /// How many attempts were made.
    public var attempts: Int
    /// How long the request waited for connectivity.
    public var waitedForConnectivity: Duration
    /// The offsets at which an attempt continued the file with a range request (empty when one
    /// response carried the whole body).
    public var resumedAt: [Int64]
    /// How many times the body started over from byte 0 (a server that ignored the range, or gave
    /// no validator to resume safely).
    public var restarts: Int
}

/// A download's progress across attempts.
final class DownloadState: Sendable {
    struct Snapshot {
        var present: Int64
        var resumedAt: [Int64]
        var restarts: Int
    }

    private struct State {
        var present: Int64
        var validator: Validator?
        var total: Int64?
        var resumedAt: [Int64] = []
        var restarts = 0
        /// A partial file from an earlier call: asked for without `If-Range` (its validator is gone).
        var trustedWithoutValidator: Bool
    }

    private let state: Locked<State>

    init(present: Int64, validator: Validator?, trustedWithoutValidator: Bool) {
        state = Locked(
            State(
                present: present, validator: validator,
                trustedWithoutValidator: trustedWithoutValidator && present > 0))
    }

    var snapshot: Snapshot {
        state.withLock { Snapshot(present: $0.present, resumedAt: $0.resumedAt, restarts: $0.restarts) }
    }

    /// The `Range` (and `If-Range`) for the next attempt, or `nil` to ask for the whole body.
    func rangeRequest() -> (range: String, ifRange: String?)? {
        state.withLock { state in
            guard state.present > 0 else { return nil }
            if let validator = state.validator { return ("bytes=\(state.present)-", validator.value) }
            return state.trustedWithoutValidator ? ("bytes=\(state.present)-", nil) : nil
        }
    }

    /// Whether a 416 says the file is already whole: `Content-Range: bytes */N` with N what we have.
    func isWholeAccording(to response: HTTPResponse) -> Bool {
        guard let value = response.headerFields[.contentRange], value.hasPrefix("bytes */"),
            let total = Int64(value.dropFirst("bytes */".count))
        else { return false }
        return state.withLock { $0.present > 0 && total == $0.present }
    }

    func remember(validator: Validator?, total: Int64?, replacing: Bool) {
        state.withLock { state in
            if replacing || state.validator == nil { state.validator = validator }
            state.total = total
            state.trustedWithoutValidator = false
        }
    }

    func resumed(at offset: Int64) { state.withLock { $0.resumedAt.append(offset) } }

    func restarted() {
        state.withLock { state in
            state.restarts += 1
            state.present = 0
        }
    }

    func wrote(_ count: Int) { state.withLock { $0.present += Int64(count) } }
}

/// What `If-Range` may carry (RFC 9110 §13.1.5): a strong entity tag, or a `Last-Modified` date.
struct Validator: Sendable {
    var value: String

    init?(_ fields: HTTPFields) {
        if let tag = fields[.eTag], tag.hasPrefix("\""), tag.count >= 2 {
            value = tag // a weak tag (W/"…") cannot guard a range
        } else if let date = fields[.lastModified], !date.isEmpty {
            value = date
        } else {
            return nil
        }
    }
}

/// `Content-Range: bytes START-END/TOTAL` (TOTAL may be `*`).
struct ContentRange {
    var start: Int64
    var end: Int64
    var total: Int64?

    init?(_ value: String) {
        guard value.hasPrefix("bytes ") else { return nil }
        let parts = value.dropFirst("bytes ".count).split(separator: "/", maxSplits: 1)
        guard parts.count == 2 else { return nil }
        let bounds = parts[0].split(separator: "-", maxSplits: 1)
        guard bounds.count == 2, let start = Int64(bounds[0]), let end = Int64(bounds[1]), start <= end else {
            return nil
        }
        self.start = start
        self.end = end
        total = parts[1] == "*" ? nil : Int64(parts[1])
        if parts[1] != "*" && total == nil { return nil }
    }
}
