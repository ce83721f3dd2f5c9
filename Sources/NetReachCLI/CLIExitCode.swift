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
    /// `get`: the server answered with a status outside 200–299 (its body goes to standard output,
    /// never over an `--output` file unless `--write-error-body`).
    package static let unsuccessfulStatus = ExitCode(3)
    /// `get`: the network could not be used: no usable path, or waiting for one ran past `--max-time`.
    package static let notConnected = ExitCode(4)
    /// `get`: the request failed: connection lost, no response in time, not HTTP, or another
    /// transport failure.
    package static let requestFailed = ExitCode(5)
    /// `get`: a local file could not be read (`--data @FILE`) or written (`--output`).
    package static let localFile = ExitCode(6)
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

    /// The table in `get --help`.
    package static let getTable = """
        EXIT STATUS
          0   success: a 2xx response
          3   the server answered with another status (its body to standard output; --output is left as it was)
          4   not connected: no usable network path, or waiting for one ran past --max-time
          5   the request failed: connection lost, timed out, not HTTP, or another transport error
          6   --data @FILE could not be read, or --output could not be written
          64  usage error (unknown option, invalid value, not an http(s) URL)
          74  standard output could not be written (closed, full, or its reader gone)
          130 interrupted (SIGINT or SIGTERM)
        """

    /// The full table, for the root command.
    package static var table: String {
        """
        EXIT STATUS
          0   success (check: full)
          1   wait: timed out: the path did not meet the requirements in time; check: no verdict
          2   status, watch, wait, check: the monitor could not observe the system (bad namespace, no permission); check: portal
          3   get: the server answered with a status outside 200-299; check: limited or local
          4   get: not connected (no usable path, or waiting for one ran past --max-time); check: none
          5   get: the request failed (connection lost, timed out, not HTTP, transport error)
          6   get: a local file could not be read or written
          64  usage error (unknown option, invalid value, an option given twice; check without a probe)
          69  get, check: the netreach-http executable is neither next to netreach nor on PATH
          74  status, watch, wait, get: the output could not be written (closed, full, reader gone)
          130 get: interrupted (SIGINT or SIGTERM)
        """
    }
}
