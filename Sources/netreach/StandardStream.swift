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
enum StandardStream {
    case output, error

    private var fileDescriptor: Int32 { self == .output ? 1 : 2 }

    /// Writes `line` and a newline.
    func writeLine(_ line: String) {
        var bytes = Array((line + "\n").utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeMutableBytes { buffer in
                write(fileDescriptor, buffer.baseAddress! + offset, buffer.count - offset)
            }
            if written < 0 {
                if errno == EINTR { continue }
                return   // a closed pipe or full disk: nothing useful left to do with the line
            }
            offset += written
        }
    }

    /// Writes `netreach: message` to standard error.
    static func complain(_ message: String) {
        StandardStream.error.writeLine("netreach: \(message)")
    }
}
