import Foundation
import Testing

@testable import NetReachHTTP

/// `Retry-After` as tables: delay-seconds and the three HTTP-date formats of RFC 9110 §5.6.7, read
/// strictly; the expected dates come from Foundation's Gregorian calendar, not from the parser.
@Suite("Retry-After")
struct RetryAfterTests {
    static let now = Date(timeIntervalSince1970: 784_111_777) // Sun, 06 Nov 1994 08:49:37 GMT

    static let utc: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar
    }()

    /// The instant `year-month-day hour:minute:second` UTC, by Foundation's calendar; a second of 60
    /// is the next minute's first.
    static func instant(_ year: Int, _ month: Int, _ day: Int, _ hour: Int, _ minute: Int, _ second: Int) -> Date {
        let components = DateComponents(
            year: year, month: month, day: day, hour: hour, minute: minute, second: min(second, 59))
        return utc.date(from: components)!.addingTimeInterval(second == 60 ? 1 : 0)
    }

    /// One readable HTTP-date and the instant it names.
    struct DateRow: Sendable, CustomTestStringConvertible {
        var value: String
        var year, month, day, hour, minute, second: Int
        var testDescription: String { value.debugDescription }

        init(_ value: String, _ year: Int, _ month: Int, _ day: Int, _ hour: Int, _ minute: Int, _ second: Int) {
            self.value = value
            (self.year, self.month, self.day, self.hour, self.minute, self.second) = (
                year, month, day, hour, minute, second
            )
        }

        var instant: Date { RetryAfterTests.instant(year, month, day, hour, minute, second) }
    }

    // MARK: - delay-seconds

    @Test(arguments: [
        ("120", Int64(120)), ("0", 0), (" 0 ", 0), ("\t5\t", 5), ("007", 7), (" \t 42 \t", 42),
        ("9223372036854775807", Int64.max),
    ])
    func readsDelaySeconds(_ value: String, _ seconds: Int64) {
        #expect(RetryAfter.delay(from: value, now: Self.now) == .seconds(seconds))
    }

    @Test(arguments: [
        "", " ", "\t", "-5", "+5", "1.5", "1e3", "5s", "0x10", "1 2", "1,2", "soon", "9223372036854775808",
        "99999999999999999999999", "１２", "٣", "\u{A0}5", "5\u{A0}", "\u{2003}120", "120\u{2003}", "\u{0B}5",
        "5\u{0C}", "\r\n5", "5\r\n", "\u{0}5", "5\u{0}",
    ])
    func ignoresDelaySecondsThatAreNotJustDigits(_ value: String) {
        #expect(RetryAfter.delay(from: value, now: Self.now) == nil)
    }

    // MARK: - HTTP-date

    static let validDates: [DateRow] = [
        // IMF-fixdate.
        DateRow("Sun, 06 Nov 1994 08:49:37 GMT", 1994, 11, 6, 8, 49, 37),
        DateRow("Thu, 01 Jan 1970 00:00:00 GMT", 1970, 1, 1, 0, 0, 0),
        DateRow("Tue, 29 Feb 2000 12:00:00 GMT", 2000, 2, 29, 12, 0, 0),
        DateRow("Thu, 29 Feb 1996 23:59:59 GMT", 1996, 2, 29, 23, 59, 59),
        DateRow("Tue, 29 Feb 1600 00:00:01 GMT", 1600, 2, 29, 0, 0, 1),
        DateRow("Sat, 31 Dec 1994 23:59:59 GMT", 1994, 12, 31, 23, 59, 59),
        DateRow("Sat, 31 Dec 1994 23:59:60 GMT", 1994, 12, 31, 23, 59, 60),
        DateRow("Sat, 30 Apr 1994 10:00:00 GMT", 1994, 4, 30, 10, 0, 0),
        DateRow("Thu, 31 Mar 1994 10:00:00 GMT", 1994, 3, 31, 10, 0, 0),
        DateRow("Mon, 28 Feb 1994 10:00:00 GMT", 1994, 2, 28, 10, 0, 0),
        DateRow("Fri, 31 Dec 9999 23:59:59 GMT", 9999, 12, 31, 23, 59, 59),
        // RFC 850, its two-digit year placed by the 50-year rule from 1994.
        DateRow("Sunday, 06-Nov-94 08:49:37 GMT", 1994, 11, 6, 8, 49, 37),
        DateRow("Saturday, 01-Jan-00 00:00:00 GMT", 2000, 1, 1, 0, 0, 0),
        DateRow("Tuesday, 29-Feb-00 12:00:00 GMT", 2000, 2, 29, 12, 0, 0),
        DateRow("Thursday, 01-Jan-70 00:00:00 GMT", 1970, 1, 1, 0, 0, 0),
        DateRow("Friday, 31-Dec-99 23:59:59 GMT", 1999, 12, 31, 23, 59, 59),
        DateRow("Sunday, 06-Nov-44 08:49:37 GMT", 2044, 11, 6, 8, 49, 37),
        DateRow("Tuesday, 06-Nov-45 08:49:37 GMT", 1945, 11, 6, 8, 49, 37),
        // asctime: a one-digit day after two spaces, or two digits.
        DateRow("Sun Nov  6 08:49:37 1994", 1994, 11, 6, 8, 49, 37),
        DateRow("Sun Nov 06 08:49:37 1994", 1994, 11, 6, 8, 49, 37),
        DateRow("Wed Nov 16 08:49:37 1994", 1994, 11, 16, 8, 49, 37),
        DateRow("Tue Feb 29 12:00:00 2000", 2000, 2, 29, 12, 0, 0),
        // Optional whitespace (SP, HTAB) around the value.
        DateRow(" Sun, 06 Nov 1994 08:49:37 GMT", 1994, 11, 6, 8, 49, 37),
        DateRow("\tSunday, 06-Nov-94 08:49:37 GMT \t", 1994, 11, 6, 8, 49, 37),
        DateRow("  Sun Nov  6 08:49:37 1994\t", 1994, 11, 6, 8, 49, 37),
    ]

    @Test(arguments: validDates)
    func readsEveryHTTPDateFormat(_ row: DateRow) {
        #expect(
            RetryAfter.httpDate(row.value.trimmingCharacters(in: CharacterSet(charactersIn: " \t")), now: Self.now)
                == row.instant)
        let milliseconds = max(0, (row.instant.timeIntervalSince(Self.now) * 1000).rounded(.up))
        #expect(RetryAfter.delay(from: row.value, now: Self.now) == .milliseconds(Int64(milliseconds)))
    }

    @Test(arguments: validDates)
    func theTableNamesEachDatesWeekday(_ row: DateRow) {
        // Keeps the table honest: the parser would accept a wrong day name (see below).
        // 1 is Sunday.
        let weekday = Self.utc.component(.weekday, from: Self.instant(row.year, row.month, row.day, 0, 0, 0))
        let name = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"][weekday - 1]
        #expect(row.value.drop { $0 == " " || $0 == "\t" }.hasPrefix(name))
    }

    @Test func readsAnIMFFixdateAsADelay() {
        #expect(RetryAfter.delay(from: "Sun, 06 Nov 1994 08:50:07 GMT", now: Self.now) == .seconds(30))
        #expect(RetryAfter.delay(from: "Sunday, 06-Nov-94 08:50:07 GMT", now: Self.now) == .seconds(30))
        #expect(RetryAfter.delay(from: "Sun Nov  6 08:50:07 1994", now: Self.now) == .seconds(30))
        #expect(RetryAfter.delay(from: "Mon, 07 Nov 1994 08:49:37 GMT", now: Self.now) == .seconds(86_400))
    }

    @Test func aDateInThePastMeansNoDelay() {
        #expect(RetryAfter.delay(from: "Sun, 06 Nov 1994 08:00:00 GMT", now: Self.now) == .zero)
    }

    @Test func aFractionOfASecondAwayRoundsUp() {
        let now = Self.now.addingTimeInterval(-0.0004)
        #expect(RetryAfter.delay(from: "Sun, 06 Nov 1994 08:49:37 GMT", now: now) == .milliseconds(1))
    }

    /// RFC 9110 does not ask a recipient to check the day name against the date, and the date says
    /// when: a wrong weekday is read, a name that is no weekday is not.
    @Test func aDayNameThatIsNotTheDatesWeekdayIsRead() {
        #expect(RetryAfter.delay(from: "Mon, 06 Nov 1994 08:50:07 GMT", now: Self.now) == .seconds(30))
        #expect(RetryAfter.delay(from: "Friday, 06-Nov-94 08:50:07 GMT", now: Self.now) == .seconds(30))
        #expect(RetryAfter.delay(from: "Sat Nov  6 08:50:07 1994", now: Self.now) == .seconds(30))
    }

    /// RFC 9110 §5.6.7: an RFC 850 year that appears more than 50 years in the future is the most
    /// recent past year with the same last two digits. Here "now" is 15 June 2025, noon.
    @Test(arguments: [
        ("Saturday, 15-Jun-75 12:00:00 GMT", 2075, 15, 0), ("Sunday, 15-Jun-75 12:00:01 GMT", 1975, 15, 1),
        ("Monday, 16-Jun-75 12:00:00 GMT", 1975, 16, 0), ("Friday, 14-Jun-75 12:00:00 GMT", 2075, 14, 0),
        ("Tuesday, 15-Jun-76 12:00:00 GMT", 1976, 15, 0), ("Friday, 15-Jun-74 12:00:00 GMT", 2074, 15, 0),
        ("Sunday, 15-Jun-25 12:00:00 GMT", 2025, 15, 0), ("Monday, 15-Jun-26 12:00:00 GMT", 2026, 15, 0),
        ("Thursday, 15-Jun-00 12:00:00 GMT", 2000, 15, 0), ("Tuesday, 15-Jun-99 12:00:00 GMT", 1999, 15, 0),
    ])
    func anRFC850YearIsNeverMoreThanFiftyYearsAhead(_ value: String, _ year: Int, _ day: Int, _ second: Int) {
        let now = Self.instant(2025, 6, 15, 12, 0, 0)
        #expect(RetryAfter.httpDate(value, now: now) == Self.instant(year, 6, day, 12, 0, second))
    }

    @Test func anRFC850DateThatDoesNotExistInItsCenturyIsIgnored() {
        // From 2050 the year "00" is 2100, which is no leap year.
        #expect(RetryAfter.httpDate("Monday, 29-Feb-00 12:00:00 GMT", now: Self.instant(2050, 3, 1, 0, 0, 0)) == nil)
        #expect(RetryAfter.httpDate("Tuesday, 29-Feb-00 12:00:00 GMT", now: Self.instant(2049, 1, 1, 0, 0, 0)) != nil)
    }

    @Test(arguments: [
        // Not a date at all.
        "soon", "GMT", "Sun", "Sun,", "2024-01-01T00:00:00Z",
        // IMF-fixdate: impossible dates and times.
        "Sun, 32 Nov 1994 08:49:37 GMT", "Sun, 31 Nov 1994 08:49:37 GMT", "Sat, 31 Apr 1994 08:49:37 GMT",
        "Tue, 29 Feb 1994 08:49:37 GMT", "Thu, 29 Feb 1900 08:49:37 GMT", "Tue, 30 Feb 2000 08:49:37 GMT",
        "Sat, 00 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Nov 1994 25:49:37 GMT", "Sun, 06 Nov 1994 08:60:00 GMT",
        "Sun, 06 Nov 1994 08:49:61 GMT",
        // IMF-fixdate: signed or short numbers.
        "Sun, +6 Nov 1994 08:49:37 GMT", "Sun, -6 Nov 1994 08:49:37 GMT", "Sun, 06 Nov +994 08:49:37 GMT",
        "Sun, 06 Nov 1994 +8:49:37 GMT",
        "Sun, 06 Nov 1994 08:+9:37 GMT", "Sun, 06 Nov 1994 08:49:-7 GMT", "Sun, 6 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 94 08:49:37 GMT",
        "Sun, 06 Nov 1994 8:49:37 GMT", "Sun, 06 Nov 1994 08:49 GMT", "Sun, 06 Nov 19945 08:49:37 GMT",
        "Sun, ０6 Nov 1994 08:49:37 GMT",
        // IMF-fixdate: case, zone, names.
        "sun, 06 Nov 1994 08:49:37 GMT", "SUN, 06 Nov 1994 08:49:37 GMT", "Sun, 06 nov 1994 08:49:37 GMT",
        "Sun, 06 NOV 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 08:49:37 gmt", "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 06 Nov 1994 08:49:37 +0000",
        "Sun, 06 Nov 1994 08:49:37",
        "Sun, 06 Nov 1994 08:49:37 GMT+1", "Sunday, 06 Nov 1994 08:49:37 GMT", "Sun, 06 November 1994 08:49:37 GMT",
        "Sno, 06 Nov 1994 08:49:37 GMT",
        // IMF-fixdate: separators and whitespace.
        "Sun,  06 Nov 1994 08:49:37 GMT", "Sun, 06  Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994  08:49:37 GMT",
        "Sun, 06 Nov 1994 08:49:37  GMT",
        "Sun,06 Nov 1994 08:49:37 GMT", "Sun 06 Nov 1994 08:49:37 GMT", "Sun, 06-Nov-1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 08.49.37 GMT",
        "Sun,\t06 Nov 1994 08:49:37 GMT", "Sun, 06\tNov 1994 08:49:37 GMT", "Sun, 06 Nov 1994\t08:49:37 GMT",
        "Sun,\u{A0}06 Nov 1994 08:49:37 GMT", "Sun, 06\u{2003}Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov 1994 08:49:37\u{A0}GMT",
        "\u{A0}Sun, 06 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 GMT\u{2003}",
        "Sun, 06 Nov 1994 08:49:37 GMT\r\n",
        "Sun, 06 Nov 1994 08:49:37 GMT,", "Sun, 06 Nov 1994 08:49:37 GMT extra",
        "Sun, 06 Nov 1994 08:49:37 GMT, Sun, 06 Nov 1994 08:49:37 GMT",
        // RFC 850.
        "Sun, 06-Nov-94 08:49:37 GMT", "Sunday, 06-Nov-1994 08:49:37 GMT", "Sunday, 6-Nov-94 08:49:37 GMT",
        "Sunday, 06-nov-94 08:49:37 GMT",
        "sunday, 06-Nov-94 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 UTC", "Sunday, 06-Nov-94 08:49:37",
        "Sunday, 31-Apr-94 08:49:37 GMT",
        "Tuesday, 29-Feb-94 08:49:37 GMT", "Sunday,  06-Nov-94 08:49:37 GMT", "Sunday, 06 Nov 94 08:49:37 GMT",
        "Sunday, +6-Nov-94 08:49:37 GMT",
        "Sunday, 06-Nov-+4 08:49:37 GMT", "Sunday, 06-Nov-94 24:00:00 GMT", "Sunday,\u{A0}06-Nov-94 08:49:37 GMT",
        "Sunday 06-Nov-94 08:49:37 GMT",
        // asctime.
        "Sun Nov 6 08:49:37 1994", "Sun Nov   6 08:49:37 1994", "Sun Nov  6 08:49:37 1994 GMT",
        "Sun Nov  6 08:49:37 94",
        "Sun, Nov  6 08:49:37 1994", "Sun Nov +6 08:49:37 1994", "Sun Nov 31 08:49:37 1994", "Tue Feb 29 08:49:37 1994",
        "Sun Nov  6 08:49:37  1994", "Sun Nov\t 6 08:49:37 1994", "Sun Nov  6  08:49:37 1994",
        "Sun Nov \u{A0}6 08:49:37 1994",
        "Sun nov  6 08:49:37 1994", "Sunday Nov  6 08:49:37 1994", "Sun Nov  6 08:49:37 +994",
        "Sun Nov  6 08:49:60 1994x",
    ])
    func ignoresAnythingElse(_ value: String) {
        #expect(RetryAfter.delay(from: value, now: Self.now) == nil)
    }
}
