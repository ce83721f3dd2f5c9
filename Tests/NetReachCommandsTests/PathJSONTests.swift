import Foundation
import NetReach
import Testing

@testable import NetReachCommands

/// `watch --json` and `serve` write a path's JSON by hand; it must be byte for byte what
/// `JSONEncoder` makes of the same path, on every shape a path can take and on interface names
/// with the bytes Linux allows in them.
@Suite("Path JSON written by hand")
struct PathJSONTests {
    static let names = [
        "eth0", "wlan0", "", "a\"b", "back\\slash", "tab\tname", "bell\u{07}", "nul\u{00}x", "ctl\u{1F}",
        "form\u{0C}feed", "bs\u{08}", "cr\r", "nl\n", "del\u{7F}", "ünïcödé", "emoji😀", "with/slash", "x:y",
    ]

    static var paths: [NetworkPath] {
        var paths: [NetworkPath] = UnsatisfiedReason.allCases.map { NetworkPath.unsatisfied($0) }
        paths.append(NetworkPath(status: .requiresConnection, unsatisfiedReason: .noAddress))
        for (offset, name) in names.enumerated() {
            let type = InterfaceType.allCases[offset % InterfaceType.allCases.count]
            paths.append(
                NetworkPath(
                    status: .satisfied,
                    availableInterfaces: [
                        NetworkInterface(name: name, index: offset + 1, type: type),
                        NetworkInterface(name: "second", index: Int.max, type: .cellular),
                    ],
                    isExpensive: offset % 2 == 0, isConstrained: offset % 3 == 0, supportsIPv4: offset % 4 != 0,
                    supportsIPv6: offset % 5 != 0, supportsDNS: offset % 6 != 0,
                    gateways: [IPAddress("192.0.2.1")!, IPAddress("fe80::1")!, IPAddress("2001:db8::ff:1")!],
                    isMultipath: offset % 2 == 1))
        }
        paths.append(NetworkPath(status: .satisfied))
        return paths
    }

    @Test func matchesJSONEncoderByteForByte() throws {
        let dates: [Date?] = [nil, Date(timeIntervalSince1970: 1_795_376_401.123), Date(timeIntervalSince1970: -0.001)]
        var compared = 0
        for path in Self.paths {
            for date in dates {
                #expect(PathFormatting.json(path, at: date) == PathFormatting.encodedJSON(path, at: date))
                compared += 1
            }
        }
        #expect(compared == Self.paths.count * dates.count)
    }

    @Test func everyControlCharacterIsEscapedAsTheEncoderDoes() {
        for value in UInt32(0)..<0x80 {
            let name = "n" + String(UnicodeScalar(UInt8(value))) + "e"
            let path = NetworkPath(
                status: .satisfied, availableInterfaces: [NetworkInterface(name: name, index: 3, type: .other)])
            #expect(PathFormatting.json(path) == PathFormatting.encodedJSON(path), "byte \(value)")
        }
    }

    @Test func jsonTextEscapesStringsAsTheEncoderDoes() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        for value in Self.names + (UInt8(0)..<0x80).map({ "x" + String(UnicodeScalar($0)) + "y" }) {
            let encoded = String(decoding: try encoder.encode(value), as: UTF8.self)
            #expect(JSONText.string(value) == encoded, "\(Array(value.utf8))")
        }
    }

    @Test func numbersAreWrittenAsSwiftPrintsThem() {
        for value in [0, 7, 9, 10, 99, 100, 1_000_000, -1, -10, Int.max, Int.min] {
            var text = JSONBytes(capacity: 0)
            text.append(value)
            #expect(text.text == String(value))
        }
        var padded = JSONBytes(capacity: 0)
        padded.append(7, width: 3)
        padded.append(1234, width: 2)
        padded.append(0, width: 2)
        #expect(padded.text == "007123400")
    }

    @Test func theLineDecodesBackToThePath() throws {
        for path in Self.paths {
            let decoded = try JSONDecoder().decode(NetworkPath.self, from: Data(PathFormatting.json(path).utf8))
            #expect(decoded == path)
        }
    }

    /// The timestamp's date is computed, not asked of `gmtime_r`: the two agree on every day from
    /// year -2000 to 5000 (one day in 37 checked, and every day of 1969-1972 and 2099-2102).
    @Test func timestampDaysAreGmtimes() {
        let secondsPerDay: Int64 = 86_400
        var days = Array(stride(from: Int64(-1_450_000), through: 1_100_000, by: 37))
        days += Array(-366...(3 * 366)) + Array(47_400...48_600)
        var differing: [Int64] = []
        for day in days {
            var seconds = time_t(day * secondsPerDay + 43_210)
            var fields = tm()
            gmtime_r(&seconds, &fields)
            let expected = PathFormatting.UTCDay(
                year: Int(fields.tm_year) + 1900, month: Int(fields.tm_mon) + 1, day: Int(fields.tm_mday))
            if PathFormatting.UTCDay(daysSince1970: day) != expected { differing.append(day) }
        }
        #expect(differing.isEmpty, "days since 1970 whose date differs from gmtime_r's: \(differing.prefix(10))")
        #expect(PathFormatting.timestamp(Date(timeIntervalSince1970: 1_795_815_601.1234)) == "2026-11-27T21:40:01.123Z")
        #expect(PathFormatting.timestamp(Date(timeIntervalSince1970: -0.001)) == "1969-12-31T23:59:59.999Z")
        #expect(PathFormatting.timestamp(Date(timeIntervalSince1970: 951_782_400)) == "2000-02-29T00:00:00.000Z")
    }
}
