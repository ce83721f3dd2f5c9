import Foundation
import HTTPTypes
import NetReachSystem
import OpenAPIRuntime

extension NetworkService {
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
    /// that changed in between is sent whole instead of spliced. A server that answers 200 instead
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
            throw .transport(TransportError(.connectionLost, "the body ended after \(present) of \(expected) bytes"))
        }
        return head
    }

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
private final class DownloadState: Sendable {
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
private struct Validator: Sendable {
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
private struct ContentRange {
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
