import Foundation

/// Everything one run measured, for the table and the JSON file.
struct Report: Codable {
    var commit: String
    var changedFilesUnderSources: Int?
    var machine: String
    var loadBefore: LoadAverage?
    var loadAfter: LoadAverage?
    var monitorPath: String
    var monitorSatisfied: Bool
    var requestsPerMode: Int
    var rounds: Int
    var warmup: Int
    var cells: [CellResult]
    var serviceCost: ServiceCost.Result?

    var totalFailures: Int {
        cells.flatMap { [$0.bare, $0.service] + $0.diagnostics }.reduce(0) { $0 + $1.failures + $1.warmupFailures }
            + (serviceCost?.failures ?? 0)
    }

    func write(toJSON path: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        encoder.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        try encoder.encode(self).write(to: URL(fileURLWithPath: path))
    }

    func table() -> String {
        var lines: [String] = []
        let sourceState = changedFilesUnderSources.map { $0 == 0 ? "clean" : "\($0) changed files" } ?? "unknown state"
        lines.append("HTTPOverhead: \(requestsPerMode) GETs per transport, concurrency and mode, \(rounds) rounds of "
            + "\(requestsPerMode / rounds) (ABBA), warm-up \(warmup)")
        lines.append("commit \(commit) (Sources/ \(sourceState)); \(machine)")
        lines.append("load before \(loadBefore?.description ?? "?"), after \(loadAfter?.description ?? "?"); "
            + "monitor: PathMonitor.shared, \(monitorSatisfied ? "satisfied" : "NOT satisfied"): \(monitorPath)")
        lines.append("")
        lines.append(row("transport", "conc", "mode", "req/s (median)", "req/s per round", "p50 µs", "p99 µs", "max µs",
                         "CPU µs/req", "cs/req", "failed", "retried"))
        for cell in cells {
            for result in [cell.bare, cell.service] + cell.diagnostics {
                lines.append(row(
                    cell.transportName, "\(cell.concurrency)", result.mode.rawValue,
                    fixed(result.medianRequestsPerSecond, 0),
                    result.rounds.map { fixed($0.requestsPerSecond, 0) }.joined(separator: " "),
                    fixed(result.latency.p50, 1), fixed(result.latency.p99, 1), fixed(result.latency.max, 0),
                    fixed(result.medianCPUMicrosecondsPerRequest, 1), fixed(result.medianContextSwitchesPerRequest, 2),
                    "\(result.failures + result.warmupFailures)", "\(result.retried)"))
            }
            let paired = cell.pairedThroughputRatios.map { fixed($0, 3) }.joined(separator: " ")
            lines.append("    service/bare: throughput \(fixed(cell.throughputRatio, 3)) (per round \(paired)) — "
                + "target ≥ \(Target.throughputRatio): \(cell.throughputTargetMet ? "met" : "MISSED"); "
                + "p99 \(fixed(cell.p99Ratio, 3))× — target ≤ \(Target.p99Ratio)×: \(cell.p99TargetMet ? "met" : "MISSED"); "
                + "p50 \(fixed(cell.p50Ratio, 3))×")
            for diagnostic in cell.diagnostics {
                let ratio = diagnostic.medianRequestsPerSecond / cell.bare.medianRequestsPerSecond
                lines.append("    \(diagnostic.mode.rawValue)/bare (diagnostic): throughput \(fixed(ratio, 3)), "
                    + "p99 \(fixed(diagnostic.latency.p99 / cell.bare.latency.p99, 3))×, p50 \(fixed(diagnostic.latency.p50 / cell.bare.latency.p50, 3))×")
            }
            for sample in ([cell.bare, cell.service] + cell.diagnostics).flatMap(\.failureSamples) {
                lines.append("    failure: \(sample)")
            }
        }
        if let serviceCost {
            lines.append("")
            lines.append("NetworkService's own cost: an in-memory transport that answers at once, \(serviceCost.calls) calls "
                + "per variant, one task, median of \(serviceCost.repetitions) interleaved repetitions (failures: \(serviceCost.failures))")
            for variant in serviceCost.variants {
                lines.append("  " + pad(variant.name, 62) + pad(fixed(variant.nanosecondsPerCall / 1000, 2), 8, right: true) + " µs/call")
            }
        }
        return lines.joined(separator: "\n")
    }

    private func row(_ columns: String...) -> String {
        let widths = [16, 5, 10, 15, 36, 9, 9, 9, 11, 7, 7, 8]
        return zip(columns, widths).enumerated().map { index, pair in
            pad(pair.0, pair.1, right: index != 0 && index != 2 && index != 4)
        }.joined(separator: " ")
    }
}

func fixed(_ value: Double, _ digits: Int) -> String { String(format: "%.\(digits)f", value) }

func pad(_ text: String, _ width: Int, right: Bool = false) -> String {
    let padding = String(repeating: " ", count: max(0, width - text.count))
    return right ? padding + text : text + padding
}
