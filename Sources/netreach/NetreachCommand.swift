import ArgumentParser
import NetReachCLI

/// Runs `netreach`: `get` (and `help get`) are handed to `netreach-http` before anything is
/// parsed, so its own parser, help and exit statuses apply; everything else is ``NetreachCommand``.
@main
enum NetreachMain {
    static func main() async {
        if let forwarded = GetForwarding.helperArguments(CommandLine.arguments) {
            GetForwarding.exec(forwarded)
        }
        await NetreachCommand.main()
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

            \(CLIExitCode.table)
            """,
        subcommands: [StatusCommand.self, WatchCommand.self, WaitCommand.self, GetCommandForwarder.self]
    )
}
