import Foundation
import NetReach
import NetReachTestSupport
import Testing

@testable import NetReachCommands

/// `watch` timestamps are formatted by hand (no ICU); they must match ISO 8601 with milliseconds, UTC.
@Suite("CLI timestamps")
struct TimestampFormattingTests {
    @Test(arguments: [
        (0.0, "1970-01-01T00:00:00.000Z"),
        (1.5, "1970-01-01T00:00:01.500Z"),
        (-0.001, "1969-12-31T23:59:59.999Z"),
        (1_795_376_401.123, "2026-11-22T19:40:01.123Z"),
        (1_234_567_890.987, "2009-02-13T23:31:30.987Z"),
        (951_782_400.0, "2000-02-29T00:00:00.000Z"),
    ])
    func formatsAsISO8601WithMilliseconds(seconds: Double, expected: String) {
        #expect(PathJSON.timestamp(Date(timeIntervalSince1970: seconds)) == expected)
    }
}
