import ArgumentParser
import Foundation
import NetReach
import NetReachHTTP
import NetReachServe
import NetReachTestSupport
import Testing

@testable import NetReachCommands

/// `serve --config FILE`: YAML or JSON, strict about its keys and types, with a reason that
/// names the file and the key; and how the file and the flags combine.
@Suite("serve --config")
struct ServeConfigTests {
    private let noFlags = ServeArguments(
        destinations: [], namespaces: [], allNamespaces: false, readyWhen: nil, judgesInternet: false)

    @Test func yamlAndJSONSayTheSameThing() throws {
        let yaml = try ServeConfigFile.parse(
            """
            # the fleet's gateway
            listen: 127.0.0.1:9900
            to:
              db: 10.0.0.5
              api: api.example.com
            namespaces: [blue, red]
            all_namespaces: true
            ready_when: to=db
            """, path: "serve.yaml")
        let json = try ServeConfigFile.parse(
            #"{"listen":"127.0.0.1:9900","to":{"db":"10.0.0.5","api":"api.example.com"},"namespaces":["blue","red"],"all_namespaces":true,"ready_when":"to=db"}"#,
            path: "serve.json")
        #expect(yaml == json)
        #expect(yaml.to == ["db": "10.0.0.5", "api": "api.example.com"])
        let targets = try noFlags.targets(file: yaml, path: "serve.yaml")
        #expect(targets.destinations.map(\.name) == ["api", "db"])
        #expect(targets.namespaces.map(\.label) == ["blue", "red"])
        #expect(targets.followsNamespaceDirectory)
        #expect(targets.readyWhen == .destination("db"))
    }

    @Test func theExampleTheDebianPackageShipsIsValid() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let path = root.appendingPathComponent("Deploy/netreach/serve.yaml").path
        let file = try ServeConfigFile.read(path)
        #expect(file.listen == "127.0.0.1:9817")
        let targets = try noFlags.targets(file: file, path: path)
        #expect(targets.destinations.map(\.name) == ["gateway"])
        #expect(targets.namespaces == [.own])
    }

    @Test func anEmptyFileOrOneOfCommentsConfiguresNothing() throws {
        #expect(try ServeConfigFile.parse("", path: "f") == ServeConfigFile())
        #expect(try ServeConfigFile.parse("# nothing yet\n", path: "f") == ServeConfigFile())
        #expect(try noFlags.targets(file: ServeConfigFile()) == ServeTargets())
    }

    @Test(arguments: [
        (
            "namespace: [blue]",
            "f.yaml: unknown key \"namespace\"; the keys are listen, to, namespaces, all_namespaces, ready_when, max_connections, idle_timeout, header_timeout, max_probe_backoff"
        ),
        ("namespaces: blue", "f.yaml: namespaces: expected a list"),
        (
            "to: [db]",
            "f.yaml: to: expected a mapping of names to hosts (name: host, or name: {host: HOST, port: PORT, protocol: tcp|udp})"
        ),
        ("all_namespaces: maybe", "f.yaml: all_namespaces: expected true or false"),
        ("max_connections: many", "f.yaml: max_connections: expected a whole number"),
        ("to: {db: [1, 2]}", "f.yaml: to.db: expected a host, or a mapping of host, port and protocol"),
        (
            "to: {dns: {host: 10.0.0.53, prot: udp}}",
            "f.yaml: to.dns: unknown key \"prot\"; the keys are host, port, protocol"
        ),
        ("to: {dns: {port: 53}}", "f.yaml: to.dns.host: missing"),
        ("to: {dns: {host: 10.0.0.53, port: many}}", "f.yaml: to.dns.port: expected a whole number"),
        (
            "- just\n- a list",
            "f.yaml: the file: expected a mapping of keys (listen, to, namespaces, all_namespaces, ready_when, max_connections, idle_timeout, header_timeout, max_probe_backoff)"
        ),
        ("to: {db: 10.0.0.5", "f.yaml: not YAML or JSON: "),
        ("{\"to\": ", "f.yaml: not YAML or JSON: "),
    ])
    func aFileThatIsNotValidIsRefusedWithWhereAndWhy(text: String, reason: String) {
        #expect {
            _ = try ServeConfigFile.parse(text, path: "f.yaml")
        } throws: { error in
            "\(error)".hasPrefix(reason)
                || {
                    Issue.record("\(error)")
                    return false
                }()
        }
    }

    @Test func aFileThatCannotBeReadIsRefusedWithoutReadingForever() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("serve-config-\(UUID())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        #expect(throws: ServeConfigError.cannotRead(path: directory + "/none", "No such file or directory (errno 2)")) {
            try ServeConfigFile.read(directory + "/none")
        }
        #expect(throws: ServeConfigError.cannotRead(path: directory, "not a regular file")) {
            try ServeConfigFile.read(directory)
        }
        // A device that never ends, and a FIFO nobody writes to: refused at once, not read.
        #expect(throws: ServeConfigError.cannotRead(path: "/dev/zero", "not a regular file")) {
            try ServeConfigFile.read("/dev/zero")
        }
        let fifo = directory + "/fifo"
        #expect(mkfifo(fifo, 0o600) == 0)
        #expect(throws: ServeConfigError.cannotRead(path: fifo, "not a regular file")) {
            try ServeConfigFile.read(fifo)
        }
        let large = directory + "/large.yaml"
        _ = FileManager.default.createFile(
            atPath: large, contents: Data(repeating: UInt8(ascii: "#"), count: ServeConfigFile.maximumSize + 1))
        #expect(throws: ServeConfigError.cannotRead(path: large, "larger than 1 MiB")) {
            try ServeConfigFile.read(large)
        }
        let binary = directory + "/binary.yaml"
        _ = FileManager.default.createFile(atPath: binary, contents: Data([0x74, 0x6F, 0x3A, 0xFF, 0xFE]))
        #expect(throws: ServeConfigError.invalid(path: binary, "not UTF-8 text")) { try ServeConfigFile.read(binary) }
    }

    @Test func flagsAreAddedToTheFileAndANameGivenInBothIsRefused() throws {
        let file = try ServeConfigFile.parse("to: {db: 10.0.0.5}\nnamespaces: [blue]\nready_when: satisfied", path: "f")
        var flags = noFlags
        flags.destinations = ["web=10.0.0.6"]
        flags.namespaces = ["red"]
        flags.readyWhen = "to=web"
        let targets = try flags.targets(file: file, path: "f")
        #expect(targets.destinations.map(\.name) == ["db", "web"])
        #expect(targets.namespaces.map(\.label) == ["blue", "red"])
        #expect(targets.readyWhen == .destination("web")) // the flag replaces the file's

        flags.destinations = ["db=10.0.0.7"]
        flags.readyWhen = nil
        expectRefusal("--to db=10.0.0.7: the name db is given twice (with f).") {
            _ = try flags.targets(file: file, path: "f")
        }
        flags.destinations = []
        flags.namespaces = ["blue"]
        expectRefusal("the namespace blue is named twice (with f).") {
            _ = try flags.targets(file: file, path: "f")
        }
    }

    @Test func aDestinationInTheFileMayNameItsTrafficInYAMLOrJSON() throws {
        let yaml = try ServeConfigFile.parse(
            """
            to:
              web: 10.0.0.5
              dns: {host: 10.0.0.53, protocol: udp, port: 53}
              db:
                host: db.example.com
                port: 5432
            """, path: "serve.yaml")
        let json = try ServeConfigFile.parse(
            #"{"to":{"web":"10.0.0.5","dns":{"host":"10.0.0.53","protocol":"udp","port":53},"db":{"host":"db.example.com","port":5432}}}"#,
            path: "serve.json")
        #expect(yaml == json)
        let targets = try noFlags.targets(file: yaml, path: "serve.yaml")
        #expect(targets.destinations.map(\.name) == ["db", "dns", "web"])
        #expect(
            targets.destinations.map(\.traffic) == [
                PathTraffic(transportProtocol: .tcp, port: 5432), PathTraffic(transportProtocol: .udp, port: 53), .web,
            ])
        #expect(targets.destinations.map(\.destination) == ["db.example.com", "10.0.0.53", "10.0.0.5"])
    }

    @Test func portAndProtocolFlagsApplyToEveryDestinationAndReplaceTheFilesKeys() throws {
        let file = try ServeConfigFile.parse(
            "to: {dns: {host: 10.0.0.53, protocol: udp, port: 53}, web: 10.0.0.5}", path: "f")
        var flags = noFlags
        flags.destinations = ["api=10.0.0.6"]
        flags.port = 8443
        var targets = try flags.targets(file: file, path: "f")
        #expect(targets.destinations.map(\.name) == ["dns", "web", "api"])
        #expect(targets.destinations.map(\.traffic.port) == [8443, 8443, 8443], "the flag wins")
        #expect(targets.destinations.map(\.traffic.transportProtocol) == [.udp, .tcp, .tcp])
        flags.transportProtocol = .udp
        targets = try flags.targets(file: file, path: "f")
        #expect(targets.destinations.allSatisfy { $0.traffic == PathTraffic(transportProtocol: .udp, port: 8443) })
        // Without the flags, a reload follows what the file says now.
        let reloaded = try ServeConfigFile.parse("to: {dns: {host: 10.0.0.53, protocol: tcp, port: 853}}", path: "f")
        #expect(
            try noFlags.targets(file: reloaded, path: "f").destinations.map(\.traffic) == [
                PathTraffic(transportProtocol: .tcp, port: 853)
            ])
        #expect(
            try noFlags.targets(file: file, path: "f").destinations.map(\.traffic.description) == ["udp/53", "tcp/443"])
    }

    @Test(arguments: [
        ("to: {dns: {host: h, port: 0}}", "to: dns=h: port must be from 1 to 65535, not 0."),
        ("to: {dns: {host: h, port: 70000}}", "to: dns=h: port must be from 1 to 65535, not 70000."),
        ("to: {dns: {host: h, protocol: sctp}}", "to: dns=h: protocol must be tcp or udp, not sctp."),
        ("to: {dns: {host: h, protocol: UDP}}", "to: dns=h: protocol must be tcp or udp, not UDP."),
    ])
    func aPortOrProtocolTheFileGetsWrongIsRefusedEvenWhenAFlagReplacesIt(text: String, message: String) throws {
        let file = try ServeConfigFile.parse(text, path: "f")
        var flags = noFlags
        expectRefusal(message) { _ = try flags.targets(file: file, path: "f") }
        flags.port = 53
        flags.transportProtocol = .udp
        expectRefusal(message) { _ = try flags.targets(file: file, path: "f") }
    }

    @Test(arguments: [
        ["--to", "a=10.0.0.1", "--port", "0"], ["--to", "a=10.0.0.1", "--port", "70000"],
        ["--to", "a=10.0.0.1", "--protocol", "sctp"], ["--to", "a=10.0.0.1", "--port", "1", "--port", "2"],
        ["--to", "a=10.0.0.1", "--protocol", "udp", "--protocol", "tcp"], ["--port", "53"], ["--protocol", "udp"],
    ])
    func badPortAndProtocolFlagsAreUsageErrors(_ arguments: [String]) {
        let error = Self.error(["serve"] + arguments)
        #expect(!(error is CancellationError), "\(arguments) was accepted")
        #expect(NetreachCommand.exitCode(for: error) == .validationFailure, "\(arguments): \(error)")
    }

    @Test func portAndProtocolFlagsWithAConfigFileNeedNoToOfTheirOwn() throws {
        let serve = try #require(
            try NetreachCommand.parseAsRoot(["serve", "--config", "f.yaml", "--protocol", "udp", "--port", "53"])
                as? ServeCommand)
        #expect(serve.ports == [53] && serve.protocols == [.udp])
    }

    private static func error(_ arguments: [String]) -> any Error {
        do {
            _ = try NetreachCommand.parseAsRoot(arguments)
            return CancellationError()
        } catch {
            return error
        }
    }

    @Test func whatOnlyTheFileCanCheckIsCheckedWhenItIsRead() throws {
        var flags = noFlags
        flags.readyWhen = "to=db"
        // Without the file (not read yet) the name is not known to be missing.
        _ = try flags.targets(file: nil)
        expectRefusal("--ready-when to=db: no --to db=HOST is given (with f).") {
            _ = try flags.targets(file: ServeConfigFile(), path: "f")
        }
        flags.readyWhen = nil
        flags.judgesInternet = true
        let namespaced = try ServeConfigFile.parse("namespaces: [blue]", path: "f")
        #expect(throws: ValidationError.self) { try flags.targets(file: namespaced, path: "f") }
        // This namespace is still watched with --all-namespaces: probes leave from it.
        flags.allNamespaces = true
        #expect(try flags.targets(file: ServeConfigFile()).followsNamespaceDirectory)
    }
}

/// Expects `body` to throw a ValidationError saying exactly `message`.
private func expectRefusal(
    _ message: String, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void
) {
    do {
        try body()
        Issue.record("not refused; expected: \(message)", sourceLocation: sourceLocation)
    } catch let error as ValidationError {
        #expect(error.message == message, sourceLocation: sourceLocation)
    } catch {
        Issue.record("\(error)", sourceLocation: sourceLocation)
    }
}

/// The probes' back-off cap and proxy, as the flags, serve's file and the environment give them.
@Suite("Probe options: back-off cap and proxy")
struct ProbeSettingsTests {
    static let probe = ["--internet", "--probe", "http://192.0.2.10/generate_204"]

    @Test("watch and serve cap the back-off at 30 s, wait at 1 s; the flag, else serve's file, changes it")
    func backOffCap() throws {
        let watch = try #require(try NetreachCommand.parseAsRoot(["watch"] + Self.probe) as? WatchCommand)
        #expect(try watch.internetOptions.configuration().maximumBackOff == .seconds(30))
        let flagged = try #require(
            try NetreachCommand.parseAsRoot(["watch", "--max-probe-backoff", "2m"] + Self.probe) as? WatchCommand)
        #expect(try flagged.internetOptions.configuration().maximumBackOff == .seconds(120))
        let wait = try #require(try NetreachCommand.parseAsRoot(["wait"] + Self.probe) as? WaitCommand)
        #expect(
            try wait.internetOptions.configuration(fallbackMaximumBackOff: .seconds(1)).maximumBackOff == .seconds(1))

        let file = try ServeConfigFile.parse("max_probe_backoff: 5s\n", path: "f.yaml")
        let serve = try #require(try NetreachCommand.parseAsRoot(["serve"] + Self.probe) as? ServeCommand)
        #expect(try serve.internetConfiguration(file: file).maximumBackOff == .seconds(5))
        #expect(try serve.internetConfiguration(file: ServeConfigFile()).maximumBackOff == .seconds(30))
        let serveFlag = try #require(
            try NetreachCommand.parseAsRoot(["serve", "--max-probe-backoff", "10s"] + Self.probe) as? ServeCommand)
        #expect(try serveFlag.internetConfiguration(file: file).maximumBackOff == .seconds(10), "the flag wins")
        #expect(throws: (any Error).self) {
            _ = try NetreachCommand.parseAsRoot(["watch", "--max-probe-backoff", "500ms"] + Self.probe)
        }
        #expect(throws: (any Error).self) {
            _ = try NetreachCommand.parseAsRoot(["watch", "--max-probe-backoff", "5s"])
        }
    }

    @Test("The probes read the proxy as get does: the environment as curl reads it, --proxy over it, '' for none")
    func proxyAsGetReadsIt() throws {
        let check = try #require(
            try NetreachCommand.parseAsRoot(["check", "--probe", "http://192.0.2.10/generate_204"]) as? CheckCommand)
        let environment = [
            "http_proxy": "http://10.0.0.1:3128", "HTTP_PROXY": "http://10.9.9.9:1", "no_proxy": "10.1.0.0/16",
        ]
        let settings = check.probing.transportSettings(environment: environment).proxy
        #expect(settings.proxy(forScheme: "http", host: "192.0.2.10")?.absoluteString == "http://10.0.0.1:3128")
        #expect(settings.proxy(forScheme: "http", host: "10.1.2.3") == nil, "no_proxy's CIDR, as curl 7.88")
        #expect(
            ProbeOptionsReading.proxy(["check", "--probe", "http://h/", "--proxy", ""], environment)
                .proxy(forScheme: "http", host: "h") == nil)
        #expect(
            ProbeOptionsReading.proxy(["check", "--probe", "http://h/", "--proxy", "10.0.0.2:8080"], [:])
                .proxy(forScheme: "http", host: "h")?.absoluteString == "http://10.0.0.2:8080")
        #expect(throws: (any Error).self) {
            _ = try NetreachCommand.parseAsRoot(["check", "--probe", "http://h/", "--proxy", "socks5://10.0.0.1"])
        }
        // get reads them the same way.
        let get = try #require(try NetreachCommand.parseAsRoot(["get", "http://h/"]) as? GetCommand)
        #expect(get.connection.settings(environment: environment).proxy == settings)
    }
}

private enum ProbeOptionsReading {
    static func proxy(_ arguments: [String], _ environment: [String: String]) -> ProxySettings {
        let check = try? NetreachCommand.parseAsRoot(arguments) as? CheckCommand
        return check?.probing.transportSettings(environment: environment).proxy ?? ProxySettings(noProxy: ["never"])
    }
}
