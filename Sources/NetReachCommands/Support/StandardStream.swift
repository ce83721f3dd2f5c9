import ArgumentParser
import NetReachSystem

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
/// success. (`netreach` ignores SIGPIPE, in its `main.swift`, so a reader that has
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
        try Self.withLine(line) { writeAll($0) }.get()
    }

    /// Runs `body` on `line`'s UTF-8 bytes and a newline, valid only during the call. The line is
    /// copied into a buffer one byte longer, not appended to: `line` is shared with the caller, so
    /// an append always copied it into a new string (every `watch` line).
    package static func withLine<Result, Failure: Error>(
        _ line: String, _ body: (UnsafeRawBufferPointer) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        var line = line
        // `withUTF8` rethrows untyped: the outcome comes out as a value.
        let outcome = line.withUTF8 { text in
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: text.count + 1) { buffer in
                _ = buffer.initialize(fromContentsOf: text)
                buffer[text.count] = UInt8(ascii: "\n")
                return Swift.Result { () throws(Failure) in try body(UnsafeRawBufferPointer(buffer)) }
            }
        }
        return try outcome.get()
    }

    /// Writes `text` as it is (no newline): for a terminal status line rewritten in place. The
    /// string's own UTF-8 storage is written, not a copy of it.
    package func write(_ text: String) throws(WriteError) {
        var text = text
        try text.withUTF8 { writeAll(UnsafeRawBufferPointer($0)) }.get()
    }

    /// Writes `buffer` as it is, from where it lies: a line made as bytes (`watch --json`).
    package func write(_ buffer: UnsafeRawBufferPointer) throws(WriteError) {
        try writeAll(buffer).get()
    }

    /// Writes bytes as they are: a response body. Throws, having written a prefix at most, when the
    /// stream refuses the rest.
    package func write<Bytes: Sequence<UInt8>>(_ bytes: Bytes) throws(WriteError) {
        try Array(bytes).withUnsafeBytes { writeAll($0) }.get()
    }

    /// All of `buffer`, or why not. A descriptor someone made non-blocking (a shared pipe) is
    /// waited for; with the reader gone the write fails with EPIPE.
    private func writeAll(_ buffer: UnsafeRawBufferPointer) -> Result<Void, WriteError> {
        do throws(SystemError) {
            try SystemCall.writeAll(fileDescriptor, buffer)
            return .success(())
        } catch {
            return .failure(WriteError(stream: self, errno: error.code))
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

/// What `status`, `watch` and `wait` print on standard output goes through here, so a line that
/// could not be written ends the command with ``CLIExitCode/outputFailed`` and a reason on
/// standard error, never with status 0 and the line lost.
package enum CommandOutput {
    /// Writes `line` and a newline to standard output; if it cannot, says why on standard error
    /// and throws ``CLIExitCode/outputFailed``.
    package static func writeLine(_ line: String) throws(ExitCode) {
        do {
            try StandardStream.output.writeLine(line)
        } catch {
            throw failed(error)
        }
    }

    /// Writes `line`, a whole line with its newline, to standard output; if it cannot, as
    /// ``writeLine(_:)``.
    package static func write(_ line: UnsafeRawBufferPointer) throws(ExitCode) {
        do {
            try StandardStream.output.write(line)
        } catch {
            throw failed(error)
        }
    }

    /// Says why the output could not be written and returns the status to exit with.
    package static func failed(_ error: StandardStream.WriteError) -> ExitCode { CLIExitCode.outputFailed(error) }

    /// The failure when standard output's reader went away before a write noticed (``OutputHangup``).
    package static let readerGone = StandardStream.WriteError(stream: .output, errno: EPIPE)
}
