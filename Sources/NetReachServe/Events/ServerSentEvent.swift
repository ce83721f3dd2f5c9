#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One event of `GET /api/v1/events`, in the Server-Sent Events format a browser's `EventSource`
/// reads: an `id:` that only grows, an `event:` name and one line of JSON as `data:`.
///
/// ```swift
/// ServerSentEvent(id: 7, name: "path", data: #"{"status":"satisfied"}"#).wire
/// // "id: 7\nevent: path\ndata: {\"status\":\"satisfied\"}\n\n"
/// ```
package struct ServerSentEvent: Sendable, Hashable {
    /// The kinds of event `serve` sends.
    package enum Name: String, Sendable, Hashable {
        /// A path of one destination in one namespace (the first event for each, then one per change).
        case path
        /// A connectivity verdict of one namespace.
        case connectivity
        /// A namespace became observable or stopped being so.
        case namespace
        /// The server is stopping: the stream ends after this event.
        case shutdown
    }

    /// Grows by one per change; `Last-Event-ID` names one to resume after.
    package var id: UInt64
    package var name: Name
    /// One line of JSON: a line break would end the field early.
    package var data: String

    package init(id: UInt64, name: Name, data: String) {
        self.id = id
        self.name = name
        self.data = data
    }

    /// The event as written on the stream, ending with the blank line that dispatches it.
    package var wire: String {
        // JSON has no raw line breaks; a stray one (LF, CR or CRLF: all end an SSE line) would
        // split `data:` in two. Looked for with `memchr` in the string's own bytes: this runs once
        // per event on the thread that publishes it, and a per-byte closure cost ~50 instructions
        // a byte (Foundation's `contains` on a String, a bridged search).
        let line =
            Self.hasLineBreak(data)
            ? String(
                decoding: Array(data.utf8.split(whereSeparator: Self.isLineBreak).joined(separator: [0x20])),
                as: UTF8.self)
            : data
        return "id: \(id)\nevent: \(name.rawValue)\ndata: \(line)\n\n"
    }

    private static func isLineBreak(_ byte: UInt8) -> Bool { byte == 0x0A || byte == 0x0D }

    private static func hasLineBreak(_ text: String) -> Bool {
        let found = text.utf8.withContiguousStorageIfAvailable { bytes -> Bool in
            guard let base = bytes.baseAddress else { return false }
            return memchr(base, 0x0A, bytes.count) != nil || memchr(base, 0x0D, bytes.count) != nil
        }
        // A bridged or otherwise non-contiguous string: byte by byte.
        return found ?? text.utf8.contains(where: isLineBreak)
    }

    /// A comment line: `EventSource` ignores it, and it keeps proxies from closing an idle stream.
    package static let keepAlive = ": keep-alive\n\n"
}
