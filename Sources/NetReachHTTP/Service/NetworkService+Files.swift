import HTTPTypes
import NetReachSystem
import OpenAPIRuntime

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

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

    /// What an attempt that continues the file asks for: `Range: bytes=N-`, sent with
    /// `Accept-Encoding: identity` (N counts the bytes as written, which are a content coding's
    /// decoded bytes: the identity representation's), and `If-Range` when a validator is known.
    struct RangeRequest: Equatable {
        var range: String
        var ifRange: String?
    }

    private struct State {
        var present: Int64
        var validator: Validator?
        var total: Int64?
        var resumedAt: [Int64] = []
        var restarts = 0
        /// A partial file from an earlier call: asked for without `If-Range` (its validator is gone).
        var trustedWithoutValidator: Bool
        /// A range was answered in a way that cannot continue the file: the rest of this download
        /// asks for the whole body.
        var rangesRefused = false
        /// What the last attempt asked for, if it continued the file.
        var asked: RangeRequest?
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

    /// The range (and `If-Range`) for the next attempt, or `nil` to ask for the whole body.
    func rangeRequest() -> RangeRequest? {
        state.withLock { state in
            state.asked = nil
            guard state.present > 0, !state.rangesRefused else { return nil }
            if let validator = state.validator {
                state.asked = RangeRequest(range: "bytes=\(state.present)-", ifRange: validator.value)
            } else if state.trustedWithoutValidator {
                state.asked = RangeRequest(range: "bytes=\(state.present)-", ifRange: nil)
            }
            return state.asked
        }
    }

    /// Why a 206 cannot continue the file, or `nil` when it can: it must be in no content
    /// coding (its range would count coded bytes, and the file holds decoded ones) and, when
    /// If-Range was sent, carry the same validator (a server that ignores If-Range sends the rest
    /// of another version).
    func refusal(of response: HTTPResponse) -> String? {
        let coding = response.headerFields[.contentEncoding].map(ContentCoding.names) ?? []
        if let first = coding.first {
            return "the server answered a range of identity bytes with \(first) bytes"
        }
        guard let sent = state.withLock({ $0.asked?.ifRange }) else { return nil }
        let isTag = sent.hasPrefix("\"")
        guard let answered = response.headerFields[isTag ? .eTag : .lastModified], answered != sent else {
            return nil
        }
        return "the server ignored If-Range: \(sent) was asked, its 206 is of \(answered)"
    }

    /// After ``refusal(of:)``: the next attempt asks for the whole body.
    func refuseRanges() { state.withLock { $0.rangesRefused = true } }

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

/// The codings a `Content-Encoding` value lists, without `identity`: `gzip, identity` → `["gzip"]`.
enum ContentCoding {
    static func names(_ value: String) -> [String] {
        value.split(separator: ",").map { $0.trimmingSpaces().lowercased() }
            .filter { !$0.isEmpty && $0 != "identity" }
    }
}

/// What `If-Range` may carry (RFC 9110 §13.1.5): a strong entity tag, or a `Last-Modified` date.
struct Validator: Sendable {
    var value: String

    /// The validator of a response with `fields`. For a body in a content coding the date comes
    /// first: the resuming request asks for the identity representation, whose entity tag is not
    /// the coded one's (servers tag them apart: nginx weakens it, Apache adds `-gzip`), while the
    /// date is the resource's.
    init?(_ fields: HTTPFields) {
        let coded = fields[.contentEncoding].map { !ContentCoding.names($0).isEmpty } ?? false
        // A weak tag (W/"…") cannot guard a range.
        let tag = fields[.eTag].flatMap { $0.hasPrefix("\"") && $0.count >= 2 ? $0 : nil }
        let date = fields[.lastModified].flatMap { $0.isEmpty ? nil : $0 }
        guard let value = coded ? date ?? tag : tag ?? date else { return nil }
        self.value = value
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
