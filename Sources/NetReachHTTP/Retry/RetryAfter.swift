import Foundation

/// Reads `Retry-After` (RFC 9110 §10.2.3): delay-seconds, or an IMF-fixdate such as
/// `Sun, 06 Nov 1994 08:49:37 GMT`. Anything else (negative numbers, other date forms, garbage) is
/// ignored, as if the header were absent; a date in the past means no delay.
enum RetryAfter {
    static func delay(from value: String, now: Date = Date()) -> Duration? {
        let text = value.trimmingCharacters(in: .whitespaces)
        if !text.isEmpty, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) {
            guard let seconds = Int64(text) else { return nil }   // too many digits: absurd, ignore
            return .seconds(seconds)
        }
        guard let date = imfFixdate(text) else { return nil }
        let milliseconds = max(0, (date.timeIntervalSince(now) * 1000).rounded(.up))
        return .milliseconds(Int64(milliseconds))
    }

    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    private static let days = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]

    /// `Sun, 06 Nov 1994 08:49:37 GMT`, parsed by hand (no ICU, no locale).
    static func imfFixdate(_ text: String) -> Date? {
        let parts = text.split(separator: " ")
        guard parts.count == 6, parts[0].count == 4, parts[0].hasSuffix(","), days.contains(String(parts[0].dropLast())),
              parts[5] == "GMT", parts[1].count == 2, let day = Int(parts[1]),
              let month = months.firstIndex(of: String(parts[2])), parts[3].count == 4, let year = Int(parts[3]) else { return nil }
        let clock = parts[4].split(separator: ":")
        guard clock.count == 3, clock.allSatisfy({ $0.count == 2 }), let hour = Int(clock[0]), let minute = Int(clock[1]),
              let second = Int(clock[2]), (1...31).contains(day), hour < 24, minute < 60, second < 61 else { return nil }
        var fields = tm()
        fields.tm_year = Int32(year - 1900)
        fields.tm_mon = Int32(month)
        fields.tm_mday = Int32(day)
        fields.tm_hour = Int32(hour)
        fields.tm_min = Int32(minute)
        fields.tm_sec = Int32(second)
        return Date(timeIntervalSince1970: TimeInterval(timegm(&fields)))
    }
}
