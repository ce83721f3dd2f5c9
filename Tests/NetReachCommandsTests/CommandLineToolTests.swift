import Foundation
import NetReachTestSupport
import Testing

@testable import NetReachCommands

#if canImport(Glibc)
import Glibc
#endif

/// `netreach` is one executable with every command, one exit-status table, a version, completion
/// scripts and help that fits 80 columns. Runs the built executable; no root needed.
@Suite("netreach, the one tool", .offPool)
struct CommandLineToolTests {
    static let commands = ExitStatusTable.commandNames

    @Test func theTableNamesEverySubcommand() {
        let names = NetreachCommand.configuration.subcommands.map { $0.configuration.commandName ?? "" }
        #expect(names == ExitStatusTable.commandNames)
        let named = Set(ExitStatusTable.entries.flatMap(\.commands))
        #expect(named.isSubset(of: Set(names)), "the table names a command that does not exist: \(named)")
    }

    @Test func everyCommandIsInTheOneExecutable() throws {
        let help = try Self.run(["--help"])
        #expect(help.status == 0, "\(help.error)")
        for command in Self.commands {
            #expect(help.output.contains("\n  \(command) "), "\(command) is missing from the root help: \(help.output)")
            let own = try Self.run([command, "--help"])
            #expect(own.status == 0, "\(command) --help: \(own.error)")
            #expect(own.output.contains("USAGE: netreach \(command)"), "\(own.output)")
        }
    }

    @Test func theExecutableNeedsNeitherFoundationNetworkingNorLibcurl() throws {
        let binary = try Data(contentsOf: NetreachProcess.executable())
        #expect(binary.range(of: Data("libFoundationNetworking.so".utf8)) == nil)
        #expect(binary.range(of: Data("libcurl.so".utf8)) == nil)
    }

    @Test(arguments: ["", "status", "watch", "wait", "get", "check", "condition"])
    func helpFitsEightyColumns(_ command: String) throws {
        let help = try Self.run(command.isEmpty ? ["--help"] : [command, "--help"])
        #expect(help.status == 0, "\(help.error)")
        let long = help.output.split(separator: "\n").filter { $0.count > 80 }
        #expect(long.isEmpty, "lines over 80 columns in `netreach \(command) --help`: \(long)")
    }

    @Test func versionIsPrintedAndIsTheJSONsVersion() throws {
        let version = try Self.run(["--version"])
        #expect(version.status == 0)
        #expect(version.output.trimmingCharacters(in: .whitespacesAndNewlines) == NetreachCommand.version)
        #expect(NetreachCommand.version.wholeMatch(of: /[0-9]+\.[0-9]+\.[0-9]+/) != nil)
        let status = try Self.run(["status", "--json"])
        if status.status == 0 {
            #expect(status.output.contains("\"version\":\"\(NetreachCommand.version)\""), "\(status.output)")
        }
    }

    @Test(arguments: ["bash", "zsh", "fish"])
    func completionScripts(_ shell: String) throws {
        let script = try Self.run(["--generate-completion-script", shell])
        #expect(script.status == 0, "\(script.error)")
        for command in Self.commands {
            #expect(script.output.contains(command), "\(shell) completion lacks \(command)")
        }
        #expect(script.output.contains("wait-for-connectivity"), "\(shell) completion lacks get's options")
    }

    /// One request needs one event loop: `get` must not start NIO's shared group with a thread
    /// per core (64 on a 64-core server) before it sends anything.
    @Test func getRunsOneEventLoopThread() async throws {
        // A listener that never accepts: the kernel completes the handshake, the request waits in
        // the socket's buffer and `get` waits for an answer, its event loop group running.
        let (listener, port) = try FreePort.listener()
        defer { close(listener) }
        let get = try NetreachProcess.start(["get", "-q", "--max-time", "60", "http://127.0.0.1:\(port)/"])
        defer { get.kill() }
        // The listener turns readable when the connection is queued: by then the loop that made
        // it runs, and so does every other one the group started.
        var ready = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
        try #require(poll(&ready, 1, 60_000) == 1, "get never connected: \(get.diagnosis())")
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(get.pid)/task")) ?? []
        let names = tasks.compactMap {
            try? String(contentsOfFile: "/proc/\(get.pid)/task/\($0)/comm", encoding: .utf8)
        }
        #expect(names.count(where: { $0.hasPrefix("NIO-SGLTN-") }) == 1, "threads: \(names)")
    }

    // MARK: One exit-status table

    @Test func everyStatusHasOneMeaning() {
        let statuses = ExitStatusTable.entries.map(\.status)
        #expect(Set(statuses).count == statuses.count, "a status is listed twice: \(statuses)")
        #expect(statuses == statuses.sorted())
    }

    @Test func theRootHelpListsEveryStatusOnce() throws {
        let help = try Self.run(["--help"]).output
        for entry in ExitStatusTable.entries {
            let lead = "\n  \(entry.status) "
            #expect(
                help.components(separatedBy: lead).count == 2,
                "status \(entry.status) is not listed exactly once: \(help)")
        }
    }

    @Test(arguments: ["status", "watch", "wait", "get", "check", "condition"])
    func eachCommandsHelpListsItsStatusesFromTheTable(_ command: String) throws {
        let help = try Self.run([command, "--help"]).output
        for entry in ExitStatusTable.entries {
            let listed = help.contains("\n  \(entry.status) ")
            #expect(
                listed == entry.applies(to: command),
                "`\(command) --help` \(listed ? "lists" : "lacks") status \(entry.status): \(help)")
        }
    }

    @Test func theReadmeAndTheSchemaShowTheSameTable() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        #expect(
            readme.contains(ExitStatusTable.markdown),
            "README's exit-status table differs from ExitStatusTable.markdown:\n\(ExitStatusTable.markdown)")

        let schemaData = try Data(contentsOf: root.appendingPathComponent("Docs/netreach-json.schema.json"))
        let schema = try #require(try JSONSerialization.jsonObject(with: schemaData) as? [String: Any])
        let definitions = try #require(schema["$defs"] as? [String: Any])
        let exitStatus = try #require(definitions["exitStatus"] as? [String: Any])
        let listed = try #require(exitStatus["enum"] as? [Int])
        #expect(listed == ExitStatusTable.entries.map { Int($0.status) })
        let description = try #require(exitStatus["description"] as? String)
        for entry in ExitStatusTable.entries {
            #expect(
                description.contains("\(entry.status) ") || description.contains("\(entry.status)-"),
                "the schema does not describe \(entry.status)")
        }
    }

    @Test func anUnknownOptionIsAUsageErrorNamingIt() throws {
        let bad = try Self.run(["get", "--no-such-flag", "http://127.0.0.1:9/"])
        #expect(bad.status == 64, "\(bad.error)")
        #expect(bad.error.contains("--no-such-flag"))
    }

    /// `netreach arguments…`, with the suites' own `run` (GetDownloadTests.swift).
    private static func run(_ arguments: [String]) throws -> RunResult {
        try NetReachCommandsTests.run(netreachPath(), arguments)
    }
}
