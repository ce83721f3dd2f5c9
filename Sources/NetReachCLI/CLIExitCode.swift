import ArgumentParser

/// The exit statuses of `netreach` (and of `netreach-http`, which runs its `get`), in one place so every command's help tells the same story.
///
/// 64 is not chosen here: swift-argument-parser exits with `EX_USAGE` (64) for every parse error
/// and every `ValidationError`, and with 1 for any other error that escapes `run()`. So `run()`
/// only ever throws an `ExitCode`, never a bare error, or a failure would look like a timeout.
package enum CLIExitCode {
    /// `wait`: the path did not meet the requirements within `--timeout`.
    package static let timedOut = ExitCode(1)
    /// The monitor could not observe the system (no such namespace, no permission to enter it,
    /// netlink refused): ``PathMonitor/failure`` was set after `start(queue:)`.
    package static let monitorUnavailable = ExitCode(2)
    // `get` exits as curl does where curl has a number for the same failure (scripts that branch
    // on curl's statuses keep working); 4 is NetReach's own.

    /// `get`: the network could not be used: no usable path, or waiting for one ran past `--max-time`.
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
    /// `get`: `netreach-http`, the executable that runs it, is neither next to `netreach` nor on
    /// `PATH` (`EX_UNAVAILABLE`).
    package static let httpHelperMissing = ExitCode(69)
    /// `status`, `watch`, `wait`, `get` (and help): standard output could not be written: it is closed,
    /// the disk or device is full (`/dev/full`), or its reader has gone (`netreach watch | head -1`)
    /// (`EX_IOERR`). Output that was lost must never look like success.
    package static let outputFailed = ExitCode(74)

    /// Says on standard error why the output could not be written (as well as it can: standard
    /// error may be gone too) and returns ``outputFailed`` to exit with. One wording for every
    /// command: `netreach: cannot write the output: standard output: No space left on device (errno 28)`.
    package static func outputFailed(_ error: StandardStream.WriteError) -> ExitCode {
        StandardStream.complain("cannot write the output: \(error)")
        return outputFailed
    }

    /// The table shown in `--help`; `includesTimeout` adds the line only `wait` can produce.
    package static func table(includesTimeout: Bool) -> String {
        var lines = ["EXIT STATUS", "  0   success"]
        if includesTimeout { lines.append("  1   timed out: the path did not meet the requirements in time") }
        lines.append("  2   the monitor could not observe the system (bad namespace, no permission)")
        lines.append("  64  usage error (unknown option, invalid value, an option given twice)")
        lines.append("  74  the output could not be written (closed, full, or its reader gone)")
        return lines.joined(separator: "\n")
    }

    /// The table in `get --help` (curl's numbers where curl has one for the same failure).
    package static let getTable = """
        EXIT STATUS (curl's numbers where curl has the same failure)
          0   success: a 2xx response
          4   not connected: no usable path, or waiting for one passed --max-time
          5   the proxy could not be used (not resolved, not reachable, refused)
          6   the host name did not resolve
          7   could not connect (refused, host or network unreachable)
          8   the answer was not HTTP
          22  another status than 2xx (body to standard output; --output kept)
          23  --output could not be written
          26  --data @FILE could not be read
          28  timed out (connecting, --stall-timeout or --max-time)
          35  TLS handshake failed (no common protocol, client certificate refused)
          47  a redirect was not followed (too many, or https to http)
          56  the connection broke, or another transport failure
          60  the server's certificate was refused (untrusted, expired, other name)
          61  the body does not decode as its Content-Encoding says
          63  the body passed the size limit
          64  usage error (unknown option, invalid value, not an http(s) URL)
          74  standard output could not be written (closed, full, reader gone)
          130 interrupted (SIGINT or SIGTERM)
        """

    /// The full table, for the root command.
    package static var table: String {
        """
        EXIT STATUS
          0   success (check: full)
          1   wait: timed out: the path did not meet the requirements in time; check: no verdict
          2   status, watch, wait, check: the monitor could not observe the system (bad namespace, no permission); check: portal
          3   check: limited or local
          4   get: not connected (no usable path, or waiting for one ran past --max-time); check: none
          5-63 get: curl's number for the failure (netreach get --help): 6 not resolved,
               7 cannot connect, 22 HTTP status, 28 timed out, 60 certificate refused
          64  usage error (unknown option, invalid value, an option given twice; check without a probe)
          69  get, check: the netreach-http executable is neither next to netreach nor on PATH
          74  status, watch, wait, get: the output could not be written (closed, full,
              reader gone)
          130 get: interrupted (SIGINT or SIGTERM)
        """
    }
}
