// What NetworkService costs on top of the transport it wraps (issue 4), on loopback, in one run:
// small GETs at several concurrencies through each transport bare and through a NetworkService over
// it, against a server in a process of its own. Needs no root.
//
//   HTTPOverhead [--requests 20000] [--rounds 10] [--warmup 500] [--concurrency 1 --concurrency 32]
//                [--transport ahc --transport urlsession] [--service-cost-calls 100000]
//                [--deadline-seconds 1800] [--json PATH] [--diagnose]
//
// Bare and service take turns on the same transport instance, cell by cell, in ABBA order over the
// rounds, so drift in the machine's load hits both alike. Throughput is requests / wall time per
// round (median over rounds); latencies are per request, pooled over the rounds.
import ArgumentParser
import Foundation
import NetReach
import NetReachHTTP

@main
struct HTTPOverhead: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "HTTPOverhead",
        abstract: "NetworkService against the bare transport it wraps: throughput and latency of small GETs on loopback.",
        discussion: """
            Starts a copy of itself with --serve (HTTP/1.1 on 127.0.0.1, an ephemeral port, 200 "ok" \
            with keep-alive) and measures against it. Only loopback traffic.
            """
    )

    @Option(help: "Measured GETs per transport, concurrency and mode (bare or service), split evenly over the rounds.")
    var requests = 20_000

    @Option(help: "Rounds; in each, every cell runs bare and service back to back, the order alternating (ABBA).")
    var rounds = 10

    @Option(help: "Unmeasured GETs per transport, concurrency and mode before the first round.")
    var warmup = 500

    @Option(help: "Requests in flight at once (repeatable).")
    var concurrency: [Int] = [1, 32]

    @Option(help: "Transports to measure: ahc, urlsession (repeatable).")
    var transport: [TransportKind] = TransportKind.allCases

    @Flag(help: "Also measure two diagnostic modes: a service without monitor, and the bare transport doing the service's URL work.")
    var diagnose = false

    @Option(help: "Calls per variant when timing the service over an in-memory transport (0 skips it).")
    var serviceCostCalls = 100_000

    @Option(help: "Abort, with a message, if the whole run takes longer than this.")
    var deadlineSeconds = 1800

    @Option(help: "Also write the results as JSON to this file.")
    var json: String?

    @Flag(help: .hidden)
    var serve = false

    @Option(help: .hidden)
    var serveSeconds = 3600

    func validate() throws {
        guard requests > 0, rounds > 0, rounds.isMultiple(of: 2), requests.isMultiple(of: rounds) else {
            throw ValidationError("--rounds must be even (ABBA) and --requests a positive multiple of it")
        }
        guard warmup >= 0, serviceCostCalls >= 0 else { throw ValidationError("--warmup and --service-cost-calls must be ≥ 0") }
        guard !concurrency.isEmpty, concurrency.allSatisfy({ (1...256).contains($0) }) else {
            throw ValidationError("--concurrency must be between 1 and 256")
        }
        guard !transport.isEmpty else { throw ValidationError("name at least one --transport") }
        guard deadlineSeconds > 0, serveSeconds > 0 else { throw ValidationError("time limits must be positive") }
    }

    mutating func run() async throws {
        if serve {
            try await LoopbackServer.serve(lifetimeSeconds: serveSeconds)
        }

        let deadline = Deadline(seconds: deadlineSeconds)
        let loadBefore = LoadAverage.now()
        let checkout = Checkout.current()
        // The server lives a little longer than the deadline, and ends sooner when stdin closes.
        let server = try ServerProcess.launch(lifetimeSeconds: deadlineSeconds + 60)
        deadline.arm(killingOnExpiry: server.pid)

        // The default monitor, as users get it: started on first use, path known from then on.
        let monitor = PathMonitor.shared
        let path = monitor.currentPath
        log("server pid \(server.pid) on 127.0.0.1:\(server.port); monitor path: \(path)")

        let cells = transport.flatMap { kind in concurrency.map { Cell(transport: kind, concurrency: $0) } }
        let experiment = Experiment(
            cells: cells, modes: Mode.measured + (diagnose ? Mode.diagnostic : []), port: server.port,
            requestsPerMode: requests, rounds: rounds, warmup: warmup, deadline: deadline)
        let measured = await experiment.run()

        let serviceCost = serviceCostCalls > 0 ? await ServiceCost.measure(calls: serviceCostCalls, deadline: deadline) : nil
        server.stop()

        let report = Report(
            commit: checkout.commit, changedFilesUnderSources: checkout.changedFilesUnderSources,
            machine: Machine.describe(), loadBefore: loadBefore, loadAfter: LoadAverage.now(),
            monitorPath: String(describing: path), monitorSatisfied: path.status == .satisfied,
            requestsPerMode: requests, rounds: rounds, warmup: warmup,
            cells: measured, serviceCost: serviceCost)
        print(report.table())
        if let json {
            try report.write(toJSON: json)
            log("JSON written to \(json)")
        }
        if report.totalFailures > 0 {
            fail("\(report.totalFailures) request(s) failed; see the table", status: 4)
        }
    }
}
