import Foundation

/// Nearest-rank percentiles of latencies given in ns, reported in µs: the one summary every harness
/// here prints and writes to JSON, so their numbers mean the same thing.
public struct Distribution: Codable, Sendable {
    public var count: Int
    public var p50: Double
    public var p90: Double
    public var p99: Double
    public var max: Double
    public var mean: Double

    /// Summarises `samplesNS` (nanoseconds); every value is in microseconds, `nan` when empty.
    public init(_ samplesNS: [Int64]) {
        let sorted = samplesNS.sorted()
        count = sorted.count
        func rank(_ p: Double) -> Double {
            guard !sorted.isEmpty else { return .nan }
            let index = Swift.max(0, Int((p * Double(sorted.count)).rounded(.up)) - 1)
            return Double(sorted[Swift.min(index, sorted.count - 1)]) / 1000
        }
        p50 = rank(0.50)
        p90 = rank(0.90)
        p99 = rank(0.99)
        max = sorted.last.map { Double($0) / 1000 } ?? .nan
        mean = sorted.isEmpty ? .nan : Double(sorted.reduce(0, +)) / Double(sorted.count) / 1000
    }

    /// One line for a terminal: count, p50, p90, p99, max and mean.
    public var line: String {
        String(format: "n=%4d  p50 %8.1f  p90 %8.1f  p99 %8.1f  max %8.1f  mean %8.1f µs", count, p50, p90, p99, max, mean)
    }
}

/// The median of `values` (the mean of the middle two for an even count); `nan` when empty.
public func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return .nan }
    let middle = sorted.count / 2
    return sorted.count.isMultiple(of: 2) ? (sorted[middle - 1] + sorted[middle]) / 2 : sorted[middle]
}
