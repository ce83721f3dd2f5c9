import ArgumentParser
import NetReach

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `netreach status`: the current path, once.
package struct StatusCommand: NetreachSubcommand {
    package static let configuration = CommandConfiguration(
        commandName: "status",
        _superCommandName: NetreachCommand.commandName,
        abstract: "Print the current network path.",
        usage: """
            netreach status [--json] [--to <host>] [--port <port>]
                [--protocol tcp|udp] [--namespace <name|path>]
            """, // no "...": see WaitCommand
        discussion: """
            Prints one `key: value` line per property (status, reason, interfaces with their \
            types, ipv4, ipv6, dns, expensive, constrained, multipath, gateways); every key is always \
            present. With --json, prints exactly one JSON object on one line instead, whose \
            keys and values Docs/netreach-json.schema.json (a JSON Schema, in the netreach \
            sources) describes; unsatisfiedReason is null when the path is satisfied.

            The exit status says whether the path could be read, not whether it is satisfied: \
            use `netreach wait --timeout 0` for that.

            \(ExitStatusTable.help(for: "status"))
            """
    )

    @Flag(
        help:
            "Print one JSON object on one line (keys sorted, with a \"timestamp\") instead of text; schema: Docs/netreach-json.schema.json."
    )
    var json = false

    @OptionGroup var monitorOptions: MonitorOptions

    package init() {}

    package func run(_ capabilities: Capabilities) async throws {
        let monitor = try monitorOptions.startMonitor()
        defer { monitor.cancel() }
        let path = monitor.currentPath
        try CommandOutput.writeLine(json ? PathJSON.line(path, at: Date()) : PathFormatting.block(path))
    }
}
