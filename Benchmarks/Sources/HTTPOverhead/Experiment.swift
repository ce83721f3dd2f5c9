import NetReachHTTP
import Synchronization

/// A transport at a concurrency: one pair of rows in the table.
struct Cell: Sendable, Hashable, Codable {
    var transport: TransportKind
    var concurrency: Int
}

/// The whole measurement: a warm-up for every cell and mode, then the rounds.
struct Experiment {
    let cells: [Cell]
    /// Bare and service, then any diagnostic modes.
    let modes: [Mode]
    let port: Int
    let requestsPerMode: Int
    let rounds: Int
    let warmup: Int
    let deadline: Deadline

    func run() async -> [CellResult] {
        // One instance per transport kind, shared by every mode: the same connection pool.
        let subjects = Dictionary(uniqueKeysWithValues: Set(cells.map(\.transport)).map { kind in
            let transport = kind.makeTransport()
            return (kind, Dictionary(uniqueKeysWithValues: modes.map { ($0, Subject(mode: $0, transport: transport, port: port)) }))
        })
        func subject(_ cell: Cell, _ mode: Mode) -> Subject { subjects[cell.transport]![mode]! }

        var warmupFailures: [Cell: [Mode: Int]] = [:]
        for cell in cells {
            for mode in modes {
                let doing = "warming up \(cell.transport.name) c=\(cell.concurrency) \(mode)"
                let load = await Load.run(subject(cell, mode), count: warmup, concurrency: cell.concurrency,
                                          deadline: deadline, doing: doing)
                warmupFailures[cell, default: [:]][mode] = load.failures
                if load.failures > 0 { log("\(doing): \(load.failures) failed, e.g. \(load.failureSamples.first ?? "")") }
            }
        }

        let perRound = requestsPerMode / rounds
        var collected: [Cell: [Mode: [Load.Run]]] = [:]
        for round in 0..<rounds {
            log("round \(round + 1)/\(rounds), load \(LoadAverage.now()?.description ?? "?")")
            // ABBA over the rounds (ABCD DCBA with diagnostics): every mode has the same mean position.
            let order = round.isMultiple(of: 2) ? modes : modes.reversed()
            for cell in cells {
                for mode in order {
                    let doing = "round \(round + 1), \(cell.transport.name) c=\(cell.concurrency) \(mode)"
                    var load = await Load.run(subject(cell, mode), count: perRound, concurrency: cell.concurrency,
                                              deadline: deadline, doing: doing)
                    load.round = round + 1
                    collected[cell, default: [:]][mode, default: []].append(load)
                }
            }
        }

        return cells.map { cell in
            let runs = collected[cell]!
            let results = modes.map { ModeResult(mode: $0, runs: runs[$0]!, warmupFailures: warmupFailures[cell]![$0]!) }
            return CellResult(cell: cell, bare: results[0], service: results[1], diagnostics: Array(results.dropFirst(2)))
        }
    }
}

/// Closed-loop load: `concurrency` workers, each sending its next GET as soon as the last returned,
/// until `count` have been sent.
enum Load {
    /// One mode's requests in one round (or a warm-up).
    struct Run {
        var round = 0
        var requests: Int
        var wallNanoseconds: Int64
        var cpuNanoseconds: Int64
        var contextSwitches: Int
        var latenciesNanoseconds: [Int64]
        var failures: Int
        var retried: Int
        var failureSamples: [String]
        var loadAtStart: Double?
    }

    static func run(_ subject: Subject, count: Int, concurrency: Int, deadline: Deadline, doing: String) async -> Run {
        let tickets = Tickets(count)
        let loadAtStart = LoadAverage.now()?.one
        let switchesStart = processContextSwitches()
        let cpuStart = processCPUNanoseconds()
        let start = monotonicNanoseconds()
        let tallies = await withTaskGroup(of: Tally.self, returning: [Tally].self) { group in
            for _ in 0..<min(concurrency, max(count, 1)) {
                group.addTask {
                    var tally = Tally(capacity: count / concurrency + 1)
                    while tickets.take() {
                        let sent = monotonicNanoseconds()
                        let outcome = await subject.get()
                        let received = monotonicNanoseconds()
                        tally.record(outcome, nanoseconds: received - sent)
                        if received >= deadline.endNanoseconds { deadline.check(doing) }
                    }
                    return tally
                }
            }
            var tallies: [Tally] = []
            for await tally in group { tallies.append(tally) }
            return tallies
        }
        let wall = monotonicNanoseconds() - start
        let cpu = processCPUNanoseconds() - cpuStart
        let switches = processContextSwitches() - switchesStart
        return Run(
            requests: count, wallNanoseconds: wall, cpuNanoseconds: cpu, contextSwitches: switches,
            latenciesNanoseconds: tallies.flatMap(\.latencies),
            failures: tallies.reduce(0) { $0 + $1.failures }, retried: tallies.reduce(0) { $0 + $1.retried },
            failureSamples: Array(tallies.flatMap(\.failureSamples).prefix(5)), loadAtStart: loadAtStart)
    }

    /// One worker's record.
    private struct Tally: Sendable {
        var latencies: [Int64] = []
        var failures = 0
        var retried = 0
        var failureSamples: [String] = []

        init(capacity: Int) { latencies.reserveCapacity(capacity) }

        mutating func record(_ outcome: Outcome, nanoseconds: Int64) {
            latencies.append(nanoseconds)
            switch outcome {
            case .ok: break
            case .retried: retried += 1
            case .failed(let why):
                failures += 1
                if failureSamples.count < 5 { failureSamples.append(why) }
            }
        }
    }

    /// Hands out exactly `count` requests to the workers.
    private final class Tickets: Sendable {
        private let remaining: Atomic<Int>

        init(_ count: Int) { remaining = Atomic(count) }

        func take() -> Bool { remaining.wrappingSubtract(1, ordering: .relaxed).newValue >= 0 }
    }
}
