#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Writes whole lines straight to a file descriptor, unbuffered.
///
/// `watch` is usually piped (`netreach watch | tee log`), where stdio would buffer a change for
/// minutes; one `write(2)` per line also keeps a line from being torn by another writer
/// (lines are far below `PIPE_BUF`). Everything the commands print goes through here, so output
/// order is the order of the calls. It also avoids the `stdout` global, which Swift 6 rejects as
/// shared mutable state.
///
/// A write that fails throws ``WriteError``: output that could not be written must not look like
/// success. (`netreach` ignores SIGPIPE, see ``StandardDescriptors/prepare()``, so a reader that has
/// gone is an `EPIPE` here rather than death by signal.)
package enum StandardStream: Sendable {
    case output, error

    /// Why bytes could not be written to a standard stream.
    package struct WriteError: Error, Sendable, Hashable, CustomStringConvertible {
        /// The stream that could not be written.
        package var stream: StandardStream
        /// `errno` from write(2): `EPIPE` (the reader has gone), `ENOSPC` (`/dev/full`, a full disk),
        /// `EBADF` (the stream was closed when netreach started), `EIO`...
        package var errno: Int32

        package init(stream: StandardStream, errno: Int32) {
            self.stream = stream
            self.errno = errno
        }

        /// `standard output: Broken pipe (errno 32), its reader has gone`.
        package var description: String {
            let name = stream == .output ? "standard output" : "standard error"
            let reason = strerror(errno).map { String(cString: $0) } ?? "error"
            switch errno {
            case EPIPE: return "\(name): \(reason) (errno \(errno)): its reader has gone"
            case EBADF: return "\(name): \(reason) (errno \(errno)): it is closed"
            default: return "\(name): \(reason) (errno \(errno))"
            }
        }
    }

    /// The stream's file descriptor: 1 or 2.
    package var fileDescriptor: Int32 { self == .output ? 1 : 2 }

    /// Writes `line` and a newline, in one write(2) when the pipe takes it whole.
    package func writeLine(_ line: String) throws(WriteError) {
        try write(Array((line + "\n").utf8))
    }

    /// Writes `text` as it is (no newline): for a terminal status line rewritten in place.
    package func write(_ text: String) throws(WriteError) {
        try write(Array(text.utf8))
    }

    /// Writes bytes as they are: a response body. Throws, having written a prefix at most, when the
    /// stream refuses the rest.
    package func write<Bytes: Sequence<UInt8>>(_ bytes: Bytes) throws(WriteError) {
        let bytes = Array(bytes)
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { buffer in
                systemWrite(fileDescriptor, buffer.baseAddress! + offset, buffer.count - offset)
            }
            if written > 0 {
                offset += written
                continue
            }
            let code = written == 0 ? EIO : errno   // 0 for a non-empty write: no progress, ever
            switch code {
            case EINTR:
                continue
            case EAGAIN, EWOULDBLOCK:
                // A descriptor someone made non-blocking (a shared pipe): wait until it takes more.
                // With the reader gone, poll reports POLLERR and the next write fails with EPIPE.
                var descriptor = pollfd(fd: fileDescriptor, events: Int16(POLLOUT), revents: 0)
                _ = poll(&descriptor, 1, -1)
            default:
                throw WriteError(stream: self, errno: code)
            }
        }
    }

    /// Whether this stream is a terminal (spinners and progress bars only make sense there).
    package var isTerminal: Bool { isatty(fileDescriptor) == 1 }

    /// Writes `netreach: message` to standard error, as well as it can: when standard error
    /// itself cannot be written there is nobody left to tell, and the exit status still speaks.
    package static func complain(_ message: String) {
        try? StandardStream.error.writeLine("netreach: \(message)")
    }
}

/// write(2), under a name the methods above do not shadow.
private func systemWrite(_ descriptor: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int {
    write(descriptor, bytes, count)
}
