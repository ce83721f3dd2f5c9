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
package enum StandardStream {
    case output, error

    private var fileDescriptor: Int32 { self == .output ? 1 : 2 }

    /// Writes `line` and a newline.
    package func writeLine(_ line: String) {
        write(Array((line + "\n").utf8))
    }

    /// Writes `text` as it is (no newline): for a terminal status line rewritten in place.
    package func write(_ text: String) {
        write(Array(text.utf8))
    }

    /// Writes bytes as they are: a response body.
    package func write<Bytes: Sequence<UInt8>>(_ bytes: Bytes) {
        var bytes = Array(bytes)
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeMutableBytes { buffer in
                systemWrite(fileDescriptor, buffer.baseAddress! + offset, buffer.count - offset)
            }
            if written < 0 {
                if errno == EINTR { continue }
                return   // a closed pipe or full disk: nothing useful left to do with the bytes
            }
            offset += written
        }
    }

    /// Whether this stream is a terminal (spinners and progress bars only make sense there).
    package var isTerminal: Bool { isatty(fileDescriptor) == 1 }

    /// Writes `netreach: message` to standard error.
    package static func complain(_ message: String) {
        StandardStream.error.writeLine("netreach: \(message)")
    }
}

/// write(2), under a name the methods above do not shadow.
private func systemWrite(_ descriptor: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int {
    write(descriptor, bytes, count)
}
