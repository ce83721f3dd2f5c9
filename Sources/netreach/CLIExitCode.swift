import ArgumentParser

/// The exit statuses of `netreach`, in one place so every command's help tells the same story.
///
/// 64 is not chosen here: swift-argument-parser exits with `EX_USAGE` (64) for every parse error
/// and every `ValidationError`, and with 1 for any other error that escapes `run()`. So `run()`
/// only ever throws an `ExitCode`, never a bare error, or a failure would look like a timeout.
enum CLIExitCode {
    /// `wait`: the path did not meet the requirements within `--timeout`.
    static let timedOut = ExitCode(1)
    /// The monitor could not observe the system (no such namespace, no permission to enter it,
    /// netlink refused): ``PathMonitor/failure`` was set after `start(queue:)`.
    static let monitorUnavailable = ExitCode(2)

    /// The table shown in `--help`; `includesTimeout` adds the line only `wait` can produce.
    static func table(includesTimeout: Bool) -> String {
        var lines = ["EXIT STATUS", "  0   success"]
        if includesTimeout { lines.append("  1   timed out: the path did not meet the requirements in time") }
        lines.append("  2   the monitor could not observe the system (bad namespace, no permission)")
        lines.append("  64  usage error (unknown option, invalid value)")
        return lines.joined(separator: "\n")
    }

    /// The full table, for the root command.
    static var table: String { table(includesTimeout: true) }
}
