import Foundation
import NetReach
import NetReachServe
import NetReachSystem
import NetReachTestSupport
import Testing

/// `serve --config FILE`: YAML or JSON, strict about its keys and types, with a reason that
/// names the file and the key; and how the file and the flags combine.
@Suite("serve --config")
struct ServeConfigTests {
    private let noFlags = ServeFlags()

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

    /// What YAMLReader adds: where the value is, numbers only in decimal and unquoted, YAML 1.1's
    /// booleans, and a key given twice refused.
    @Test(arguments: [
        (
            "to:\n  dns: {host: 10.0.0.53, port: \"53\"}\n",
            "f.yaml: to.dns.port: expected a whole number, found text (line 2, column 32)"
        ),
        (
            "max_connections: 0x10\n",
            "f.yaml: max_connections: expected a whole number, in decimal (YAML 1.1 and 1.2 read 0x10 differently), found text (line 1, column 18)"
        ),
        ("all_namespaces: 'true'\n", "f.yaml: all_namespaces: expected true or false, found text (line 1, column 17)"),
        (
            "namespaces: [blue, [red]]\n",
            "f.yaml: namespaces[1]: expected a namespace name, found a list (line 1, column 20)"
        ),
        (
            "to:\n  db: 10.0.0.5\n  db: 10.0.0.6\n",
            "f.yaml: not YAML or JSON: line 3, column 3: the key \"db\" is given twice in this mapping"
        ),
        (
            "to: {db: 10.0.0.5\n",
            "f.yaml: not YAML or JSON: line 1, column 5: the [ or { that starts here is never closed"
        ),
        (
            "listen: &l 127.0.0.1:9817\n",
            "f.yaml: not YAML or JSON: line 1, column 9: anchors (&name) are not supported"
        ),
        (
            "listen: 127.0.0.1:1\nnamespace: [blue]\n",
            "f.yaml: unknown key \"namespace\"; the keys are listen, to, namespaces, all_namespaces, ready_when, max_connections, idle_timeout, header_timeout, max_probe_backoff (line 2, column 1)"
        ),
    ])
    func aWrongValueIsNamedByKeyAndPlace(text: String, reason: String) {
        do {
            _ = try ServeConfigFile.parse(text, path: "f.yaml")
            Issue.record("read: \(text)")
        } catch {
            #expect("\(error)".hasPrefix(reason), "\(error)")
        }
    }

    @Test func yesAndNoAreBooleansAndAnythingElseThatIsNotNullIsText() throws {
        let file = try ServeConfigFile.parse(
            "all_namespaces: yes\nlisten: 9817\nready_when: ~\nidle_timeout: 90\nnamespaces: [1, true]\n", path: "f")
        #expect(file.allNamespaces == true)
        #expect(file.listen == "9817" && file.readyWhen == nil && file.idleTimeout == "90")
        #expect(file.namespaces == ["1", "true"])
        #expect(try ServeConfigFile.parse("~\n", path: "f") == ServeConfigFile())
        #expect(try ServeConfigFile.parse("---\n", path: "f") == ServeConfigFile())
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

    /// The start-only settings: each flag, else the file's key, else the default; a value that
    /// is not valid names the file and the key.
    @Test func listenAndConnectionSettingsTakeTheFlagElseTheFile() throws {
        let file = try ServeConfigFile.parse(
            "listen: '[::1]:9900'\nmax_connections: 50\nidle_timeout: 1m30s\nheader_timeout: 500ms\n", path: "f")
        let fromFile = try noFlags.configuration(file: file, path: "f", version: "1")
        #expect(fromFile.host == "::1" && fromFile.port == 9900)
        #expect(fromFile.maxConnections == 50)
        #expect(fromFile.idleTimeout == .seconds(90) && fromFile.headerTimeout == .milliseconds(500))
        #expect(fromFile.version == "1")

        var flags = noFlags
        flags.listen = "127.0.0.1:0"
        flags.maxConnections = 7
        flags.idleTimeout = .seconds(5)
        flags.eventKeepAlive = .seconds(1)
        let fromFlags = try flags.configuration(file: file, path: "f", version: "1")
        #expect(fromFlags.host == "127.0.0.1" && fromFlags.port == 0)
        #expect(fromFlags.maxConnections == 7 && fromFlags.idleTimeout == .seconds(5))
        #expect(fromFlags.headerTimeout == .milliseconds(500), "the file's, no flag given")
        #expect(fromFlags.keepAliveInterval == .seconds(1))

        let neither = try noFlags.configuration(file: ServeConfigFile(), path: nil, version: "1")
        let defaults = ServeConfiguration(version: "1")
        #expect(neither.host == defaults.host && neither.port == defaults.port && neither.maxConnections == nil)
        #expect(neither.idleTimeout == defaults.idleTimeout && neither.headerTimeout == defaults.headerTimeout)
    }

    @Test(arguments: [
        (
            "listen: fd00::7:9817",
            "f: listen fd00::7:9817: expected HOST:PORT, such as 127.0.0.1:8080 (IPv6 in brackets: [::1]:8080)."
        ),
        ("listen: 127.0.0.1:70000", "f: listen 127.0.0.1:70000: expected HOST:PORT with a port from 0 to 65535."),
        ("max_connections: 0", "f: max_connections must be at least 1."),
        (
            "idle_timeout: soon",
            "f: idle_timeout: expected a duration such as 30s, 500ms, 2m, 1h, 1.5s, 1m30s, 2m500ms, or a number of seconds."
        ),
        ("header_timeout: 0s", "f: header_timeout must be longer than 0."),
    ])
    func aStartSettingTheFileGetsWrongIsRefusedNamingFileAndKey(text: String, message: String) throws {
        let file = try ServeConfigFile.parse(text, path: "f")
        expectRefusal(message) { _ = try noFlags.configuration(file: file, path: "f", version: "1") }
    }

    @Test func theProbesBackOffCapIsTheFilesWhenGivenAndAtLeastASecond() throws {
        #expect(try ServeFlags.maximumProbeBackOff(file: ServeConfigFile(), path: nil) == nil)
        let file = try ServeConfigFile.parse("max_probe_backoff: 2m\n", path: "f")
        #expect(try ServeFlags.maximumProbeBackOff(file: file, path: "f") == .seconds(120))
        let short = try ServeConfigFile.parse("max_probe_backoff: 500ms\n", path: "f")
        expectRefusal("f: max_probe_backoff must be at least 1s.") {
            _ = try ServeFlags.maximumProbeBackOff(file: short, path: "f")
        }
    }

    /// A reload reads the file again with the flags; a file that became invalid keeps nothing
    /// of it, says why, and throws (the reloader keeps what runs).
    @Test func aReloadReadsTheFileAgainWithTheFlags() throws {
        let directory = try TemporaryDirectory("netreach-serve-reload")
        defer { directory.remove() }
        let path = directory.path("serve.yaml")
        try "listen: 127.0.0.1:9900\nto: {db: 10.0.0.5}\n".write(toFile: path, atomically: true, encoding: .utf8)
        var flags = noFlags
        flags.destinations = ["web=10.0.0.6"]
        let said = Locked<[String]>([])
        let reload = flags.reloading(path: path, startListen: "127.0.0.1:9900") { line in
            said.withLock { $0.append(line) }
        }
        #expect(try reload().destinations.map(\.name) == ["db", "web"])
        #expect(said.withLock { $0 } == ["reloaded \(path): this namespace, 2 destinations, ready when started"])

        try "listen: 127.0.0.1:9901\nto: {dns: 10.0.0.53}\n".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(try reload().destinations.map(\.name) == ["dns", "web"])
        #expect(said.withLock { $0 }.contains("listen changes need a restart; still listening where it was"))

        try "to: {web: 10.0.0.7}\n".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(throws: ServeSettingsError("--to web=10.0.0.6: the name web is given twice (with \(path)).")) {
            try reload()
        }
        #expect(
            said.withLock { $0.last }?.hasPrefix("not reloaded, the running configuration is kept: --to web=") == true)
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
        #expect(throws: ServeSettingsError.self) { try flags.targets(file: namespaced, path: "f") }
        // This namespace is still watched with --all-namespaces: probes leave from it.
        flags.allNamespaces = true
        #expect(try flags.targets(file: ServeConfigFile()).followsNamespaceDirectory)
    }
}

/// Expects `body` to throw a ServeSettingsError saying exactly `message`.
private func expectRefusal(
    _ message: String, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> Void
) {
    do {
        try body()
        Issue.record("not refused; expected: \(message)", sourceLocation: sourceLocation)
    } catch let error as ServeSettingsError {
        #expect(error.description == message, sourceLocation: sourceLocation)
    } catch {
        Issue.record("\(error)", sourceLocation: sourceLocation)
    }
}
