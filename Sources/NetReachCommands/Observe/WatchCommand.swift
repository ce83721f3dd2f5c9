import ArgumentParser
import Dispatch
import NetReach
import NetReachConnectivity
import Synchronization

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `netreach watch`: the current path, then a line per change, until SIGINT or SIGTERM; with
/// `--internet`, whether the internet answers too.
package struct WatchCommand: NetreachSubcommand {
    package static let configuration = CommandConfiguration(
        commandName: "watch",
        _superCommandName: NetreachCommand.commandName,
        abstract: "Print the current network path, then one line per change, until interrupted.",
        usage: """
            netreach watch [--json] [--to <host>] [--port <port>]
                [--protocol tcp|udp] [--namespace <name|path>]
              netreach watch --internet [--probe <url[=expect]> ...]
                [--well-known-probes] [--quorum <n>] [--family 4|6]
                [--probe-timeout <duration>] [--probe-interval <duration>]
                [--max-probe-backoff <duration>] [--proxy <url>] [--noproxy <list>]
                [--json] [--namespace <name|path>]
            """, // no "..." after single-valued options: see WaitCommand
        discussion: """
            Each line is an ISO-8601 UTC timestamp with milliseconds, then the path:
              2026-11-22T19:40:01.123Z satisfied eth0(wiredEthernet) ipv4 dns gw 192.0.2.1
              2026-11-22T19:40:07.456Z unsatisfied (no default route)
            A line is printed only when the path changes, and written at once even into a pipe. \
            With --json, each line is one JSON object with a "timestamp" field, described by \
            Docs/netreach-json.schema.json (a JSON Schema, in the netreach sources).

            With --internet, watch also judges whether the internet answers, as `netreach check` \
            does (the same probe flags; see `netreach check --help`), and adds the verdict to each \
            line, printing a line when either changes:
              2026-11-22T19:40:01.123Z satisfied eth0(wiredEthernet) ipv4 dns gw 192.0.2.1; internet full (ipv4 full, ipv6 local)
            It probes at start and after every path change; while not full, again after 1 s, \
            doubling to 30 s (--max-probe-backoff); while full, not at all unless \
            --probe-interval is given. Leaving full takes two failed rounds and 10 s. A lost \
            carrier (link down) changes the path at once but the verdict only once it has \
            lasted 6 s, so a flapping link changes it at most once. No probe goes over an \
            expensive or constrained path. With --json, each line has a \
            "connectivity" object (the verdict and its probes' evidence). With --namespace, the \
            probes leave from inside that namespace.

            SIGINT (Ctrl-C) or SIGTERM ends the command with status 0.

            If the network can no longer be observed (say the namespace was deleted), watch \
            prints that path (unsatisfied, monitor unavailable), says why on standard error and \
            exits 2. If standard output cannot be written, or its reader has gone (as in \
            `netreach watch | head -1`), watch exits at once with status 74.

            \(ExitStatusTable.help(for: "watch"))
            """
    )

    @Flag(
        help:
            "Print one JSON object per line (keys sorted, with a \"timestamp\") instead of text; schema: Docs/netreach-json.schema.json."
    )
    var json = false

    @OptionGroup var monitorOptions: MonitorOptions

    @OptionGroup var internetOptions: InternetOptions

    package init() {}

    package func validate() throws {
        if internetOptions.internet, monitorOptions.destination != nil {
            throw ValidationError("--internet judges the path to the internet; it cannot be combined with --to.")
        }
    }

    package func run(_ capabilities: Capabilities) async throws {
        if internetOptions.internet { return try await watchInternet(capabilities) }
        let monitor = monitorOptions.makeMonitor()
        defer { monitor.cancel() }
        // Each line is written on the thread that computed its path (PathLineWriter): no hop.
        let lines = PathLineWriter(
            json: json, failure: { monitor.failure },
            write: { line throws(ExitCode) in try CommandOutput.write(line) })
        monitor.updateObserver = { lines.receive($0) }
        // An interrupt is an orderly exit: status 0, every line already written.
        let signalSources = TerminationSignals.install { lines.finish(.interrupted) }
        defer { signalSources.forEach { $0.cancel() } }
        monitor.start(queue: DispatchQueue(label: "netreach.monitor"))
        try MonitorOptions.checkStarted(monitor)
        // Nobody reading any more: end now, not at the next change (which may never come). After
        // start, so that a reader gone already does not end a monitor before it starts.
        OutputHangup.whenReaderIsGone { lines.finish(.failed(CommandOutput.failed(CommandOutput.readerGone))) }
        // The current path first, then each change.
        lines.arm()
        if case .failed(let status) = await lines.ending() { throw status }
    }

    /// `watch --internet`: the path and the connectivity verdict, a line whenever either changes.
    private func watchInternet(_ capabilities: Capabilities) async throws {
        if let namespace = monitorOptions.namespace { try capabilities.enterNamespace(namespace) }
        let paths = monitorOptions.makeMonitor()
        defer { paths.cancel() }
        let monitor = ConnectivityMonitor(
            configuration: try internetOptions.configuration(inNamespace: monitorOptions.namespace != nil),
            pathMonitor: paths, prober: capabilities.makeProber(internetOptions.probing.transportSettings()))
        defer { monitor.cancel() }
        let signalSources = TerminationSignals.install {
            monitor.cancel()
            paths.cancel()
        }
        defer { signalSources.forEach { $0.cancel() } }
        paths.start(queue: DispatchQueue(label: "netreach.monitor"))
        try MonitorOptions.checkStarted(paths)
        let verdicts = monitor.verdicts
        monitor.start(queue: DispatchQueue(label: "netreach.connectivity"))
        let readerGone = OnceFlag()
        OutputHangup.whenReaderIsGone {
            readerGone.set()
            monitor.cancel()
        }
        try await Self.follow(
            verdicts, json: json, failure: { paths.failure },
            write: { line throws(ExitCode) in try CommandOutput.writeLine(line) })
        if readerGone.isSet { throw CommandOutput.failed(CommandOutput.readerGone) }
    }

    /// Writes a line for each verdict whose path or levels differ from the last line's, until
    /// `verdicts` ends; a path the monitor reports as ``UnsatisfiedReason/monitorUnavailable``
    /// ends the command as it does without `--internet`.
    static func follow(
        _ verdicts: AsyncStream<Connectivity>, json: Bool, failure: () -> PathMonitorError?,
        now: () -> Date = Date.init, complain: (String) -> Void = StandardStream.complain,
        write: (String) throws(ExitCode) -> Void
    ) async throws(ExitCode) {
        // Evidence differs every round; a line is worth writing when the path or a level changed.
        try await follow(
            verdicts, path: \.path, isRepeat: { $0.path == $1.path && $0.levels == $1.levels },
            line: { verdict, date in
                json ? ConnectivityJSON.line(verdict, at: date) : PathFormatting.timestampedLine(verdict, at: date)
            },
            failure: failure, now: now, complain: complain, write: write)
    }

    /// The loop both share: a line per value that is not a repeat of the last one written, and
    /// the end of the command once the monitor says it stopped observing.
    private static func follow<Value>(
        _ values: AsyncStream<Value>, path: (Value) -> NetworkPath, isRepeat: (Value, Value) -> Bool,
        line: (Value, Date) -> String, failure: () -> PathMonitorError?,
        now: () -> Date, complain: (String) -> Void, write: (String) throws(ExitCode) -> Void
    ) async throws(ExitCode) {
        var last: Value?
        for await value in values {
            if let last, isRepeat(last, value) { continue }
            last = value
            try write(line(value, now()))
            if path(value).unsatisfiedReason == .monitorUnavailable {
                throw MonitorOptions.stoppedObserving(failure(), complain: complain)
            }
        }
    }

    /// Set once, from any thread.
    private final class OnceFlag: Sendable {
        private let value = Atomic(false)
        func set() { value.store(true, ordering: .releasing) }
        var isSet: Bool { value.load(ordering: .acquiring) }
    }
}
