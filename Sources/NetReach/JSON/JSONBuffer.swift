#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The buffer of NetReach's JSON writer (``PathJSON``): one line of JSON built as UTF-8 bytes,
/// literals copied, numbers written digit by digit, strings escaped exactly as Foundation's
/// `JSONEncoder` escapes them (with `.withoutEscapingSlashes`: `"` and `\`, the control characters
/// `\b \f \n \r \t` by name and the others as `\u00XX`, everything else as it is), and the text
/// made once at the end.
///
/// A buffer of its own rather than `String` appends (~21,000 instructions a `watch --json` line)
/// or an array of bytes (~6,800, most of them the array's checks on each append): ~4,300, the
/// timestamp and the final string included (callgrind).
///
/// ```swift
/// var line = JSONBuffer(capacity: 64)
/// line.append("{\"name\":")
/// line.appendString("eth0")
/// line.append("}")
/// line.text   // {"name":"eth0"}
/// ```
package struct JSONBuffer: ~Copyable {
    private var start: UnsafeMutablePointer<UInt8>
    private var count = 0
    private var capacity: Int

    /// An empty buffer with room for `capacity` bytes (it grows as needed).
    package init(capacity: Int) {
        self.capacity = max(capacity, 16)
        start = .allocate(capacity: self.capacity)
    }

    deinit { start.deallocate() }

    /// The bytes as text.
    package var text: String { String(decoding: UnsafeBufferPointer(start: start, count: count), as: UTF8.self) }

    /// Runs `body` on the bytes written so far, which are valid only during the call: to write
    /// them out with no string made of them first.
    package func withBytes<Result, Failure: Error>(
        _ body: (UnsafeRawBufferPointer) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        try body(UnsafeRawBufferPointer(start: start, count: count))
    }

    /// Makes room for `extra` more bytes.
    private mutating func reserve(_ extra: Int) {
        guard count + extra > capacity else { return }
        let grown = max(capacity * 2, count + extra)
        let moved = UnsafeMutablePointer<UInt8>.allocate(capacity: grown)
        moved.initialize(from: start, count: count)
        start.deallocate()
        start = moved
        capacity = grown
    }

    /// Appends one byte.
    package mutating func append(byte: UInt8) {
        reserve(1)
        start[count] = byte
        count += 1
    }

    /// Appends `literal` as it is (JSON punctuation and keys).
    package mutating func append(_ literal: StaticString) {
        literal.withUTF8Buffer { append(bytes: $0) }
    }

    private mutating func append(bytes: UnsafeBufferPointer<UInt8>) {
        guard let source = bytes.baseAddress else { return }
        reserve(bytes.count)
        (start + count).initialize(from: source, count: bytes.count)
        count += bytes.count
    }

    /// Appends `text` in quotes, unescaped: for text that cannot need escapes (a raw value of ours,
    /// an address).
    package mutating func appendQuoted(verbatim text: String) {
        append(byte: UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { append(bytes: $0) }
        append(byte: UInt8(ascii: "\""))
    }

    /// Appends `address`'s text (``IPAddress/description``) in quotes, written in place.
    package mutating func appendQuoted(_ address: IPAddress) {
        reserve(IPAddress.maximumTextLength + 2)
        start[count] = UInt8(ascii: "\"")
        let length = address.writeText(
            into: UnsafeMutableBufferPointer(start: start + count + 1, count: IPAddress.maximumTextLength))
        start[count + 1 + length] = UInt8(ascii: "\"")
        count += length + 2
    }

    /// Appends `value` as `JSONEncoder` writes a `Double`: Swift's shortest form that reads back
    /// the same, without a `.0` for a whole number (`12`, `0.5`, `1e-05`). Only finite values
    /// (a measured latency): JSON has no NaN nor infinity.
    package mutating func append(_ value: Double) {
        precondition(value.isFinite, "JSON cannot carry \(value)")
        var text = value.description
        if text.hasSuffix(".0") { text.removeLast(2) }
        text.withUTF8 { append(bytes: $0) }
    }

    /// Appends `date` as `2026-11-22T19:40:01.123Z`: ISO 8601 in UTC with milliseconds, by
    /// arithmetic (``UTCDay``) rather than a Foundation format style, which brings in ICU, or
    /// `gmtime_r`'s call and locking on every line.
    package mutating func appendTimestamp(_ date: Date) {
        // Nearest millisecond: truncating would turn float noise (-0.001 s is -1.0000000000000009 ms)
        // into a wrong last digit.
        let milliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded())
        let seconds = milliseconds.quotient(dividingBy: 1000)
        let day = UTCDay(daysSince1970: seconds.quotient(dividingBy: 86_400))
        let secondOfDay = Int(seconds.remainder(dividingBy: 86_400))
        append(day.year, width: 4)
        append("-")
        append(day.month, width: 2)
        append("-")
        append(day.day, width: 2)
        append("T")
        append(secondOfDay / 3600, width: 2)
        append(":")
        append(secondOfDay / 60 % 60, width: 2)
        append(":")
        append(secondOfDay % 60, width: 2)
        append(".")
        append(Int(milliseconds.remainder(dividingBy: 1000)), width: 3)
        append("Z")
    }

    /// Appends `true` or `false`.
    package mutating func append(_ value: Bool) { value ? append("true") : append("false") }

    /// Appends `value` in decimal.
    package mutating func append(_ value: Int) { append(value, width: 1) }

    /// Appends `value` in decimal, with leading zeros to at least `width` digits (a `-` first for
    /// a negative value, not counted).
    package mutating func append(_ value: Int, width: Int) {
        if value < 0 { append(byte: UInt8(ascii: "-")) }
        let magnitude = value.magnitude
        var power: UInt = 1
        var digits = 1
        while power <= magnitude / 10 {
            power *= 10
            digits += 1
        }
        for _ in digits..<max(digits, width) { append(byte: UInt8(ascii: "0")) }
        var rest = magnitude
        while power > 0 {
            append(byte: UInt8(ascii: "0") + UInt8(rest / power))
            rest %= power
            power /= 10
        }
    }

    /// Appends `value` as a JSON string literal, quotes included.
    package mutating func appendString(_ value: String) {
        append(byte: UInt8(ascii: "\""))
        var value = value
        value.withUTF8 { utf8 in
            guard utf8.contains(where: Self.needsEscape) else {
                append(bytes: utf8)
                return
            }
            // Every byte to escape is ASCII; the bytes of other characters are all 0x80 or more.
            for byte in utf8 {
                guard Self.needsEscape(byte) else {
                    append(byte: byte)
                    continue
                }
                switch byte {
                case UInt8(ascii: "\""): append("\\\"")
                case UInt8(ascii: "\\"): append("\\\\")
                case UInt8(ascii: "\n"): append("\\n")
                case UInt8(ascii: "\r"): append("\\r")
                case UInt8(ascii: "\t"): append("\\t")
                case 0x08: append("\\b")
                case 0x0C: append("\\f")
                default:
                    append("\\u00")
                    append(byte: Self.hexDigit(byte >> 4))
                    append(byte: Self.hexDigit(byte & 0xF))
                }
            }
        }
        append(byte: UInt8(ascii: "\""))
    }

    private static func needsEscape(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
    }

    /// Lowercase, as `JSONEncoder` writes `\u001f`.
    private static func hexDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10
    }
}

/// A day of the proleptic Gregorian calendar from its number since 1970-01-01, by arithmetic
/// (Howard Hinnant's `civil_from_days`), as `gmtime_r` gives it; `JSONParityTests` holds the two
/// to each other.
package struct UTCDay: Equatable {
    package var year: Int
    package var month: Int
    package var day: Int

    package init(year: Int, month: Int, day: Int) {
        self.year = year
        self.month = month
        self.day = day
    }

    package init(daysSince1970 days: Int64) {
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

extension Int64 {
    /// Floor division and a non-negative remainder, so dates before 1970 format correctly too.
    fileprivate func quotient(dividingBy divisor: Int64) -> Int64 { (self - remainder(dividingBy: divisor)) / divisor }
    fileprivate func remainder(dividingBy divisor: Int64) -> Int64 { ((self % divisor) + divisor) % divisor }
}
