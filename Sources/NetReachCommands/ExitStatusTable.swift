import ArgumentParser

/// Every exit status of `netreach`, each with one meaning and the commands that can exit with it:
/// the one table the root `--help`, each command's `--help`, the README and the JSON schema show.
///
/// ```swift
/// print(ExitStatusTable.help(for: "wait"))   // EXIT STATUS, then 0, 1, 2, 64, 74 as wait uses them
/// ExitStatusTable.entry(for: 60)?.meaning    // "the server's certificate was refused (...)"
/// ```
package enum ExitStatusTable {
    /// One status: its number, what it means, and the commands that exit with it (empty: every
    /// command).
    package struct Entry: Sendable, Equatable {
        package let status: Int32
        package let meaning: String
        package let commands: [String]

        init(_ code: ExitCode, _ meaning: String, _ commands: [String] = []) {
            self.status = code.rawValue
            self.meaning = meaning
            self.commands = commands
        }

        /// Whether `command` (a subcommand's name) can exit with this status.
        package func applies(to command: String) -> Bool { commands.isEmpty || commands.contains(command) }
    }

    /// The subcommands, as the table names them: `netreach`'s own list, so a new command needs
    /// no second entry here.
    package static var commandNames: [String] {
        NetreachCommand.configuration.subcommands.compactMap { $0.configuration.commandName }
    }

    /// The table, by status. `get`'s 5–63 are curl's numbers for the same failure, so scripts that
    /// branch on curl's statuses keep working.
    package static let entries: [Entry] = [
        Entry(
            .success,
            "success (status: the path was read; wait: the requirements were met; check: full; get: a 2xx response; watch, condition, serve: stopped by SIGINT or SIGTERM)"
        ),
        Entry(CLIExitCode.timedOut, "timed out: the path did not meet the requirements within --timeout", ["wait"]),
        Entry(
            CLIExitCode.monitorUnavailable,
            "the system cannot be observed: no such namespace, no permission to enter it, netlink refused, or the watched namespace went away",
            ["status", "watch", "wait", "check"]),
        Entry(
            CLIExitCode.cannotListen,
            "an address to listen on cannot be used (in use, not an address here, --control not on loopback)",
            ["condition", "serve"]),
        Entry(
            CLIExitCode.notConnected,
            "not connected: no usable network path (get: or waiting for one passed --max-time; check: none)",
            ["get", "check"]),
        Entry(CLIExitCode.proxyFailed, "the proxy could not be used (not resolved, not reachable, refused)", ["get"]),
        Entry(CLIExitCode.hostNotResolved, "the host name did not resolve", ["get"]),
        Entry(CLIExitCode.cannotConnect, "could not connect (refused, host or network unreachable)", ["get"]),
        Entry(CLIExitCode.invalidResponse, "the answer was not HTTP", ["get"]),
        Entry(
            CLIExitCode.partialFile,
            "the connection closed before the whole body came (what came is kept: FILE.part with --output)", ["get"]),
        Entry(
            CLIExitCode.unsuccessfulStatus,
            "another status than 2xx (its body to standard output; an --output file is kept)", ["get"]),
        Entry(CLIExitCode.cannotWrite, "--output could not be written", ["get"]),
        Entry(CLIExitCode.cannotRead, "--data @FILE could not be read", ["get"]),
        Entry(CLIExitCode.requestTimedOut, "timed out connecting, or by --stall-timeout or --max-time", ["get"]),
        Entry(
            CLIExitCode.tlsHandshakeFailed,
            "the TLS handshake failed (a TLS version too old, no common protocol, client certificate refused)",
            ["get"]),
        Entry(CLIExitCode.redirectRefused, "a redirect was not followed (too many, or https to http)", ["get"]),
        Entry(CLIExitCode.connectionLost, "the connection broke, or another transport failure", ["get"]),
        Entry(
            CLIExitCode.certificateRefused,
            "the server's certificate was refused (untrusted, expired, not yet valid, another name, a key or digest too weak)",
            ["get"]),
        Entry(CLIExitCode.badContentEncoding, "the body does not decode as its Content-Encoding says", ["get"]),
        Entry(CLIExitCode.bodyTooLarge, "the body passed the size limit", ["get"]),
        Entry(
            ExitCode.validationFailure,
            "usage error: an unknown option, an invalid value, an option given twice, not an http(s) URL, check without a probe"
        ),
        Entry(CLIExitCode.internalError, "an internal error of netreach (a defect: please report it)"),
        Entry(
            CLIExitCode.outputFailed,
            "standard output could not be written (closed, full, its reader gone): what was lost is never status 0"),
        Entry(
            CLIExitCode.configInvalid,
            "the --config or --web.config.file file cannot be read or is not valid (at start; a failed reload keeps the running configuration)",
            ["serve"]),
        Entry(
            CLIExitCode.portal, "portal: something answered in the probes' place (the login URL is printed when known)",
            ["check"]),
        Entry(CLIExitCode.limited, "limited: a route to the internet, but no answer through it", ["check"]),
        Entry(CLIExitCode.local, "local: no route beyond the local network", ["check"]),
        Entry(CLIExitCode.noVerdict, "no verdict: no probe can be sent over the path's families", ["check"]),
        Entry(CLIExitCode.interrupted, "interrupted by SIGINT or SIGTERM", ["get"]),
    ]

    /// The entry for `status`, if netreach exits with it.
    package static func entry(for status: Int32) -> Entry? { entries.first { $0.status == status } }

    /// The table as `--help` shows it, wrapped to 78 columns (swift-argument-parser wraps again at 80): every status for the root command
    /// (`command` nil, each with the commands that use it), or those `command` can exit with.
    package static func help(for command: String?) -> String {
        // Written as UTF-8 bytes: every command's configuration, so every table, is made each
        // time the tool starts, whatever it was asked to do.
        var text: [UInt8] = []
        text.reserveCapacity(4096)
        text += (command == "get" ? "EXIT STATUS (curl's numbers where curl has the same failure)" : "EXIT STATUS").utf8
        for entry in entries where command.map(entry.applies(to:)) ?? true {
            var meaning = entry.meaning
            if command == nil, !entry.commands.isEmpty {
                meaning = entry.commands.joined(separator: ", ") + ": " + meaning
            }
            let number = String(entry.status)
            let lead = "  " + number + String(repeating: " ", count: max(1, 4 - number.count))
            text.append(UInt8(ascii: "\n"))
            wrap(meaning, first: lead, rest: String(repeating: " ", count: lead.count), width: 78, into: &text)
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// The table as the README shows it (a Markdown table); a test holds the README to it.
    package static var markdown: String {
        var lines = ["| exit status | commands | meaning |", "| --- | --- | --- |"]
        for entry in entries {
            let commands = entry.commands.isEmpty ? "all" : entry.commands.map { "`\($0)`" }.joined(separator: ", ")
            lines.append("| \(entry.status) | \(commands) | \(entry.meaning) |")
        }
        return lines.joined(separator: "\n")
    }

    /// `text` in lines of at most `width` columns (counted in Unicode scalars), the first starting
    /// with `first`, the others with `rest`, appended to `output` with a newline between lines; a
    /// word longer than a line stays whole.
    static func wrap(_ text: String, first: String, rest: String, width: Int, into output: inout [UInt8]) {
        func columns<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> Int { bytes.count { $0 & 0xC0 != 0x80 } }
        output += first.utf8
        var length = columns(first.utf8)
        var lineHasWord = false
        for word in text.utf8.split(separator: UInt8(ascii: " ")) {
            let wordLength = columns(word)
            if lineHasWord && length + 1 + wordLength > width {
                output.append(UInt8(ascii: "\n"))
                output += rest.utf8
                length = columns(rest.utf8)
                lineHasWord = false
            }
            if lineHasWord {
                output.append(UInt8(ascii: " "))
                length += 1
            }
            output += word
            length += wordLength
            lineHasWord = true
        }
    }
}
