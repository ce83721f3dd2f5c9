import ArgumentParser
import NetReach

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The `netreach` command: the network path as `PathMonitor` sees it, from the shell, and HTTP
/// that waits for it. Every subcommand is a ``NetreachSubcommand``.
package struct NetreachCommand: ParsableCommand {
    /// The version `--version` prints and the JSON output carries (`"version"`).
    package static let version = PackageVersion.current

    /// The tool's name, as its usage and help show it.
    package static let commandName = "netreach"

    package static let configuration = CommandConfiguration(
        commandName: commandName,
        abstract: "Show, follow and wait for the network path, like Apple's NWPathMonitor.",
        discussion: """
            netreach reads the kernel's links, addresses and routes (rtnetlink) and resolv.conf. \
            status, watch and wait only observe: they send no traffic anywhere. get sends the one \
            request you give it (and its retries); check, and watch and wait with --internet, send \
            only the probes you name; condition relays the connections you make through it.

            With --json every command prints JSON described by the JSON Schema \
            Docs/netreach-json.schema.json in the netreach sources.

            \(CLIExitCode.table)
            """,
        version: version,
        subcommands: [
            StatusCommand.self, WatchCommand.self, WaitCommand.self, GetCommand.self, CheckCommand.self,
            ConditionCommand.self, ServeCommand.self,
        ]
    )

    /// The subcommand named `name`, for ``parseDirectly(_:)``: a `switch`, because finding one by
    /// its `configuration.commandName` would build every command's help text first (and a
    /// dictionary costs its own type's set-up at every start). A test holds it to
    /// `configuration.subcommands`.
    static func subcommand(named name: String) -> (any NetreachSubcommand.Type)? {
        switch name {
        case "status": StatusCommand.self
        case "watch": WatchCommand.self
        case "wait": WaitCommand.self
        case "get": GetCommand.self
        case "check": CheckCommand.self
        case "condition": ConditionCommand.self
        case "serve": ServeCommand.self
        default: nil
        }
    }

    package init() {}

    /// `arguments` parsed by the subcommand their first word names, alone, or nil when that parse
    /// does not give that command (help, any error, a word no subcommand has): then the whole tree
    /// parses them again and says what it says, so nothing a user sees depends on this path.
    ///
    /// What it saves, at every start of the tool: the root's parse makes every subcommand's
    /// configuration (their help texts, the exit-status tables) and parses the arguments twice
    /// more looking for `--generate-completion-script`. Each subcommand names `netreach` as its
    /// `_superCommandName`, so ArgumentParser does not take it for the root of the tool (which
    /// is what makes it skip that search); under `netreach` the name changes nothing, as
    /// ArgumentParser reads it only from the root of the command stack.
    ///
    /// ```swift
    /// NetreachCommand.parseDirectly(["get", "-q", "https://example.com/"])  // a GetCommand
    /// NetreachCommand.parseDirectly(["get", "--help"])                     // nil: the tree answers
    /// ```
    static func parseDirectly(_ arguments: [String]) -> (any NetreachSubcommand)? {
        // Generic, so the result is checked against the concrete type: casting to
        // `any NetreachSubcommand` would look the conformance up among all the binary's records.
        func parse<Command: NetreachSubcommand>(_: Command.Type) -> Command? {
            try? Command.parseAsRoot(Array(arguments.dropFirst())) as? Command
        }
        guard let name = arguments.first, let command = subcommand(named: name) else { return nil }
        return parse(command)
    }

    /// Parses `arguments` (without the program's name) and runs the command with `capabilities`,
    /// as `ParsableCommand.main` would, except that help and error messages go through
    /// ``StandardStream`` too (`netreach --help >/dev/full` is ``CLIExitCode/outputFailed``, not a
    /// silent 0) and an error that is not an exit status is ``CLIExitCode/internalError``.
    /// Returns the status to exit with.
    ///
    /// ```swift
    /// exit(await NetreachCommand.run(["status", "--json"], capabilities: capabilities).rawValue)
    /// ```
    package static func run(_ arguments: [String], capabilities: Capabilities) async -> ExitCode {
        // The library's warnings in the tool's own words ("netreach: ..."), not a logger's line;
        // --quiet replaces this with nil.
        NetReachDiagnostics.handler = { StandardStream.complain($0) }
        do {
            var command: any ParsableCommand
            let direct = parseDirectly(arguments)
            if let direct { command = direct } else { command = try parseAsRoot(arguments) }
            if let subcommand = direct ?? command as? any NetreachSubcommand {
                do {
                    try await subcommand.run(capabilities)
                } catch let error as ValidationError {
                    // Options a command checks as it runs are a usage error, in parse's words.
                    try? StandardStream.error.writeLine(usageError(error, in: type(of: subcommand)))
                    return .validationFailure
                }
            } else {
                try command.run() // the root alone: its help
            }
            return .success
        } catch {
            var status = exitCode(for: error)
            if status == .failure && !(error is ExitCode) { status = CLIExitCode.internalError }
            let message = fullMessage(for: error)
            guard !message.isEmpty else { return status }
            if status == .success {
                // Help, the version or a completion script was asked for: it is the output.
                do {
                    try StandardStream.output.writeLine(message)
                } catch {
                    return CommandOutput.failed(error)
                }
            } else {
                try? StandardStream.error.writeLine(message)
            }
            return status
        }
    }

    /// What ArgumentParser prints for a `ValidationError` thrown while it parses `command`, for
    /// one the command throws as it runs: the message, the command's usage, where its help is.
    ///
    /// ```swift
    /// usageError(ValidationError("--retries must be between 0 and 10."), in: GetCommand.self)
    /// // Error: --retries must be between 0 and 10.
    /// // Usage: netreach get [<options>] <url>
    /// //   See 'netreach get --help' for more information.
    /// ```
    static func usageError(_ error: ValidationError, in command: any ParsableCommand.Type) -> String {
        let usage = usageString(for: command).replacing("\n", with: "\n" + String(repeating: " ", count: 7))
        let name = "\(configuration.commandName ?? "netreach") \(command._commandName)"
        return "Error: \(error.message)\nUsage: \(usage)\n  See '\(name) --help' for more information."
    }
}
