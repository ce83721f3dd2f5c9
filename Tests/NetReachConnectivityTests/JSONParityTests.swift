import Foundation
import NetReach
import Testing

@testable import NetReachConnectivity

/// NetReach's JSON writer (``PathJSON``, ``ConnectivityJSON``) against `JSONEncoder` (sorted keys,
/// slashes unescaped) on the same values: byte for byte, on every shape a path and a verdict can
/// take, on interface names with the bytes Linux allows in them, and on the latencies a probe
/// measures. `watch --json`, `status --json`, `check --json` and serve's events are all these
/// lines; `CLIJSONSchemaTests` holds them to the published schema.
@Suite("NetReach's JSON against JSONEncoder")
struct JSONParityTests {
    static let names = [
        "eth0", "wlan0", "", "a\"b", "back\\slash", "tab\tname", "bell\u{07}", "nul\u{00}x", "ctl\u{1F}",
        "form\u{0C}feed", "bs\u{08}", "cr\r", "nl\n", "del\u{7F}", "ünïcödé", "emoji😀", "with/slash", "x:y",
    ]

    static let dates: [Date?] = [
        nil, Date(timeIntervalSince1970: 1_795_376_401.123), Date(timeIntervalSince1970: -0.001),
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
                    gateways: [
                        IPAddress("192.0.2.1")!, IPAddress("fe80::1")!, IPAddress("2001:db8::ff:1")!,
                        IPAddress("::ffff:10.0.0.1")!, IPAddress("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff")!,
                    ],
                    isMultipath: offset % 2 == 1))
        }
        paths.append(NetworkPath(status: .satisfied))
        return paths
    }

    /// Verdicts with every level and probe verdict, absent and present optional keys, and
    /// latencies whose shortest form is whole, fractional, tiny or large.
    static var verdicts: [Connectivity] {
        let probe = ConnectivityProbe(URL(string: "http://192.0.2.10/generate_204")!)
        let texts = ConnectivityProbe(
            URL(string: "https://[2001:db8::1]:8443/a/b?c=d")!, expecting: .bodyPrefix("ok\"\n"))
        let login = URL(string: "http://login.hotel.test/welcome?from=/x")!
        let latencies: [Duration] = [
            .zero, .microseconds(1), .microseconds(10), .microseconds(4_321), .milliseconds(12), .seconds(1),
            .nanoseconds(123_456_789), .seconds(86_400), .nanoseconds(1),
        ]
        var results: [ProbeResult] = []
        for (offset, latency) in latencies.enumerated() {
            let verdicts: [ProbeVerdict] = [
                .passed, .portal(loginURL: login, evidence: "HTTP 302 redirect"),
                .portal(loginURL: nil, evidence: "body \"x\""),
                .intercepted("certificate not trusted\t(self-signed)"), .failed("timed out"),
            ]
            results.append(
                ProbeResult(
                    probe: offset % 2 == 0 ? probe : texts, family: offset % 3 == 0 ? .ipv6 : .ipv4,
                    proxy: offset % 4 == 0 ? URL(string: "http://proxy.test:3128")! : nil,
                    status: offset % 5 == 0 ? nil : 200 + offset, latency: latency,
                    verdict: verdicts[offset % verdicts.count]))
        }
        let levels: [ConnectivityLevel] = [
            .unknown, .none, .local, .limited, .portal(loginURL: login), .portal(loginURL: nil), .full,
        ]
        return levels.enumerated().map { offset, level in
            var verdict = Connectivity.unknown
            verdict.path = paths[(offset * 5) % paths.count]
            verdict.level = level
            verdict.ipv4 = Connectivity.Family(level: level, evidence: Array(results.prefix(offset + 1)))
            verdict.ipv6 = Connectivity.Family(level: .limited, evidence: Array(results.suffix(offset)))
            if offset % 2 == 0 { verdict.probesSuspended = "the path is \"expensive\"" }
            return verdict
        }
    }

    @Test func pathsMatchTheEncoderByteForByte() throws {
        var compared = 0
        for path in Self.paths {
            for date in Self.dates {
                #expect(PathJSON.line(path, at: date) == Reference.encode(Reference.Line(path: path, date: date)))
                compared += 1
            }
        }
        #expect(compared == Self.paths.count * Self.dates.count)
    }

    @Test func verdictsMatchTheEncoderByteForByte() throws {
        for verdict in Self.verdicts {
            for date in Self.dates {
                let reference = Reference.encode(
                    Reference.Line(path: verdict.path, date: date, connectivity: Reference.Report(verdict)))
                #expect(ConnectivityJSON.line(verdict, at: date) == reference)
            }
        }
    }

    @Test func everyControlCharacterIsEscapedAsTheEncoderDoes() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        for value in Self.names + (UInt8(0)..<0x80).map({ "x" + String(UnicodeScalar($0)) + "y" }) {
            let encoded = String(decoding: try encoder.encode(value), as: UTF8.self)
            #expect(PathJSON.string(value) == encoded, "\(Array(value.utf8))")
            let path = NetworkPath(
                status: .satisfied, availableInterfaces: [NetworkInterface(name: value, index: 3, type: .other)])
            #expect(PathJSON.line(path) == Reference.encode(Reference.Line(path: path, date: nil)))
        }
    }

    @Test func numbersAreWrittenAsTheEncoderWritesThem() throws {
        let encoder = JSONEncoder()
        for value in [0, 7, 9, 10, 99, 100, 1_000_000, -1, -10, Int.max, Int.min] {
            var text = JSONBuffer(capacity: 0)
            text.append(value)
            #expect(text.text == String(decoding: try encoder.encode(value), as: UTF8.self))
        }
        var padded = JSONBuffer(capacity: 0)
        padded.append(7, width: 3)
        padded.append(1234, width: 2)
        padded.append(0, width: 2)
        #expect(padded.text == "007123400")
        for value in [0.0, -0.0, 1, 12, 0.5, 4.321, 1e-05, 1e-06, 0.000123, 123_456.789, 1e16, 1.5e300, -2.25] {
            var text = JSONBuffer(capacity: 0)
            text.append(value)
            #expect(text.text == String(decoding: try encoder.encode(value), as: UTF8.self), "\(value)")
        }
    }

    @Test func addressesAreWrittenAsInetNtopWritesThem() {
        let addresses = [
            "0.0.0.0", "255.255.255.255", "10.0.0.1", "::", "::1", "fe80::1", "2001:db8::ff:1", "1::",
            "2001:db8:0:0:1:0:0:1", "::ffff:10.0.0.1", "::10.0.0.1", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
        ]
        for text in addresses {
            let address = IPAddress(text)!
            var written = JSONBuffer(capacity: 0)
            written.appendQuoted(address)
            var bytes = [CChar](repeating: 0, count: 64)
            var raw = [UInt8](repeating: 0, count: 16)
            let family = text.contains(":") ? AF_INET6 : AF_INET
            _ = inet_pton(family, text, &raw)
            let expected = String(cString: inet_ntop(family, raw, &bytes, 64)!)
            #expect(written.text == "\"\(expected)\"")
            #expect(address.description == expected)
        }
    }

    @Test func theLineDecodesBackToThePath() throws {
        for path in Self.paths {
            #expect(try JSONDecoder().decode(NetworkPath.self, from: Data(PathJSON.line(path).utf8)) == path)
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
            let expected = UTCDay(
                year: Int(fields.tm_year) + 1900, month: Int(fields.tm_mon) + 1, day: Int(fields.tm_mday))
            if UTCDay(daysSince1970: day) != expected { differing.append(day) }
        }
        #expect(differing.isEmpty, "days since 1970 whose date differs from gmtime_r's: \(differing.prefix(10))")
        #expect(PathJSON.timestamp(Date(timeIntervalSince1970: 1_795_815_601.1234)) == "2026-11-27T21:40:01.123Z")
        #expect(PathJSON.timestamp(Date(timeIntervalSince1970: -0.001)) == "1969-12-31T23:59:59.999Z")
        #expect(PathJSON.timestamp(Date(timeIntervalSince1970: 951_782_400)) == "2000-02-29T00:00:00.000Z")
    }
}

/// The same objects as `Encodable` values, for `JSONEncoder`: the reference the writer is held to.
private enum Reference {
    static func encode(_ value: some Encodable) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try! encoder.encode(value), as: UTF8.self)
    }

    /// A path's keys, flat, with `timestamp`, `version` and `connectivity` beside them.
    struct Line: Encodable {
        var path: NetworkPath
        var date: Date?
        var connectivity: Report?

        private enum CodingKeys: String, CodingKey { case timestamp, connectivity, version }

        func encode(to encoder: any Encoder) throws {
            try path.encode(to: encoder)
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(PackageVersion.current, forKey: .version)
            try container.encodeIfPresent(date.map(PathJSON.timestamp), forKey: .timestamp)
            try container.encodeIfPresent(connectivity, forKey: .connectivity)
        }
    }

    struct Report: Encodable {
        var level: String
        var loginURL: String?
        var ipv4: Family
        var ipv6: Family
        var probesSuspended: String?

        init(_ verdict: Connectivity) {
            level = verdict.level.name
            if case .portal(let login?) = verdict.level { loginURL = login.absoluteString }
            ipv4 = Family(verdict.ipv4)
            ipv6 = Family(verdict.ipv6)
            probesSuspended = verdict.probesSuspended
        }
    }

    struct Family: Encodable {
        var level: String
        var probes: [Probe]

        init(_ family: Connectivity.Family) {
            level = family.level.name
            probes = family.evidence.map(Probe.init)
        }
    }

    struct Probe: Encodable {
        var url: String
        var expect: String
        var family: String
        var status: Int?
        var latencyMilliseconds: Double
        var verdict: String
        var detail: String?
        var loginURL: String?
        var proxy: String?

        init(_ result: ProbeResult) {
            url = result.probe.url.absoluteString
            proxy = result.proxy?.absoluteString
            expect = result.probe.expectation.description
            family = result.family.rawValue
            status = result.status
            latencyMilliseconds = (result.latency.milliseconds * 1000).rounded() / 1000
            switch result.verdict {
            case .passed: verdict = "passed"
            case .portal(let login, let evidence):
                (verdict, detail, loginURL) = ("portal", evidence, login?.absoluteString)
            case .intercepted(let why): (verdict, detail) = ("intercepted", why)
            case .failed(let why): (verdict, detail) = ("failed", why)
            }
        }
    }
}
