import ArgumentParser
import NetReachCLI
import NetReachObserverCommands
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Runs `netreach`: `get` (and `help get`) are handed to `netreach-http` before anything is
/// parsed, so its own parser, help and exit statuses apply; everything else is ``NetreachCommand``.
@main
enum NetreachMain {
    static func main() async {
        if let forwarded = GetForwarding.helperArguments(CommandLine.arguments) {
            GetForwarding.exec(forwarded)
        }
        // After the exec above: netreach-http keeps its own SIGPIPE disposition.
        StandardDescriptors.prepare()
        exit(await run(Array(CommandLine.arguments.dropFirst())).rawValue)
    }

    /// Parses and runs a command, as `AsyncParsableCommand.main` does, except that help and error
    /// messages go through ``StandardStream`` too: `netreach --help >/dev/full` is
    /// ``CLIExitCode/outputFailed``, not a silent 0. Returns the status to exit with.
    static func run(_ arguments: [String]) async -> ExitCode {
        do {
            var command = try await NetreachCommand.asyncParseAsRoot(arguments)
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
            return .success
        } catch {
            let status = NetreachCommand.exitCode(for: error)
            let message = NetreachCommand.fullMessage(for: error)
            guard !message.isEmpty else { return status }
            if status == .success {
                // Help was asked for: it is the output.
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
}

/// The `netreach` command: the network path as `PathMonitor` sees it, from the shell.
struct NetreachCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "netreach",
        abstract: "Show, follow and wait for the network path, like Apple's NWPathMonitor.",
        discussion: """
            netreach reads the kernel's links, addresses and routes (rtnetlink) and resolv.conf. \
            status, watch and wait only observe: they send no traffic anywhere. get sends the one \
            request you give it (and its retries).

            The JSON that status --json and watch --json print is described by the JSON Schema \
            Docs/netreach-json.schema.json.

            \(CLIExitCode.table)
            """,
        subcommands: [StatusCommand.self, WatchCommand.self, WaitCommand.self, GetCommandForwarder.self, CheckCommandForwarder.self, ConditionCommandForwarder.self]
    )
}
