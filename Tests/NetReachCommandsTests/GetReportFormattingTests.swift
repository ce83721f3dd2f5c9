import Foundation
import Testing

@testable import NetReachCommands

/// `get`'s progress and summary numbers, written without full Foundation, against Foundation's
/// `String(format:)` on the same values.
@Suite("get's numbers as printf writes them")
struct GetReportFormattingTests {
    @Test("Decimals match String(format: \"%.Nf\"), halves and large values included")
    func fixedMatchesPrintf() {
        var values: [Double] = [0, 0.05, 0.15, 0.25, 0.35, 0.45, 1.25, 2.675, 9.95, 99.95, 999.95, 1e15, 123_456.789]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 { values.append(Double.random(in: 0..<2_000, using: &generator)) }
        for value in values {
            for digits in [1, 2] {
                #expect(GetReport.fixed(value, digits: digits) == String(format: "%.\(digits)f", value), "\(value)")
            }
        }
    }

    @Test("A percentage is right-aligned in three columns, as %3d")
    func padded() {
        for number in [0, 7, 42, 100, 1_000] {
            #expect(GetReport.padded(number, width: 3) == String(format: "%3d", number))
        }
    }

    @Test("Sizes and times read as before")
    func sizesAndTimes() {
        #expect(GetReport.bytes(999) == "999 B")
        #expect(GetReport.bytes(1_250) == "1.2 kB" || GetReport.bytes(1_250) == "1.3 kB")
        #expect(GetReport.bytes(1_250) == String(format: "%.1f kB", 1.25))
        #expect(GetReport.bytes(3_400_000) == "3.4 MB")
        #expect(GetReport.seconds(.milliseconds(2_414)) == "2.41s")
    }
}
