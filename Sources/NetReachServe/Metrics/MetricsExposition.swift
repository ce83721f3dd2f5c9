import Prometheus

/// One series and its value: a line of `/metrics`.
package struct MetricSample: Sendable {
    package var name: String
    /// In the order written (fixed per family).
    package var labels: [(String, String)]
    package var value: Double

    package init(name: String, labels: [(String, String)] = [], value: Double) {
        self.name = name
        self.labels = labels
        self.value = value
    }
}

/// `GET /metrics` in Prometheus's text format, written at each scrape: the samples given (serve's
/// families, from its state), each family under its `# HELP` and `# TYPE` lines from
/// ``MetricFamilies`` in the table's order; then the registry's families (the library's
/// swift-metrics series and serve's probe histogram), by name; then the process's own series.
///
/// A family with no sample writes nothing, not even its `# TYPE`: a series whose labels no longer
/// describe anything simply is not given at the next scrape.
///
/// ```swift
/// var exposition = MetricsExposition()
/// exposition.add(MetricSample(name: "netreach_build_info", labels: [("version", "1.0")], value: 1))
/// let text = exposition.text(registry: registry, process: ProcessMetrics.read())
/// ```
package struct MetricsExposition: Sendable {
    /// The media type of the text format.
    package static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    private var families: [String: [MetricSample]] = [:]

    package init() {}

    /// Adds `sample` after the samples of its family given so far.
    package mutating func add(_ sample: MetricSample) {
        families[sample.name, default: []].append(sample)
    }

    /// Adds every one of `samples`, in order.
    package mutating func add(contentsOf samples: some Sequence<MetricSample>) {
        for sample in samples { add(sample) }
    }

    /// The text: the samples added, then `registry`'s families, then `process` (already text).
    package func text(registry: PrometheusCollectorRegistry? = nil, process: String = "") -> String {
        var output = ""
        output.reserveCapacity(families.count * 512 + process.utf8.count)
        let names = families.keys.sorted(by: Self.inExpositionOrder)
        for name in names {
            guard let samples = families[name], !samples.isEmpty else { continue }
            let family = MetricFamilies.family(named: name)
            let type = family?.type ?? .gauge
            if let help = family?.help, !help.isEmpty { output += "# HELP \(name) \(Self.escapedHelp(help))\n" }
            output += "# TYPE \(name) \(type.rawValue)\n"
            for sample in samples { Self.write(sample, as: type, into: &output) }
        }
        if let registry { output += Self.ordered(registry.emitToBuffer()) }
        return output + process
    }

    /// Table order first, then by name.
    private static func inExpositionOrder(_ a: String, _ b: String) -> Bool {
        let (left, right) = (MetricFamilies.position[a] ?? .max, MetricFamilies.position[b] ?? .max)
        return left != right ? left < right : a < b
    }

    private static func write(_ sample: MetricSample, as type: MetricFamilies.MetricType, into output: inout String) {
        output += sample.name
        if !sample.labels.isEmpty {
            output += "{"
            for (index, (label, value)) in sample.labels.enumerated() {
                if index > 0 { output += "," }
                output += label
                output += "=\""
                output += escapedLabelValue(value)
                output += "\""
            }
            output += "}"
        }
        output += " "
        // As swift-prometheus writes them, so the lines read as they always did: a counter's value
        // as an integer, a gauge's as Swift prints a Double (`1.0`).
        if type == .counter, sample.value == sample.value.rounded(), abs(sample.value) < 1e18 {
            output += String(Int64(sample.value))
        } else {
            output += "\(sample.value)"
        }
        output += "\n"
    }

    /// A label value as the text format escapes it: backslash, double quote and line feed.
    package static func escapedLabelValue(_ value: String) -> String {
        guard value.utf8.contains(where: { $0 == UInt8(ascii: "\\") || $0 == UInt8(ascii: "\"") || $0 == 10 }) else {
            return value
        }
        var escaped = ""
        for character in value.unicodeScalars {
            switch character {
            case "\\": escaped += "\\\\"
            case "\"": escaped += "\\\""
            case "\n": escaped += "\\n"
            default: escaped.unicodeScalars.append(character)
            }
        }
        return escaped
    }

    private static func escapedHelp(_ help: String) -> String {
        help.contains("\\") || help.contains("\n")
            ? help.replacing("\\", with: "\\\\").replacing("\n", with: "\\n") : help
    }

    /// The registry's families in exposition order: it writes them in its dictionary's order,
    /// which differs from process to process. Each family is a block of lines beginning with its
    /// `# HELP` or `# TYPE` line; only those lines are looked at (bytes, not characters).
    private static func ordered(_ bytes: [UInt8]) -> String {
        let hash = UInt8(ascii: "#")
        let newline = UInt8(ascii: "\n")
        let space = UInt8(ascii: " ")
        var blocks: [(name: String, range: Range<Int>)] = []
        var current: ArraySlice<UInt8> = []
        var start = 0
        var line = 0
        while line < bytes.count {
            var end = line
            while end < bytes.count, bytes[end] != newline { end += 1 }
            // "# HELP name ..." or "# TYPE name ...": the name from the eighth byte.
            if bytes[line] == hash, end - line > 7 {
                var nameEnd = line + 7
                while nameEnd < end, bytes[nameEnd] != space { nameEnd += 1 }
                let name = bytes[(line + 7)..<nameEnd]
                if name != current {
                    if !current.isEmpty { blocks.append((String(decoding: current, as: UTF8.self), start..<line)) }
                    current = name
                    start = line
                }
            }
            line = end + 1
        }
        if !current.isEmpty { blocks.append((String(decoding: current, as: UTF8.self), start..<bytes.count)) }
        blocks.sort { inExpositionOrder($0.name, $1.name) }
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count + 1)
        for block in blocks {
            output += bytes[block.range]
            if output.last != newline { output.append(newline) }
        }
        return String(decoding: output, as: UTF8.self)
    }
}
