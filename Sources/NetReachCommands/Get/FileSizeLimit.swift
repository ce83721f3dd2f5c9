import HTTPTypes
import NetReachHTTP
import OpenAPIRuntime

/// `get --max-filesize`: a transport whose response bodies stop at `limit` bytes, as curl's
/// option does (exit 63). A body announced larger (`Content-Length`, for a body passed as it was
/// sent) fails before a byte of it is handed on; any other fails once the bytes handed on pass the
/// limit. Those are the decoded bytes for a gzip or deflate body, which the transport's own
/// ``TransportSettings/maximumDecodedBodySize`` (set to the same limit) already stops inside it.
///
/// ```swift
/// let limited = FileSizeLimitedTransport(base: transport, limit: 10 << 20)
/// ```
struct FileSizeLimitedTransport: HTTPTransport {
    let base: any HTTPTransport
    let limit: Int64

    func send(
        _ request: HTTPRequest, body: HTTPBody?, options: TransportOptions
    ) async throws(TransportError) -> (HTTPResponse, HTTPBody) {
        let (response, body) = try await base.send(request, body: body, options: options)
        let authority = request.authority ?? "the server"
        if case .known(let length) = body.length, length > limit {
            throw TransportError(
                .decodedBodyTooLarge, "the body from \(authority) is \(length) bytes, more than --max-filesize \(limit)"
            )
        }
        let limited = LimitedBody(base: body, limit: limit, authority: authority)
        return (response, HTTPBody(limited, length: body.length, iterationBehavior: body.iterationBehavior))
    }

    /// The body's chunks, failing once they add up to more than `limit`.
    private struct LimitedBody: AsyncSequence, Sendable {
        typealias Element = HTTPBody.ByteChunk
        let base: HTTPBody
        let limit: Int64
        let authority: String

        struct AsyncIterator: AsyncIteratorProtocol {
            var base: HTTPBody.AsyncIterator
            let limit: Int64
            let authority: String
            var total: Int64 = 0

            mutating func next() async throws -> HTTPBody.ByteChunk? {
                guard let chunk = try await base.next() else { return nil }
                total += Int64(chunk.count)
                guard total <= limit else {
                    throw TransportError(
                        .decodedBodyTooLarge, "the body from \(authority) passed --max-filesize \(limit) bytes")
                }
                return chunk
            }
        }

        func makeAsyncIterator() -> AsyncIterator {
            AsyncIterator(base: base.makeAsyncIterator(), limit: limit, authority: authority)
        }
    }
}
