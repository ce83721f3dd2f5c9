import ArgumentParser

/// The `netreach` command: the network path as `PathMonitor` sees it, from the shell.
@main
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
        subcommands: [StatusCommand.self, WatchCommand.self, WaitCommand.self, GetCommand.self]
    )
}
