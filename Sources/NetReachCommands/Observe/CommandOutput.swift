import ArgumentParser

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

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

    /// Says why the output could not be written and returns the status to exit with.
    package static func failed(_ error: StandardStream.WriteError) -> ExitCode { CLIExitCode.outputFailed(error) }

    /// The failure when standard output's reader went away before a write noticed (``OutputHangup``).
    package static let readerGone = StandardStream.WriteError(stream: .output, errno: EPIPE)
}
