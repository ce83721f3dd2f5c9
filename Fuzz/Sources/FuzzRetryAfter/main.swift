import CFuzzSupport
import Foundation
import FuzzSupport
import HTTPTypes

@testable import NetReachHTTP

// One input is the text of a response's `Retry-After`, one field line per input line. It is read as
// `NetworkService` reads it (the fields combined by HTTPFields, then `RetryAfter.delay(from:)`), and
// as the raw text, at a few fixed "now"s (so an RFC 850 two-digit year lands in different
// centuries), and the delay goes to `DefaultRetryPolicy` as a 503's would.
//
// An HTTP-date is also read by glibc's strptime(3) and timegm(3), which share no code with
// `RetryAfter`'s calendar arithmetic: where both read a date, they must agree.

/// 1994-11-06 08:49:37 (RFC 9110's example), 2025-11-24 16:00:00, 2049-12-31 23:59:59.
private let nows = [784_111_777, 1_764_000_000, 2_524_607_999].map { Date(timeIntervalSince1970: $0) }

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRetryAfter(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    var fields = HTTPFields()
    for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
        fields.append(HTTPField(name: .retryAfter, value: String(line)))
    }
    let combined = fields[.retryAfter]
    let trimmed = String(trimmingOptionalWhitespace(text))

    for now in nows {
        let fromFields = combined.flatMap { RetryAfter.delay(from: $0, now: now) }
        let raw = RetryAfter.delay(from: text, now: now)
        for delay in [fromFields, raw] {
            guard let delay else { continue }
            expect(delay >= .zero, "Retry-After \(text.debugDescription) at \(now) gives \(delay)")
        }
        // Optional whitespace around the value is no part of it (RFC 9110 §5.5).
        let padded = RetryAfter.delay(from: " \t" + text + "\t ", now: now)
        expect(
            padded == raw,
            "padding changes \(text.debugDescription) from \(String(describing: raw)) to \(String(describing: padded))")
        checkPolicy(retryAfter: fromFields, text: text)
        if let date = RetryAfter.httpDate(trimmed, now: now) {
            checkDate(date, read: trimmed, now: now, againstGlibc: now == nows[0] || trimmed.contains("-"))
        }
    }
    return 0
}

/// A 503's `Retry-After` through the default policy: retried after exactly that delay, within the
/// maximum, or given up; never a negative wait.
private func checkPolicy(retryAfter: Duration?, text: String) {
    var policy = DefaultRetryPolicy()
    policy.jitter = .none
    policy.deadline = .seconds(20)
    let attempt = RetryAttempt(
        method: .get, number: 1, failure: .status(503, retryAfter: retryAfter), elapsed: .seconds(1))
    guard case .retry(let after) = policy.decision(for: attempt) else { return }
    expect(
        after >= .zero && after <= policy.maximumDelay && .seconds(1) + after <= policy.deadline!,
        "Retry-After \(text.debugDescription): the policy waits \(after)")
    if let retryAfter { expect(after == retryAfter, "Retry-After \(retryAfter), the policy waits \(after)") }
}

/// The `date` read from `trimmed` at `now`: a whole second, then (`againstGlibc`: once per input,
/// and at every `now` for an RFC 850 date, the only format `now` changes) against itself and glibc.
private func checkDate(_ date: Date, read trimmed: String, now: Date, againstGlibc: Bool) {
    let seconds = date.timeIntervalSince1970
    expect(seconds == seconds.rounded(.down), "\(trimmed.debugDescription) has a fraction of a second: \(seconds)")

    guard againstGlibc else { return }
    // Written as an IMF-fixdate (with its true weekday) and read back, it is the same instant:
    // `Timestamp`'s date-from-fields and its fields-from-date must be inverses. (Except from
    // 10000-01-01 on, which only `… 9999 23:59:60 GMT` reaches and no 4DIGIT year can write: found
    // by the first long run, Fuzz/Corpus/FuzzRetryAfter/regression-leap-second-into-10000.)
    let written = imfFixdate(Int(seconds))
    let reread = RetryAfter.httpDate(written, now: now)
    expect(
        reread == date || seconds >= 253_402_300_800,
        "\(trimmed.debugDescription) is \(date), written \(written), read back \(String(describing: reread))")

    // glibc's reading. It is laxer (any case, one-digit days, its own two-digit years), so only a
    // text both read is compared; RetryAfter reads strictly, so glibc reads everything it reads.
    if let fields = strptime(trimmed, "%a, %d %b %Y %H:%M:%S GMT") ?? strptime(trimmed, "%a %b %e %H:%M:%S %Y") {
        var copy = fields
        let glibc = timegm(&copy)
        expect(
            Double(glibc) == seconds, "\(trimmed.debugDescription): RetryAfter reads \(Int(seconds)), glibc \(glibc)")
    } else if let fields = strptime(trimmed, "%A, %d-%b-%y %H:%M:%S GMT") {
        // RFC 850: glibc places the two-digit year by POSIX's rule (69-99 in the 1900s), RFC 9110
        // within fifty years of now. Same digits, same day, and at most fifty years after now.
        var broken = tm()
        var time = time_t(seconds)
        gmtime_r(&time, &broken)
        // (A leap second, :60, reads as the next minute's first, which may be the next year's.)
        expect(
            fields.tm_sec == 60
                || ((broken.tm_year - fields.tm_year) % 100 == 0 && broken.tm_mon == fields.tm_mon
                    && broken.tm_mday == fields.tm_mday),
            "\(trimmed.debugDescription): RetryAfter reads \(date), glibc year \(1900 + fields.tm_year)")
        var limit = tm()
        var nowTime = time_t(now.timeIntervalSince1970)
        gmtime_r(&nowTime, &limit)
        limit.tm_year += 50
        let latest = Double(timegm(&limit))
        expect(seconds <= latest, "\(trimmed.debugDescription) at \(now) is more than 50 years ahead: \(date)")
        limit.tm_year -= 100
        let earliest = Double(timegm(&limit))
        expect(seconds > earliest, "\(trimmed.debugDescription) at \(now) is 50 years or more behind: \(date)")
    } else {
        expect(false, "\(trimmed.debugDescription) reads as \(date), but glibc reads no HTTP-date in it")
    }
}

/// `text` without the SP and HTAB around it.
private func trimmingOptionalWhitespace(_ text: String) -> Substring {
    let isWhitespace = { (byte: UInt8) in byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
    var bytes = text.utf8[...]
    while let first = bytes.first, isWhitespace(first) { bytes = bytes.dropFirst() }
    while let last = bytes.last, isWhitespace(last) { bytes = bytes.dropLast() }
    return Substring(bytes)
}

/// glibc's strptime(3) of the whole of `text`; `nil` unless it reads all of it.
private func strptime(_ text: String, _ format: String) -> tm? {
    var fields = tm()
    let readAll: Bool? = text.withCString { start in
        guard let end = cfuzz_strptime(start, format, &fields) else { return nil }
        return end.pointee == 0
    }
    return readAll == true ? fields : nil
}

/// `seconds` since the epoch as an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), from glibc's
/// gmtime_r(3).
private func imfFixdate(_ seconds: Int) -> String {
    var time = time_t(seconds)
    var fields = tm()
    gmtime_r(&time, &fields)
    let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
    func padded(_ value: Int32, _ width: Int) -> String {
        let digits = String(value)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }
    return "\(days[Int(fields.tm_wday)]), \(padded(fields.tm_mday, 2)) \(months[Int(fields.tm_mon)]) "
        + "\(padded(fields.tm_year + 1900, 4)) \(padded(fields.tm_hour, 2)):\(padded(fields.tm_min, 2)):"
        + "\(padded(fields.tm_sec, 2)) GMT"
}
