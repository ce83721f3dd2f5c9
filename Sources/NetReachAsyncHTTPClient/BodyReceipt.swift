import AsyncHTTPClient
import NetReachHTTP

/// How much of a response's body came, as sent (before decoding), and how its end is marked: what
/// tells a body cut short (curl's "partial file", 18) from a broken connection, and says it.
struct BodyReceipt: Sendable {
    /// How the end of a body is known (RFC 9112 §6.3).
    enum Framing: Equatable, Sendable {
        /// `Content-Length` bytes.
        case length(Int64)
        /// The last chunk of a chunked body.
        case chunked
        /// The connection's close: HTTP/1 with neither.
        case close
        /// The protocol's own end of stream (HTTP/2).
        case stream
    }

    let framing: Framing
    /// Body bytes received as sent.
    var bytes: Int64 = 0

    init(_ response: HTTPClientResponse) {
        let encodings = response.headers[canonicalForm: "transfer-encoding"].map { $0.lowercased() }
        if response.version.major >= 2 {
            framing = .stream
        } else if encodings.contains("chunked") {
            framing = .chunked
        } else if let length = response.headers.first(name: "content-length").flatMap(Int64.init) {
            framing = .length(length)
        } else {
            framing = .close
        }
    }

    /// The failure of a body that ended early at `destination`: `what` says before what, when the
    /// framing alone does not.
    func cutShort(
        at destination: AsyncHTTPClientTransport.Destination, what: String? = nil
    ) -> TransportError {
        let closed = "\(destination.hostPort) closed the connection"
        let sentence =
            switch (framing, what) {
            case (_, let what?): "\(closed) \(what), after \(bytes) bytes of the body"
            case (.length(let length), nil):
                "\(closed) after \(bytes) of the \(length) body bytes its Content-Length announced"
            case (.chunked, nil): "\(closed) before the last chunk of the body, after \(bytes) bytes"
            case (.close, nil), (.stream, nil): "\(closed) before the end of the body, after \(bytes) bytes"
            }
        return TransportError(.partialBody, sentence)
    }
}
