import ArgumentParser

/// The exit statuses of `netreach`, one meaning per number whichever command exits with it, in one
/// place so every command's help, the README and the JSON schema tell the same story
/// (``ExitStatusTable`` lists them).
///
/// 64 is not chosen here: swift-argument-parser exits with `EX_USAGE` (64) for every parse error
/// and every `ValidationError`. A command's `run` throws only an `ExitCode`; any other error that
/// escapes it is a defect, and ``NetreachCommand/run(_:capabilities:)`` exits with
/// ``internalError`` (70) for it, not the parser's 1, which is `wait`'s timeout.
package enum CLIExitCode {
    /// `wait`: the path did not meet the requirements within `--timeout`.
    package static let timedOut = ExitCode(1)
    /// The monitor could not observe the system (no such namespace, no permission to enter it,
    /// netlink refused): ``PathMonitor/failure`` was set after `start(queue:)`.
    package static let monitorUnavailable = ExitCode(2)
    // `get` exits as curl does where curl has a number for the same failure (scripts that branch
    // on curl's statuses keep working); 4 is NetReach's own.

    /// `get`, `check`: the network could not be used: no usable path (`check`'s none), or waiting
    /// for one ran past `--max-time`.
    package static let notConnected = ExitCode(4)
    /// `get`: the proxy could not be used (its name did not resolve, it could not be reached, or it
    /// refused the tunnel). curl: 5 is "couldn't resolve proxy"; one number for every proxy failure.
    package static let proxyFailed = ExitCode(5)
    /// `get`: the host name did not resolve (curl 6).
    package static let hostNotResolved = ExitCode(6)
    /// `get`: nothing accepted the connection: refused, host or network unreachable (curl 7).
    package static let cannotConnect = ExitCode(7)
    /// `get`: the answer was not HTTP (curl 8, "weird server reply").
    package static let invalidResponse = ExitCode(8)
    /// `get`: the server answered with a status outside 200–299 (its body goes to standard output,
    /// never over an `--output` file unless `--write-error-body`) (curl 22, with `--fail`).
    package static let unsuccessfulStatus = ExitCode(22)
    /// `get`: the connection closed before the whole body came (curl's CURLE_PARTIAL_FILE).
    package static let partialFile = ExitCode(18)
    /// `get`: `--output` could not be written (curl 23).
    package static let cannotWrite = ExitCode(23)
    /// `get`: `--data @FILE` could not be read (curl 26).
    package static let cannotRead = ExitCode(26)
    /// `get`: no connection, or no progress, in time: the connect timeout, `--stall-timeout` or
    /// `--max-time` (curl 28).
    package static let requestTimedOut = ExitCode(28)
    /// `get`: the TLS handshake failed for another reason than the server's certificate: no
    /// protocol version or cipher in common, a client certificate refused (curl 35).
    package static let tlsHandshakeFailed = ExitCode(35)
    /// `get`: a redirect was not followed: too many, or from https to http (curl 47).
    package static let redirectRefused = ExitCode(47)
    /// `get`: the connection broke after the request may have been sent, or another transport
    /// failure (curl 56, "failure receiving network data").
    package static let connectionLost = ExitCode(56)
    /// `get`: the server's certificate was refused: not trusted, expired, not valid yet, or for
    /// another host (curl 60).
    package static let certificateRefused = ExitCode(60)
    /// `get`: the body does not decode as its `Content-Encoding` says (curl 61).
    package static let badContentEncoding = ExitCode(61)
    /// `get`: the body passed the size limit (curl 63, "maximum file size exceeded").
    package static let bodyTooLarge = ExitCode(63)
    /// `get`: stopped by SIGINT or SIGTERM (128 + SIGINT, as shells report an interrupt).
    package static let interrupted = ExitCode(130)
    /// Every command: standard output could not be written: it is closed, the disk or device is
    /// full (`/dev/full`), or its reader has gone (`netreach watch | head -1`) (`EX_IOERR`). Output
    /// that was lost must never look like success.
    package static let outputFailed = ExitCode(74)
    /// `condition` (and `serve`): an address to listen on cannot be listened on: in use, not an
    /// address of this machine, or not on loopback where loopback is required.
    package static let cannotListen = ExitCode(3)
    /// `serve`: the `--config` file cannot be read, is not YAML or JSON, or names something
    /// invalid (`EX_CONFIG`). At start only: a reload that fails keeps the running configuration.
    package static let configInvalid = ExitCode(78)
    /// `check`: something answered in the probes' place: a captive portal.
    package static let portal = ExitCode(80)
    /// `check`: a route to the internet, but the probes got no answer through it.
    package static let limited = ExitCode(81)
    /// `check`: no route beyond the local network.
    package static let local = ExitCode(82)
    /// `check`: no verdict: no probe could be sent over the path's families.
    package static let noVerdict = ExitCode(83)
    /// An error that is a defect of netreach's own (a command threw something other than an exit
    /// status; swift-argument-parser would exit 1, which is `wait`'s timeout) (`EX_SOFTWARE`).
    package static let internalError = ExitCode(70)

    /// Says on standard error why the output could not be written (as well as it can: standard
    /// error may be gone too) and returns ``outputFailed`` to exit with. One wording for every
    /// command: `netreach: cannot write the output: standard output: No space left on device (errno 28)`.
    package static func outputFailed(_ error: StandardStream.WriteError) -> ExitCode {
        StandardStream.complain("cannot write the output: \(error)")
        return outputFailed
    }

    /// The whole table, for `netreach --help`.
    package static var table: String { ExitStatusTable.help(for: nil) }
}
