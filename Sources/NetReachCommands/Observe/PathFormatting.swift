import Foundation
import NetReach
import NetReachConnectivity

/// How `status`, `watch` and `wait` print a ``NetworkPath``, in one place so they always agree.
///
/// The human forms are meant to be grepped and cut, so they are stable: words in a fixed order,
/// no colour, no localisation, timestamps in UTC.
package enum PathFormatting {
    /// One line: `satisfied eth0(wiredEthernet) ipv4 ipv6 dns gw 192.0.2.1` or
    /// `unsatisfied (no default route)`. Interfaces and gateways are comma-separated, preferred
    /// first; `expensive` and `constrained` appear only when true.
    static func line(_ path: NetworkPath) -> String {
        guard path.status == .satisfied else {
            return "\(path.status) (\(path.unsatisfiedReason?.description ?? "unknown"))"
        }
        var words = ["satisfied"]
        if !path.availableInterfaces.isEmpty {
            words.append(path.availableInterfaces.map(\.description).joined(separator: ","))
        }
        words += flagWords(path)
        if !path.gateways.isEmpty {
            words += ["gw", path.gateways.map(\.description).joined(separator: ",")]
        }
        if path.isMultipath { words.append("multipath") }
        return words.joined(separator: " ")
    }

    /// ``line(_:)`` prefixed with an ISO-8601 UTC timestamp with milliseconds:
    /// `2026-11-22T19:40:01.123Z satisfied eth0(wiredEthernet) ipv4 dns gw 192.0.2.1`.
    static func timestampedLine(_ path: NetworkPath, at date: Date) -> String {
        "\(timestamp(date)) \(line(path))"
    }

    /// The path's line, then the connectivity verdict (`watch --internet`, `wait --internet`):
    /// `satisfied eth0(wiredEthernet) ipv4 gw 192.0.2.1; internet full (ipv4 full, ipv6 local)`.
    static func line(_ verdict: Connectivity) -> String {
        "\(line(verdict.path)); internet \(ConnectivityReport.summary(verdict))"
    }

    /// ``line(_:)-(Connectivity)`` prefixed with a timestamp, as ``timestampedLine(_:at:)-(NetworkPath,_)``.
    static func timestampedLine(_ verdict: Connectivity, at date: Date) -> String {
        "\(timestamp(date)) \(line(verdict))"
    }

    /// `key: value` lines for `status`, one property per line, every key always present
    /// (`none`, `yes`/`no`), so `awk '/^dns:/ {print $2}'` works whatever the state.
    static func block(_ path: NetworkPath) -> String {
        let interfaces = path.availableInterfaces.map(\.description).joined(separator: " ")
        let gateways = path.gateways.map(\.description).joined(separator: " ")
        let rows: [(String, String)] = [
            ("status", path.status.description),
            ("reason", path.unsatisfiedReason?.description ?? "none"),
            ("interfaces", interfaces.isEmpty ? "none" : interfaces),
            ("ipv4", yesNo(path.supportsIPv4)),
            ("ipv6", yesNo(path.supportsIPv6)),
            ("dns", yesNo(path.supportsDNS)),
            ("expensive", yesNo(path.isExpensive)),
            ("constrained", yesNo(path.isConstrained)),
            ("multipath", yesNo(path.isMultipath)),
            ("gateways", gateways.isEmpty ? "none" : gateways),
        ]
        let width = rows.map(\.0.count).max()! + 1
        return rows.map { key, value in
            (key + ":").padding(toLength: width, withPad: " ", startingAt: 0) + " " + value
        }.joined(separator: "\n")
    }

    /// One JSON object on one line: the path's own `Codable` form, keys sorted, plus `version`
    /// (netreach's) and `timestamp` (ISO-8601 UTC with milliseconds) when `date` is given. Every key is present;
    /// `unsatisfiedReason` is `null` when the path is satisfied. `Docs/netreach-json.schema.json`
    /// describes the object (and `CLIJSONSchemaTests` holds this output to it).
    ///
    /// Written by hand, byte for byte what `JSONEncoder` (sorted keys, slashes unescaped) makes of
    /// ``TimestampedPath`` (`PathJSONTests` compares the two): every `watch --json` line and `serve`
    /// event is one of these, and the encoder's generic machinery was a fifth of `watch --json`'s
    /// CPU time per change (perf; Benchmarks/RESULTS.md, section 19).
    static func json(_ path: NetworkPath, at date: Date? = nil) -> String {
        var text = JSONBytes(capacity: 384)
        json(path, at: date, into: &text)
        return text.text
    }

    /// ``json(_:at:)-(NetworkPath,_)`` appended to `text`: `watch --json` writes these bytes as
    /// they are, with no string made of them.
    static func json(_ path: NetworkPath, at date: Date? = nil, into text: inout JSONBytes) {
        text.append("{\"availableInterfaces\":[")
        for (position, interface) in path.availableInterfaces.enumerated() {
            if position > 0 { text.append(",") }
            text.append("{\"index\":")
            text.append(interface.index)
            text.append(",\"name\":")
            text.appendString(interface.name)
            text.append(",\"type\":")
            text.appendQuoted(verbatim: interface.type.rawValue)
            text.append("}")
        }
        text.append("],\"gateways\":[")
        for (position, gateway) in path.gateways.enumerated() {
            if position > 0 { text.append(",") }
            text.appendQuoted(gateway)
        }
        text.append("],\"isConstrained\":")
        text.append(path.isConstrained)
        text.append(",\"isExpensive\":")
        text.append(path.isExpensive)
        text.append(",\"isMultipath\":")
        text.append(path.isMultipath)
        text.append(",\"status\":")
        text.appendQuoted(verbatim: path.status.rawValue)
        text.append(",\"supportsDNS\":")
        text.append(path.supportsDNS)
        text.append(",\"supportsIPv4\":")
        text.append(path.supportsIPv4)
        text.append(",\"supportsIPv6\":")
        text.append(path.supportsIPv6)
        if let date {
            text.append(",\"timestamp\":\"")
            appendTimestamp(date, to: &text)
            text.append("\"")
        }
        text.append(",\"unsatisfiedReason\":")
        if let reason = path.unsatisfiedReason {
            text.appendQuoted(verbatim: reason.rawValue)
        } else {
            text.append("null")
        }
        text.append(",\"version\":")
        text.appendString(NetreachCommand.version)
        text.append("}")
    }

    /// `JSONEncoder`'s form of the same object (the reference `json(_:at:)` is held to).
    static func encodedJSON(_ path: NetworkPath, at date: Date? = nil) -> String {
        encode(TimestampedPath(path: path, timestamp: date.map(timestamp)))
    }

    /// ``json(_:at:)-(NetworkPath,_)`` for the verdict's path, with a `connectivity` key: the
    /// verdict and its evidence (`check --json`, `watch --internet --json`).
    package static func json(_ verdict: Connectivity, at date: Date) -> String {
        encode(
            TimestampedPath(
                path: verdict.path, timestamp: timestamp(date),
                connectivity: ConnectivityReport.Report(verdict)))
    }

    private static func encode(_ value: TimestampedPath) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        do {
            let data = try encoder.encode(value)
            return String(decoding: data, as: UTF8.self)
        } catch {
            // Only strings, finite numbers (latencies are measured durations) and booleans: encoding cannot fail.
            preconditionFailure("cannot encode a NetworkPath as JSON: \(error)")
        }
    }

    /// `2026-11-22T19:40:01.123Z`. Formatted by arithmetic rather than a Foundation format style,
    /// which brings in ICU: a long-running `watch` stays several megabytes smaller.
    static func timestamp(_ date: Date) -> String {
        var text = JSONBytes(capacity: 24)
        appendTimestamp(date, to: &text)
        return text.text
    }

    private static func appendTimestamp(_ date: Date, to text: inout JSONBytes) {
        // Nearest millisecond: truncating would turn float noise (-0.001 s is -1.0000000000000009 ms)
        // into a wrong last digit.
        let milliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded())
        let seconds = milliseconds.quotient(dividingBy: 1000)
        let day = UTCDay(daysSince1970: seconds.quotient(dividingBy: 86_400))
        let secondOfDay = Int(seconds.remainder(dividingBy: 86_400))
        text.append(day.year, width: 4)
        text.append("-")
        text.append(day.month, width: 2)
        text.append("-")
        text.append(day.day, width: 2)
        text.append("T")
        text.append(secondOfDay / 3600, width: 2)
        text.append(":")
        text.append(secondOfDay / 60 % 60, width: 2)
        text.append(":")
        text.append(secondOfDay % 60, width: 2)
        text.append(".")
        text.append(Int(milliseconds.remainder(dividingBy: 1000)), width: 3)
        text.append("Z")
    }

    /// A day of the proleptic Gregorian calendar from its number since 1970-01-01, by arithmetic
    /// (Howard Hinnant's `civil_from_days`), as `gmtime_r` gives it without its call and locking on
    /// every line; `PathJSONTests` holds the two to each other.
    struct UTCDay: Equatable {
        var year: Int
        var month: Int
        var day: Int

        init(year: Int, month: Int, day: Int) {
            self.year = year
            self.month = month
            self.day = day
        }

        init(daysSince1970 days: Int64) {
            let shifted = days + 719_468 // days since 0000-03-01
            let era = shifted.quotient(dividingBy: 146_097)
            let dayOfEra = shifted - era * 146_097 // 0...146_096
            let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
            let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100) // from March 1
            let monthFromMarch = (5 * dayOfYear + 2) / 153
            day = Int(dayOfYear - (153 * monthFromMarch + 2) / 5 + 1)
            month = Int(monthFromMarch < 10 ? monthFromMarch + 3 : monthFromMarch - 9)
            year = Int(yearOfEra + era * 400) + (month <= 2 ? 1 : 0)
        }
    }

    /// The words for the path's true flags, in the order they are printed.
    static func flagWords(_ path: NetworkPath) -> [String] {
        [
            ("ipv4", path.supportsIPv4), ("ipv6", path.supportsIPv6), ("dns", path.supportsDNS),
            ("expensive", path.isExpensive), ("constrained", path.isConstrained),
        ]
        .filter(\.1).map(\.0)
    }

    private static func yesNo(_ value: Bool) -> String { value ? "yes" : "no" }
}

/// A path's JSON with `timestamp` and `version` (netreach's) beside its own keys (flat, so
/// `jq .status` works on both `status --json` and `watch --json` lines).
private struct TimestampedPath: Encodable {
    var path: NetworkPath
    var timestamp: String?
    var connectivity: ConnectivityReport.Report?

    private enum CodingKeys: String, CodingKey { case timestamp, connectivity, version }

    func encode(to encoder: any Encoder) throws {
        try path.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(NetreachCommand.version, forKey: .version)
        try container.encodeIfPresent(timestamp, forKey: .timestamp)
        try container.encodeIfPresent(connectivity, forKey: .connectivity)
    }
}

extension Int64 {
    /// Floor division and a non-negative remainder, so dates before 1970 format correctly too.
    fileprivate func quotient(dividingBy divisor: Int64) -> Int64 { (self - remainder(dividingBy: divisor)) / divisor }
    fileprivate func remainder(dividingBy divisor: Int64) -> Int64 { ((self % divisor) + divisor) % divisor }
}
