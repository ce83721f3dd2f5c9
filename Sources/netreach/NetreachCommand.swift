import ArgumentParser

/// The `netreach` command: the network path as `PathMonitor` sees it, from the shell.
@main
struct NetreachCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "netreach",
        abstract: "Show, follow and wait for the network path, like Apple's NWPathMonitor.",
        discussion: """
            netreach reads the kernel's links, addresses and routes (rtnetlink) and resolv.conf. \
            It only observes: it sends no traffic anywhere.

            \(CLIExitCode.table)
            """,
        subcommands: [StatusCommand.self, WatchCommand.self, WaitCommand.self]
    )
}
