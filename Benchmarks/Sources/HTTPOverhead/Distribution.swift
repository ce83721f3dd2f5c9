/// Per-request latencies, in µs (nearest rank).
struct Distribution: Codable {
    var count: Int
    var p50: Double
    var p90: Double
    var p99: Double
    var max: Double
    var mean: Double

    init(_ samplesNS: [Int64]) {
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
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return .nan }
    let middle = sorted.count / 2
    return sorted.count.isMultiple(of: 2) ? (sorted[middle - 1] + sorted[middle]) / 2 : sorted[middle]
}
