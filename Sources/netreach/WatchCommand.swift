import ArgumentParser
import Dispatch
import Foundation
import NetReach
import NetReachCLI

/// `netreach watch`: the current path, then a line per change, until SIGINT or SIGTERM.
struct WatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Print the current network path, then one line per change, until interrupted.",
        discussion: """
            Each line is an ISO-8601 UTC timestamp with milliseconds, then the path:
              2026-11-22T19:40:01.123Z satisfied eth0(wiredEthernet) ipv4 dns gw 192.0.2.1
              2026-11-22T19:40:07.456Z unsatisfied (no default route)
            A line is printed only when the path changes, and written at once even into a pipe. \
            With --json, each line is one JSON object with a "timestamp" field.

            SIGINT (Ctrl-C) or SIGTERM ends the command with status 0.

            \(CLIExitCode.table(includesTimeout: false))
            """
    )

    @Flag(help: "Print one JSON object per line (keys sorted, with a \"timestamp\") instead of text.")
    var json = false

    @OptionGroup var monitorOptions: MonitorOptions

    func run() async throws {
        let monitor = PathMonitor(namespace: monitorOptions.networkNamespace)
        // Ending the monitor ends the loop below, so an interrupt is an orderly exit: status 0,
        // every line already written.
        let signalSources = TerminationSignals.install { monitor.cancel() }
        defer { signalSources.forEach { $0.cancel() } }
        monitor.start(queue: DispatchQueue(label: "netreach.monitor"))
        try MonitorOptions.checkStarted(monitor)

        // `paths` starts with the current path, then yields each change.
        for await path in monitor.paths {
            let now = Date()
            StandardStream.output.writeLine(json ? PathFormatting.json(path, at: now)
                                                 : PathFormatting.timestampedLine(path, at: now))
        }
    }
}
