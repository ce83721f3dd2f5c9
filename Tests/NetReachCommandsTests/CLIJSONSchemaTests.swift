import Foundation
import NetReachConnectivity
import NetReachTestSupport
import Testing

@testable import NetReach
@testable import NetReachCommands

/// `Docs/netreach-json.schema.json` describes what `status --json` and `watch --json` print: held
/// to the formatter's output for every enum value (no root), and to the real commands' output in
/// a namespace lab (root).
@Suite("netreach JSON schema", .offPool)
struct CLIJSONSchemaTests {
    static let schemaPath = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Docs/netreach-json.schema.json").path

    static func checker() throws -> JSONSchemaChecker { try JSONSchemaChecker(contentsOf: schemaPath) }

    // Every case, spelled out: adding one to the library fails to compile these switches until
    // it is added here, and so (through the tests below) to the schema.
    static let allReasons: [UnsatisfiedReason] = [
        .noInterface, .linkDown, .noAddress, .noDefaultRoute, .routeRefused, .excludedByRequirements,
        .destinationUnresolved, .monitorUnavailable,
    ]
    static let allStatuses: [PathStatus] = [.satisfied, .unsatisfied, .requiresConnection]

    private static func listed(_ reason: UnsatisfiedReason) -> Bool {
        switch reason {
        case .noInterface, .linkDown, .noAddress, .noDefaultRoute, .routeRefused, .excludedByRequirements,
            .destinationUnresolved, .monitorUnavailable:
            allReasons.contains(reason)
        }
    }

    private static func listed(_ status: PathStatus) -> Bool {
        switch status {
        case .satisfied, .unsatisfied, .requiresConnection: allStatuses.contains(status)
        }
    }

    // MARK: The schema itself

    @Test func theSchemaIsDraft2020_12AndListsEveryEnumValue() throws {
        let schema = try Self.checker().root
        guard case .object(let top) = schema, case .object(let definitions)? = top["$defs"] else {
            Issue.record("the schema has no $defs")
            return
        }
        #expect(top["$schema"] == .string("https://json-schema.org/draft/2020-12/schema"))
        func enumeration(_ name: String) -> [String] {
            guard case .object(let definition)? = definitions[name], case .array(let values)? = definition["enum"]
            else { return [] }
            return values.compactMap { if case .string(let text) = $0 { text } else { nil } }
        }
        #expect(Self.allReasons.allSatisfy(Self.listed) && Self.allStatuses.allSatisfy(Self.listed))
        #expect(enumeration("unsatisfiedReason") == Self.allReasons.map(\.rawValue))
        #expect(enumeration("status") == Self.allStatuses.map(\.rawValue))
        #expect(enumeration("interfaceType") == InterfaceType.allCases.map(\.rawValue))
    }

    @Test func everyKeyIsRequiredAndDeclared() throws {
        guard case .object(let top) = try Self.checker().root,
            case .array(let required)? = top["required"], case .object(let properties)? = top["properties"]
        else {
            Issue.record("the schema has no required or properties")
            return
        }
        let requiredNames = Set(required.compactMap { if case .string(let name) = $0 { name } else { nil } })
        // connectivity is there only when the internet was judged (check, watch --internet).
        #expect(requiredNames.union(["connectivity"]) == Set(properties.keys))
        #expect(top["additionalProperties"] == .bool(false))
    }

    // MARK: The formatter's output (no root)

    static let everyInterfaceType = NetworkPath(
        status: .satisfied,
        availableInterfaces: InterfaceType.allCases.enumerated().map {
            NetworkInterface(name: "if\($0.offset)", index: $0.offset + 1, type: $0.element)
        },
        isExpensive: true, isConstrained: true, supportsIPv4: true, supportsIPv6: true, supportsDNS: true,
        gateways: [IPAddress("192.0.2.1")!, IPAddress("2001:db8::1")!])

    static var formattedPaths: [NetworkPath] {
        [everyInterfaceType, NetworkPath(status: .satisfied)]
            + allReasons.map(NetworkPath.unsatisfied)
            + [NetworkPath(status: .requiresConnection, unsatisfiedReason: .noDefaultRoute)]
    }

    @Test(arguments: formattedPaths)
    func whatTheFormatterPrintsConformsWithATimestamp(_ path: NetworkPath) throws {
        let line = PathJSON.line(path, at: Date(timeIntervalSince1970: 1_795_376_401.123))
        let violations = try Self.checker().violations(of: JSONValue.parse(line))
        #expect(violations.isEmpty, "\(line): \(violations)")
    }

    /// A verdict of each level, with a probe of each verdict kind, as check --json and
    /// watch --internet --json print it.
    static var formattedVerdicts: [Connectivity] {
        let probe = ConnectivityProbe(URL(string: "http://192.0.2.10/generate_204")!)
        let login = URL(string: "http://login.hotel.test/")!
        let results = [
            ProbeResult(probe: probe, family: .ipv4, status: 204, latency: .microseconds(4_321), verdict: .passed),
            ProbeResult(
                probe: probe, family: .ipv4, status: 302, latency: .seconds(1),
                verdict: .portal(loginURL: login, evidence: "HTTP 302 redirect")),
            ProbeResult(
                probe: probe, family: .ipv6, status: nil, latency: .zero,
                verdict: .intercepted("certificate not trusted")),
            ProbeResult(
                probe: probe, family: .ipv6, status: nil, latency: .milliseconds(10_000), verdict: .failed("timed out")),
        ]
        let levels: [ConnectivityLevel] = [
            .unknown, .none, .local, .limited, .portal(loginURL: login), .portal(loginURL: nil), .full,
        ]
        return levels.map { level in
            var verdict = Connectivity.unknown
            verdict.path = everyInterfaceType
            verdict.level = level
            verdict.ipv4 = Connectivity.Family(level: level, evidence: Array(results.prefix(2)))
            verdict.ipv6 = Connectivity.Family(level: .limited, evidence: Array(results.suffix(2)))
            if level == .unknown { verdict.probesSuspended = "the path is expensive" }
            return verdict
        }
    }

    @Test(arguments: formattedVerdicts)
    func whatCheckAndWatchInternetPrintConforms(_ verdict: Connectivity) throws {
        let line = ConnectivityJSON.line(verdict, at: Date(timeIntervalSince1970: 1_795_376_401.123))
        let violations = try Self.checker().violations(of: JSONValue.parse(line))
        #expect(violations.isEmpty, "\(line): \(violations)")
        #expect(line.contains(#""connectivity":{"#))
    }

    @Test(arguments: [
        ("an unknown level", #"{"level":"online"}"#, "$.connectivity.level"),
        ("a family without probes", #"{"ipv4":{"level":"full"}}"#, "$.connectivity.ipv4: probes is missing"),
        (
            "an unknown probe verdict",
            #"{"ipv4":{"level":"full","probes":[{"expect":"204","family":"ipv4","latencyMilliseconds":1,"url":"http://a/","verdict":"ok"}]}}"#,
            "$.connectivity.ipv4.probes[0].verdict"
        ),
        (
            "a negative latency",
            #"{"ipv4":{"level":"full","probes":[{"expect":"204","family":"ipv4","latencyMilliseconds":-1,"url":"http://a/","verdict":"passed"}]}}"#,
            "$.connectivity.ipv4.probes[0].latencyMilliseconds"
        ),
        ("an unknown key", #"{"captive":true}"#, "$.connectivity.captive"),
    ])
    func theCheckerRejectsABadVerdict(_ what: String, _ change: String, _ expectedPath: String) throws {
        guard
            case .object(var members) = try JSONValue.parse(
                ConnectivityJSON.line(Self.formattedVerdicts.last!, at: Date(timeIntervalSince1970: 0))),
            case .object(var connectivity)? = members["connectivity"],
            case .object(let replacements) = try JSONValue.parse(change)
        else {
            Issue.record("not objects")
            return
        }
        connectivity.merge(replacements) { $1 }
        members["connectivity"] = .object(connectivity)
        let violations = try Self.checker().violations(of: .object(members))
        #expect(violations.contains { $0.hasPrefix(expectedPath) }, "\(what): \(violations)")
    }

    @Test func withoutATimestampTheObjectIsIncomplete() throws {
        let violations = try Self.checker().violations(
            of: JSONValue.parse(PathJSON.line(Self.everyInterfaceType)))
        #expect(violations == ["$: timestamp is missing"])
    }

    /// The checker must reject what the schema forbids, or a passing test means nothing.
    @Test(arguments: [
        ("satisfied with a reason", #"{"unsatisfiedReason":"linkDown"}"#, "$.unsatisfiedReason"),
        ("unsatisfied without one", #"{"status":"unsatisfied","unsatisfiedReason":null}"#, "$.unsatisfiedReason"),
        (
            "unsatisfied with interfaces", #"{"status":"unsatisfied","unsatisfiedReason":"linkDown"}"#,
            "$.availableInterfaces"
        ),
        (
            "an unknown reason", #"{"status":"unsatisfied","unsatisfiedReason":"cosmicRays","availableInterfaces":[]}"#,
            "$.unsatisfiedReason"
        ),
        ("an unknown status", #"{"status":"maybe"}"#, "$.status"),
        ("an unknown key", #"{"ssid":"home"}"#, "$.ssid"),
        ("a string flag", #"{"isExpensive":"no"}"#, "$.isExpensive"),
        (
            "a fractional index", #"{"availableInterfaces":[{"index":1.5,"name":"eth0","type":"wifi"}]}"#,
            "$.availableInterfaces[0].index"
        ),
        (
            "index zero", #"{"availableInterfaces":[{"index":0,"name":"eth0","type":"wifi"}]}"#,
            "$.availableInterfaces[0].index"
        ),
        (
            "an unknown type", #"{"availableInterfaces":[{"index":1,"name":"eth0","type":"ethernet"}]}"#,
            "$.availableInterfaces[0].type"
        ),
        (
            "an interface without a name", #"{"availableInterfaces":[{"index":1,"type":"wifi"}]}"#,
            "$.availableInterfaces[0]: name is missing"
        ),
        ("a local timestamp", #"{"timestamp":"2026-11-22T20:40:01.123+01:00"}"#, "$.timestamp"),
        ("a numeric gateway", #"{"gateways":[3221225985]}"#, "$.gateways[0]"),
    ])
    func theCheckerRejectsWhatTheSchemaForbids(_ what: String, _ change: String, _ expectedPath: String) throws {
        // A valid satisfied line with one interface, then the change's keys replaced.
        guard
            case .object(var members) = try JSONValue.parse(
                PathJSON.line(Self.everyInterfaceType, at: Date(timeIntervalSince1970: 0))),
            case .object(let replacements) = try JSONValue.parse(change)
        else {
            Issue.record("not objects")
            return
        }
        members.merge(replacements) { $1 }
        let violations = try Self.checker().violations(of: .object(members))
        #expect(violations.contains { $0.hasPrefix(expectedPath) }, "\(what): \(violations)")
    }

    @Test func aMissingKeyIsAViolation() throws {
        guard
            case .object(var members) = try JSONValue.parse(
                PathJSON.line(Self.everyInterfaceType, at: Date(timeIntervalSince1970: 0)))
        else { return }
        members["unsatisfiedReason"] = nil
        #expect(try Self.checker().violations(of: .object(members)) == ["$: unsatisfiedReason is missing"])
    }

    // MARK: The commands' output in a namespace lab (root)

    @Test(.needsNamespaceRoot, arguments: [true, false])
    func statusJSONInALabConforms(defaultRoutes: Bool) async throws {
        try await NetnsLab.withLab(.init(ipv6: true, defaultRoutes: defaultRoutes)) { lab in
            let status = try NetreachProcess.start(["status", "--json", "--namespace", lab.name])
            defer { status.kill() }
            #expect(await status.exitStatus() == 0, "standard error: \(status.standardError)")
            #expect(status.outputLines.count == 1)
            let line = try #require(status.outputLines.first)
            try Self.expectConforms(line)
            let path = try JSONDecoder().decode(NetworkPath.self, from: Data(line.utf8))
            #expect(path.status == (defaultRoutes ? .satisfied : .unsatisfied))
            if !defaultRoutes { #expect(path.unsatisfiedReason == .noDefaultRoute) }
            #expect(line.contains(#""unsatisfiedReason":"# + (defaultRoutes ? "null" : #""noDefaultRoute""#)))
        }
    }

    @Test(.needsNamespaceRoot)
    func watchJSONLinesInALabConform() async throws {
        try await NetnsLab.withLab(.init(ipv6: true)) { lab in
            let watch = try NetreachProcess.start(["watch", "--json", "--namespace", lab.name])
            defer { watch.kill() }
            await LabPoll.until("watch prints the current path") { watch.outputLines.count >= 1 }
            try await lab.setPeer(up: false) // carrier lost: unsatisfied (link down)
            await LabPoll.until("watch prints the change") { watch.outputLines.count >= 2 }
            watch.signal(SIGTERM)
            #expect(await watch.exitStatus() == 0, "standard error: \(watch.standardError)")
            #expect(watch.outputLines.count >= 2)
            for line in watch.outputLines { try Self.expectConforms(line) }
            let paths = try watch.outputLines.map { try JSONDecoder().decode(NetworkPath.self, from: Data($0.utf8)) }
            #expect(paths.first?.status == .satisfied && paths.first?.supportsIPv6 == true)
            #expect(paths.last.map(PathStep.init) == .unsatisfied(.linkDown))
        }
    }

    @Test(.needsNamespaceRoot, arguments: [true, false])
    func waitJSONConformsWhetherMetOrTimedOut(defaultRoutes: Bool) async throws {
        try await NetnsLab.withLab(.init(ipv6: true, defaultRoutes: defaultRoutes)) { lab in
            let wait = try NetreachProcess.start(["wait", "--json", "--timeout", "0", "--namespace", lab.name])
            defer { wait.kill() }
            // Met: 0 and the path; not met (no default route): 1, the path all the same, the reason on standard error.
            #expect(await wait.exitStatus() == (defaultRoutes ? 0 : 1), "standard error: \(wait.standardError)")
            #expect(wait.outputLines.count == 1, "\(wait.outputLines)")
            let line = try #require(wait.outputLines.first)
            try Self.expectConforms(line)
            #expect(line.contains(#""version":"\#(NetreachCommand.version)""#), "\(line)")
            let path = try JSONDecoder().decode(NetworkPath.self, from: Data(line.utf8))
            #expect(path.status == (defaultRoutes ? .satisfied : .unsatisfied))
            if !defaultRoutes { #expect(wait.standardError.contains("timed out"), "\(wait.standardError)") }
        }
    }

    @Test(arguments: [
        (
            "conditionLine",
            #"{"event":"connection","listener":"1","upstream":{},"downstream":{},"isOpen":false,"version":"0.22.0"}"#,
            "$: id is missing"
        ),
        ("conditionLine", #"{"event":"stopped","connections":1,"extra":1,"version":"0.22.0"}"#, "$.extra: "),
        ("conditionLine", #"{"event":"ready","control":"127.0.0.1:1","version":"0.22.0"}"#, "$: listeners is missing"),
        (
            "getWaitingLine", #"{"event":"waiting","method":"GET","url":"http://x/","reason":"r","version":"0.22.0"}"#,
            "$: path is missing"
        ),
        (
            "getResponseLine",
            #"{"event":"response","status":99,"reasonPhrase":"","url":"u","headers":{},"attempts":1,"waitedSeconds":0,"elapsedSeconds":0,"bodyBytes":0,"version":"0.22.0"}"#,
            "$.status: "
        ),
    ])
    func theLineDefinitionsRejectWhatTheyForbid(_ definition: String, _ line: String, _ expected: String) throws {
        let violations = try Self.checker().violations(of: JSONValue.parse(line), definition: definition)
        #expect(violations.contains { $0.hasPrefix(expected) }, "\(violations)")
    }

    @Test func getsErrorLineConformsToItsDefinition() throws {
        // Nothing listens on the discard port of loopback: refused, exit 7 (curl's number).
        let finished = try ChildProcess.runBlocking(
            NetreachProcess.executable().path,
            ["get", "--json", "--retries", "0", "http://127.0.0.1:9/"])
        #expect(finished.status == 7, "\(finished.standardError)")
        let line = try #require(finished.standardOutput.split(separator: "\n").last.map(String.init))
        try Self.expectConforms(line, definition: "getErrorLine")
        #expect(
            line.contains(#""exitStatus":7"#) && line.contains(#""version":"\#(NetreachCommand.version)""#), "\(line)")
    }

    /// The schema's verdict on one JSON line of `get` or `condition`, held to `$defs/definition`.
    static func expectConforms(
        _ line: String, definition: String, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let violations = try checker().violations(of: JSONValue.parse(line), definition: definition)
        #expect(violations.isEmpty, "\(line): \(violations)", sourceLocation: sourceLocation)
        #expect(line.contains(#""version":"\#(NetreachCommand.version)""#), "\(line)", sourceLocation: sourceLocation)
    }

    /// The schema's verdict, and the formats it only annotates: gateways are IP addresses.
    static func expectConforms(_ line: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let value = try JSONValue.parse(line)
        let violations = try checker().violations(of: value)
        #expect(violations.isEmpty, "\(line): \(violations)", sourceLocation: sourceLocation)
        if case .object(let members) = value, case .array(let gateways)? = members["gateways"] {
            for case .string(let gateway) in gateways {
                #expect(
                    IPAddress(gateway) != nil, "gateway \(gateway) is not an IP address", sourceLocation: sourceLocation
                )
            }
        }
    }
}
