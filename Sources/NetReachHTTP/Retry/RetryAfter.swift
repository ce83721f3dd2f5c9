#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Reads `Retry-After` (RFC 9110 §10.2.3): delay-seconds, or an HTTP-date (§5.6.7) in any of its
/// three formats. Anything else is ignored, as if the header were absent; a date in the past means
/// no delay.
///
/// - delay-seconds: ASCII digits only (`120`); no sign, no fraction, no other digits. A number too
///   large for 64 bits is ignored.
/// - IMF-fixdate, what servers send: `Sun, 06 Nov 1994 08:49:37 GMT`.
/// - RFC 850, obsolete: `Sunday, 06-Nov-94 08:49:37 GMT`. Its two-digit year is the most recent
///   year with those digits that is not more than 50 years after `now` (§5.6.7).
/// - asctime, obsolete: `Sun Nov  6 08:49:37 1994` (a one-digit day after two spaces), in GMT.
///
/// RFC 9110 says a recipient MUST accept all three formats, so all three are read; each strictly,
/// byte by byte against its grammar: names and `GMT` are case-sensitive, fields are separated by
/// exactly one space (SP), every number has exactly its digits (so no `+1`), and the date must
/// exist (no 31 April, no 29 February outside leap years). Only optional whitespace around the whole
/// value (SP and HTAB, which HTTP field parsing strips) is allowed; any other whitespace, such as a
/// tab between fields, a no-break space or U+2003, makes the value unreadable.
///
/// The day name must be one of the seven but need not be the date's weekday: it says nothing the
/// date does not, RFC 9110 asks recipients to check nothing about it, and a server with a wrong
/// weekday still said when to come back (Go's `http.ParseTime` and Python's `email.utils` ignore
/// it too).
enum RetryAfter {
    /// The wait `value` asks for, counted from `now` (a date's is rounded up to the millisecond,
    /// and is zero once it has passed); `nil` when `value` is not readable.
    static func delay(from value: String, now: Date = Date()) -> Duration? {
        let text = trimmingOptionalWhitespace(value)
        if !text.isEmpty, text.allSatisfy(isDigit) {
            var seconds: Int64 = 0
            for byte in text {
                let (shifted, overflowTen) = seconds.multipliedReportingOverflow(by: 10)
                let (sum, overflowDigit) = shifted.addingReportingOverflow(Int64(byte - UInt8(ascii: "0")))
                if overflowTen || overflowDigit { return nil } // too many digits: absurd, ignore
                seconds = sum
            }
            return .seconds(seconds)
        }
        guard let date = httpDate(text, now: now) else { return nil }
        let milliseconds = max(0, (date.timeIntervalSince(now) * 1000).rounded(.up))
        return .milliseconds(Int64(milliseconds))
    }

    /// The value without the SP and HTAB around it, as bytes.
    private static func trimmingOptionalWhitespace(_ value: String) -> ArraySlice<UInt8> {
        var bytes = Array(value.utf8)[...]
        while let first = bytes.first, first == UInt8(ascii: " ") || first == UInt8(ascii: "\t") { bytes.removeFirst() }
        while let last = bytes.last, last == UInt8(ascii: " ") || last == UInt8(ascii: "\t") { bytes.removeLast() }
        return bytes
    }

    /// An HTTP-date in any of its three formats; `now` places an RFC 850 two-digit year.
    static func httpDate(_ text: String, now: Date) -> Date? {
        httpDate(Array(text.utf8)[...], now: now)
    }

    private static func httpDate(_ bytes: ArraySlice<UInt8>, now: Date) -> Date? {
        imfFixdate(bytes) ?? rfc850Date(bytes, now: now) ?? asctimeDate(bytes)
    }

    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    private static let days = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]
    private static let longDays = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]

    /// `day-name "," SP 2DIGIT SP month SP 4DIGIT SP 2DIGIT ":" 2DIGIT ":" 2DIGIT SP "GMT"`.
    private static func imfFixdate(_ bytes: ArraySlice<UInt8>) -> Date? {
        var reader = Reader(bytes)
        guard reader.name(days) != nil, reader.literal(", "), let day = reader.digits(2), reader.literal(" "),
            let month = reader.name(months), reader.literal(" "), let year = reader.digits(4), reader.literal(" "),
            let time = reader.timeOfDay(), reader.literal(" GMT"), reader.isAtEnd
        else { return nil }
        return Timestamp(year: year, month: month + 1, day: day, time: time)?.date
    }

    /// `day-name-l "," SP 2DIGIT "-" month "-" 2DIGIT SP 2DIGIT ":" 2DIGIT ":" 2DIGIT SP "GMT"`.
    private static func rfc850Date(_ bytes: ArraySlice<UInt8>, now: Date) -> Date? {
        var reader = Reader(bytes)
        guard reader.name(longDays) != nil, reader.literal(", "), let day = reader.digits(2), reader.literal("-"),
            let month = reader.name(months), reader.literal("-"), let twoDigitYear = reader.digits(2),
            reader.literal(" "),
            let time = reader.timeOfDay(), reader.literal(" GMT"), reader.isAtEnd
        else { return nil }
        // The latest year ending in those digits that is not more than 50 years after now (§5.6.7).
        let today = Timestamp(now)
        let limit = today.year + 50
        var year = limit - ((limit - twoDigitYear) % 100 + 100) % 100
        if year == limit,
            (month + 1, day, time.hour, time.minute, time.second)
                > (today.month, today.day, today.time.hour, today.time.minute, today.time.second)
        {
            year -= 100
        }
        return Timestamp(year: year, month: month + 1, day: day, time: time)?.date
    }

    /// `day-name SP month SP ( 2DIGIT / ( SP DIGIT ) ) SP 2DIGIT ":" 2DIGIT ":" 2DIGIT SP 4DIGIT`.
    private static func asctimeDate(_ bytes: ArraySlice<UInt8>) -> Date? {
        var reader = Reader(bytes)
        guard reader.name(days) != nil, reader.literal(" "), let month = reader.name(months), reader.literal(" ") else {
            return nil
        }
        let day = reader.literal(" ") ? reader.digits(1) : reader.digits(2)
        guard let day, reader.literal(" "), let time = reader.timeOfDay(), reader.literal(" "),
            let year = reader.digits(4),
            reader.isAtEnd
        else { return nil }
        return Timestamp(year: year, month: month + 1, day: day, time: time)?.date
    }

    /// Reads a date's bytes from the front, each step all or nothing.
    private struct Reader {
        private var bytes: ArraySlice<UInt8>

        init(_ bytes: ArraySlice<UInt8>) { self.bytes = bytes }

        var isAtEnd: Bool { bytes.isEmpty }

        /// Consumes `text` exactly (case-sensitive) if the bytes start with it.
        mutating func literal(_ text: String) -> Bool {
            guard bytes.starts(with: text.utf8) else { return false }
            bytes = bytes.dropFirst(text.utf8.count)
            return true
        }

        /// Exactly `count` ASCII digits, as a number.
        mutating func digits(_ count: Int) -> Int? {
            guard bytes.count >= count, bytes.prefix(count).allSatisfy(isDigit) else { return nil }
            let value = bytes.prefix(count).reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
            bytes = bytes.dropFirst(count)
            return value
        }

        /// The index of the name in `names` that the bytes start with.
        mutating func name(_ names: [String]) -> Int? {
            names.firstIndex { literal($0) }
        }

        /// `2DIGIT ":" 2DIGIT ":" 2DIGIT`, unchecked.
        mutating func timeOfDay() -> Timestamp.TimeOfDay? {
            guard let hour = digits(2), literal(":"), let minute = digits(2), literal(":"), let second = digits(2)
            else { return nil }
            return Timestamp.TimeOfDay(hour: hour, minute: minute, second: second)
        }
    }

    /// A proleptic Gregorian date and time in UTC, checked to exist.
    private struct Timestamp {
        /// Hour, minute and second as written.
        struct TimeOfDay {
            var hour: Int
            var minute: Int
            var second: Int
        }

        var year: Int
        var month: Int
        var day: Int
        var time: TimeOfDay

        /// `nil` unless the date exists: month 1...12, a day the month has, 00:00:00 to 23:59:60
        /// (a leap second, which reads as the next minute's first second).
        init?(year: Int, month: Int, day: Int, time: TimeOfDay) {
            guard (1...12).contains(month), (1...Self.daysIn(month: month, year: year)).contains(day),
                (0...23).contains(time.hour), (0...59).contains(time.minute), (0...60).contains(time.second)
            else { return nil }
            self.year = year
            self.month = month
            self.day = day
            self.time = time
        }

        /// The calendar date and time of `date`, in UTC.
        init(_ date: Date) {
            let seconds = Int(date.timeIntervalSince1970.rounded(.down))
            let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
            let secondOfDay = seconds - days * 86_400
            // Howard Hinnant's civil_from_days.
            let shifted = days + 719_468
            let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
            let dayOfEra = shifted - era * 146_097
            let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
            let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
            let marchMonth = (5 * dayOfYear + 2) / 153
            day = dayOfYear - (153 * marchMonth + 2) / 5 + 1
            month = marchMonth < 10 ? marchMonth + 3 : marchMonth - 9
            year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
            time = TimeOfDay(hour: secondOfDay / 3_600, minute: secondOfDay / 60 % 60, second: secondOfDay % 60)
        }

        var date: Date {
            // Howard Hinnant's days_from_civil.
            let marchYear = month <= 2 ? year - 1 : year
            let era = (marchYear >= 0 ? marchYear : marchYear - 399) / 400
            let yearOfEra = marchYear - era * 400
            let dayOfYear = (153 * ((month + 9) % 12) + 2) / 5 + day - 1
            let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
            let days = era * 146_097 + dayOfEra - 719_468
            let seconds = days * 86_400 + time.hour * 3_600 + time.minute * 60 + time.second
            return Date(timeIntervalSince1970: TimeInterval(seconds))
        }

        static func daysIn(month: Int, year: Int) -> Int {
            switch month {
            case 2: year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
            case 4, 6, 9, 11: 30
            default: 31
            }
        }
    }

    private static func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }
}
