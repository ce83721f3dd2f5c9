import BenchStatistics

/// The targets: the service keeps ≥ 95% of the bare transport's throughput, and its p99 is
/// at most 1.1× the bare transport's.
enum Target {
    static let throughputRatio = 0.95
    static let p99Ratio = 1.1
}

/// One mode (bare or service) of one cell, over all rounds.
struct ModeResult: Codable {
    /// One round's share of the requests.
    struct Round: Codable {
        var round: Int
        var requests: Int
        var wallSeconds: Double
        var requestsPerSecond: Double
        /// The client process's CPU time (every thread) per request, µs; the server is not in it.
        var cpuMicrosecondsPerRequest: Double
        /// Context switches of the client process (every thread) per request.
        var contextSwitchesPerRequest: Double
        var failures: Int
        var retried: Int
        var loadAtStart: Double?
    }

    var mode: Mode
    var rounds: [Round]
    /// Every measured request of every round.
    var latency: Distribution
    var medianRequestsPerSecond: Double
    var medianCPUMicrosecondsPerRequest: Double
    var medianContextSwitchesPerRequest: Double
    var failures: Int
    /// Successes that needed more than one attempt (service only); should be 0.
    var retried: Int
    var warmupFailures: Int
    var failureSamples: [String]

    init(mode: Mode, runs: [Load.Run], warmupFailures: Int) {
        self.mode = mode
        rounds = runs.map { run in
            let seconds = Double(run.wallNanoseconds) / 1e9
            return Round(round: run.round, requests: run.requests, wallSeconds: seconds,
                         requestsPerSecond: Double(run.requests) / seconds,
                         cpuMicrosecondsPerRequest: Double(run.cpuNanoseconds) / 1000 / Double(run.requests),
                         contextSwitchesPerRequest: Double(run.contextSwitches) / Double(run.requests),
                         failures: run.failures, retried: run.retried, loadAtStart: run.loadAtStart)
        }
        latency = Distribution(runs.flatMap(\.latenciesNanoseconds))
        medianRequestsPerSecond = median(rounds.map(\.requestsPerSecond))
        medianCPUMicrosecondsPerRequest = median(rounds.map(\.cpuMicrosecondsPerRequest))
        medianContextSwitchesPerRequest = median(rounds.map(\.contextSwitchesPerRequest))
        failures = runs.reduce(0) { $0 + $1.failures }
        retried = runs.reduce(0) { $0 + $1.retried }
        self.warmupFailures = warmupFailures
        failureSamples = Array(runs.flatMap(\.failureSamples).prefix(5))
    }
}

/// Bare against service for one transport and concurrency.
struct CellResult: Codable {
    var transport: TransportKind
    var transportName: String
    var concurrency: Int
    var bare: ModeResult
    var service: ModeResult
    /// Diagnostic modes (`--diagnose`), if any; their throughput is compared with bare's in the table.
    var diagnostics: [ModeResult]
    /// Median service throughput over median bare throughput.
    var throughputRatio: Double
    /// Service over bare within each round (the two ran back to back), for the spread.
    var pairedThroughputRatios: [Double]
    var p50Ratio: Double
    var p99Ratio: Double
    var throughputTargetMet: Bool
    var p99TargetMet: Bool

    init(cell: Cell, bare: ModeResult, service: ModeResult, diagnostics: [ModeResult]) {
        transport = cell.transport
        transportName = cell.transport.name
        concurrency = cell.concurrency
        self.bare = bare
        self.service = service
        self.diagnostics = diagnostics
        throughputRatio = service.medianRequestsPerSecond / bare.medianRequestsPerSecond
        pairedThroughputRatios = zip(service.rounds, bare.rounds).map { $0.requestsPerSecond / $1.requestsPerSecond }
        p50Ratio = service.latency.p50 / bare.latency.p50
        p99Ratio = service.latency.p99 / bare.latency.p99
        throughputTargetMet = throughputRatio >= Target.throughputRatio
        p99TargetMet = p99Ratio <= Target.p99Ratio
    }
}
