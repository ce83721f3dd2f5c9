import ArgumentParser
import NIOCore
import NIOPosix
import NetReachConditioner

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `netreach condition`: a link conditioner in front of a server, without root: a TCP proxy with
/// Apple's Network Link Conditioner profiles, custom conditions and toxiproxy's faults, changed
/// while it runs through a control API on loopback.
package struct ConditionCommand: NetreachSubcommand {
    package static let configuration = CommandConfiguration(
        commandName: "condition",
        _superCommandName: NetreachCommand.commandName,
        abstract:
            "Relay TCP through a bad link on purpose: Apple's link profiles, delay, loss and faults, no root needed.",
        usage: """
            netreach condition --listen [name=]<host:port> [--listen ...]
                --upstream <host:port> [--upstream ...] [--profile <name>]
                [conditions] [--fault <spec> ...] [--control <host:port>] [--json]
            """,
        discussion: ConditionHelp.discussion
    )

    @Option(
        name: .customLong("listen"),
        help: ArgumentHelp(
            "Where clients connect (port 0: a free one, printed at start); repeat for several listeners, optionally named (api=127.0.0.1:8001; default 1, 2, ...).",
            valueName: "[name=]host:port"))
    var listens: [String] = []

    @Option(
        name: .customLong("upstream"),
        help: ArgumentHelp(
            "The server each listener relays to: one for all, or one per --listen in the same order.",
            valueName: "host:port"))
    var upstreams: [String] = []

    @Option(
        name: .customLong("profile"),
        help: ArgumentHelp(
            "One of Apple's link profiles (table below); the condition options below change its values.",
            valueName: "name"))
    var profiles: [String] = []

    @Option(
        name: .customLong("bandwidth"),
        help: ArgumentHelp("Both directions' bandwidth: 780kbit, 40mbit, 500kB ... per second.", valueName: "rate"))
    var bandwidths: [String] = []
    @Option(name: .customLong("up-bandwidth"), help: ArgumentHelp("Client to server.", valueName: "rate"))
    var upBandwidths: [String] = []
    @Option(name: .customLong("down-bandwidth"), help: ArgumentHelp("Server to client.", valueName: "rate"))
    var downBandwidths: [String] = []

    @Option(
        name: .customLong("delay"),
        help: ArgumentHelp(
            "Added to every byte each way (a round trip gets twice this): 100ms, 1.5s.", valueName: "duration"))
    var delays: [String] = []
    @Option(name: .customLong("up-delay"), help: ArgumentHelp("Client to server.", valueName: "duration"))
    var upDelays: [String] = []
    @Option(name: .customLong("down-delay"), help: ArgumentHelp("Server to client.", valueName: "duration"))
    var downDelays: [String] = []

    @Option(
        name: .customLong("jitter"),
        help: ArgumentHelp(
            "Each chunk's delay varies by up to this either way (bytes stay in order).", valueName: "duration"))
    var jitters: [String] = []
    @Option(name: .customLong("up-jitter"), help: ArgumentHelp("Client to server.", valueName: "duration"))
    var upJitters: [String] = []
    @Option(name: .customLong("down-jitter"), help: ArgumentHelp("Server to client.", valueName: "duration"))
    var downJitters: [String] = []

    @Option(
        name: .customLong("loss"),
        help: ArgumentHelp(
            "Packets lost each way, modelled as retransmission delay: 10% or 0.1; 100% carries nothing.",
            valueName: "share"))
    var losses: [String] = []
    @Option(name: .customLong("up-loss"), help: ArgumentHelp("Client to server.", valueName: "share"))
    var upLosses: [String] = []
    @Option(name: .customLong("down-loss"), help: ArgumentHelp("Server to client.", valueName: "share"))
    var downLosses: [String] = []

    @Option(
        name: .customLong("connect-delay"),
        help: ArgumentHelp(
            "Nothing is relayed until this long after each connection is accepted (a slow name lookup).",
            valueName: "duration"))
    var connectDelays: [String] = []

    @Option(
        name: .customLong("seed"),
        help: ArgumentHelp("Seeds jitter and loss, so a run repeats exactly (default 1).", valueName: "n"))
    var seeds: [UInt64] = []

    @Flag(
        help:
            "Give every connection the whole bandwidth; by default a listener's connections share it, as flows share a link."
    )
    var bandwidthPerConnection = false

    @Option(
        name: .customLong("fault"),
        help: ArgumentHelp("A toxiproxy-style fault (see FAULTS); repeatable.", valueName: "spec"))
    var faultSpecs: [String] = []

    @Option(
        name: .customLong("control"),
        help: ArgumentHelp(
            "Where the control API listens; loopback only (default 127.0.0.1:0, a free port, printed at start).",
            valueName: "host:port"))
    var controls: [String] = []

    @Flag(
        help:
            "Print JSON lines: a ready event with every address, one per finished connection with its statistics, a stopped event at the end."
    )
    var json = false

    package init() {}

    /// Everything the options say, parsed and checked.
    struct Plan {
        struct Listener {
            var name: String
            var listen: ConditionArguments.Address
            var upstream: ConditionArguments.Address
        }

        var listeners: [Listener]
        var profile: LinkProfile?
        var conditions: LinkConditions
        var faults: [NamedFault]
        var control: ConditionArguments.Address
    }

    package func validate() throws {
        _ = try plan()
    }

    func plan() throws(ValidationError) -> Plan {
        guard !listens.isEmpty else {
            throw ValidationError("--listen is required: where clients connect, such as 127.0.0.1:8001.")
        }
        guard !upstreams.isEmpty else {
            throw ValidationError("--upstream is required: the server to relay to, such as 127.0.0.1:8080.")
        }
        guard upstreams.count == 1 || upstreams.count == listens.count else {
            throw ValidationError(
                "give one --upstream for every listener, or one per --listen (\(listens.count) --listen, \(upstreams.count) --upstream)."
            )
        }
        var listeners: [Plan.Listener] = []
        for (index, text) in listens.enumerated() {
            let listen = try ConditionArguments.address(
                text, option: "--listen", allowsName: true, allowsZeroPort: true)
            let upstreamText = upstreams.count == 1 ? upstreams[0] : upstreams[index]
            let upstream = try ConditionArguments.address(
                upstreamText, option: "--upstream", allowsName: false, allowsZeroPort: false)
            let name = listen.name ?? "\(index + 1)"
            guard !listeners.contains(where: { $0.name == name }) else {
                throw ValidationError("--listen: two listeners are named \(name).")
            }
            listeners.append(.init(name: name, listen: listen, upstream: upstream))
        }

        let profile = try single(profiles, "--profile").map { name throws(ValidationError) -> LinkProfile in
            guard let profile = LinkProfile(name: name) else {
                throw ValidationError(
                    "--profile \(name): unknown profile; the profiles are \(LinkProfile.allCases.map(\.name).joined(separator: ", "))."
                )
            }
            return profile
        }
        var conditions = profile?.conditions ?? .none
        try apply(bandwidths, upBandwidths, downBandwidths, "bandwidth", to: &conditions, \.bandwidth) {
            text, option throws(ValidationError) in
            try ConditionArguments.bandwidth(text, option: option)
        }
        try apply(delays, upDelays, downDelays, "delay", to: &conditions, \.delay, ConditionArguments.duration)
        try apply(jitters, upJitters, downJitters, "jitter", to: &conditions, \.jitter, ConditionArguments.duration)
        try apply(losses, upLosses, downLosses, "loss", to: &conditions, \.loss, ConditionArguments.loss)
        if let text = try single(connectDelays, "--connect-delay") {
            conditions.connectDelay = try ConditionArguments.duration(text, option: "--connect-delay")
        }
        if let seed = try single(seeds, "--seed") { conditions.seed = seed }
        if bandwidthPerConnection { conditions.bandwidthPerConnection = true }

        var faults: [NamedFault] = []
        for spec in faultSpecs {
            let fault = try ConditionArguments.fault(spec)
            guard !faults.contains(where: { $0.name == fault.name }) else {
                throw ValidationError("--fault \(spec): a fault named \(fault.name) is given already; add name=OTHER.")
            }
            faults.append(fault)
        }
        let controlText = try single(controls, "--control") ?? "127.0.0.1:0"
        let control = try ConditionArguments.address(
            controlText, option: "--control", allowsName: false, allowsZeroPort: true)
        return Plan(listeners: listeners, profile: profile, conditions: conditions, faults: faults, control: control)
    }

    private func single<Value>(_ values: [Value], _ option: String) throws(ValidationError) -> Value? {
        guard values.count <= 1 else { throw ValidationError("\(option) was given more than once.") }
        return values.first
    }

    /// Sets a value for both directions (`--delay`), then for each (`--up-delay`, `--down-delay`).
    private func apply<Value>(
        _ both: [String], _ up: [String], _ down: [String], _ name: String, to conditions: inout LinkConditions,
        _ key: WritableKeyPath<DirectionConditions, Value>, _ parse: (String, String) throws(ValidationError) -> Value
    ) throws(ValidationError) {
        if let text = try single(both, "--\(name)") {
            let value = try parse(text, "--\(name)")
            conditions.upstream[keyPath: key] = value
            conditions.downstream[keyPath: key] = value
        }
        if let text = try single(up, "--up-\(name)") {
            conditions.upstream[keyPath: key] = try parse(text, "--up-\(name)")
        }
        if let text = try single(down, "--down-\(name)") {
            conditions.downstream[keyPath: key] = try parse(text, "--down-\(name)")
        }
    }

    private func apply<Value>(
        _ both: [String], _ up: [String], _ down: [String], _ name: String, to conditions: inout LinkConditions,
        _ key: WritableKeyPath<DirectionConditions, Value?>, _ parse: (String, String) throws(ValidationError) -> Value
    ) throws(ValidationError) {
        try apply(both, up, down, name, to: &conditions, key) { text, option throws(ValidationError) -> Value? in
            try parse(text, option)
        }
    }

    package func run(_ capabilities: Capabilities) async throws {
        let plan = try plan()
        let group = MultiThreadedEventLoopGroup(numberOfThreads: max(1, min(4, System.coreCount)))
        do {
            try await serve(plan, group: group)
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
        try? await group.shutdownGracefully()
    }

    private func serve(_ plan: Plan, group: any EventLoopGroup) async throws {
        let (events, sink) = AsyncStream.makeStream(of: ConditionEvent.self)
        let output = ConditionOutput(json: json)

        var listeners: [ConditionedListener] = []
        var control: ConditionerControl?
        func stopAll() async {
            try? await control?.stop()
            for listener in listeners { try? await listener.proxy.stop() }
        }
        do throws(ConditionerError) {
            for listener in plan.listeners {
                let name = listener.name
                let proxy = try await ConditionedProxy.start(
                    host: listener.listen.host, port: listener.listen.port,
                    upstreamHost: listener.upstream.host, upstreamPort: listener.upstream.port,
                    conditions: plan.conditions, faults: plan.faults, group: group,
                    connectionFinished: { sink.yield(.connection(listener: name, $0)) })
                listeners.append(ConditionedListener(name: name, proxy: proxy))
            }
            let routes = ControlRoutes(
                listeners: listeners,
                profiles: plan.profile.map { profile in
                    Dictionary(uniqueKeysWithValues: listeners.map { ($0.name, profile) })
                } ?? [:])
            control = try await ConditionerControl.start(
                host: plan.control.host, port: plan.control.port, routes: routes, group: group)
        } catch {
            await stopAll()
            StandardStream.complain(error.description)
            throw CLIExitCode.cannotListen
        }

        let signals = TerminationSignals.install { sink.yield(.stop) }
        defer { signals.forEach { $0.cancel() } }
        var finished = 0
        do throws(StandardStream.WriteError) {
            try output.ready(
                listeners: listeners, control: control!, profile: plan.profile, conditions: plan.conditions,
                faults: plan.faults)
            for await event in events {
                switch event {
                case .connection(let name, let statistics):
                    finished += 1
                    try output.connection(listener: name, statistics)
                case .stop:
                    await stopAll()
                    try output.stopped(connections: finished)
                    return
                }
            }
        } catch {
            await stopAll()
            throw CLIExitCode.outputFailed(error)
        }
    }
}

/// What the command's main loop is told.
enum ConditionEvent: Sendable {
    case connection(listener: String, ConnectionStatistics)
    case stop
}
