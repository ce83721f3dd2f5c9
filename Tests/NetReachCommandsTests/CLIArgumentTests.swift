import ArgumentParser
import Foundation
import NetReach
import NetReachTestSupport
import Testing

@testable import NetReachCommands

/// What `netreach` accepts on its command line: durations, options given once, and help that
/// documents the exit statuses and the JSON schema. Parsing only: no root, no network.
@Suite("netreach CLI arguments")
struct CLIArgumentTests {
    // MARK: Durations

    @Test(arguments: [
        // The forms that always worked.
        ("30s", Duration.seconds(30), "30s"), ("500ms", .milliseconds(500), "500ms"),
        ("2m", .seconds(120), "2m"), ("1h", .seconds(3600), "1h"), ("1.5s", .milliseconds(1500), "1.5s"),
        ("45", .seconds(45), "45s"), ("0", .zero, "0s"), ("0.25", .milliseconds(250), "0.25s"),
        (".5s", .milliseconds(500), ".5s"), ("2.", .seconds(2), "2s"),
        // Compound: units from the largest down.
        ("1m30s", .seconds(90), "1m30s"), ("1h2m3.5s", .milliseconds(3_723_500), "1h2m3.5s"),
        ("2m500ms", .milliseconds(120_500), "2m500ms"), ("1h30m", .seconds(5400), "1h30m"),
        ("1s500ms", .milliseconds(1500), "1s500ms"), ("1h1ms", .milliseconds(3_600_001), "1h1ms"),
        ("0m0s", .zero, "0m0s"), ("1.5m30s", .seconds(120), "1.5m30s"),
        ("596523h14m7s", .seconds(Int64(Int32.max)), "596523h14m7s"),
    ])
    func acceptsDurations(_ text: String, _ expected: Duration, _ description: String) throws {
        let parsed = try WaitDuration(parsing: text)
        #expect(parsed.duration == expected)
        #expect(parsed.description == description)
        #expect(try WaitTimeout(parsing: text) == .limited(parsed))
    }

    @Test func infinityIsAWaitTimeoutWithoutLimitButNotADuration() throws {
        let timeout = try WaitTimeout(parsing: "infinity")
        #expect(timeout == .unlimited)
        #expect(timeout.duration == nil)
        #expect(!timeout.isZero)
        #expect(timeout.description == "infinity")
        // `get` keeps a finite timeout: WaitDuration alone refuses the word.
        #expect(throws: ValidationError.self) { _ = try WaitDuration(parsing: "infinity") }
    }

    @Test(arguments: [
        ("-3", "cannot be negative"), ("-1m30s", "cannot be negative"), ("-0.5s", "cannot be negative"),
        ("2147483648", "at most 2147483647s"), ("596523h14m8s", "at most 2147483647s"),
        ("99999999999999999999999999h", "at most 2147483647s"),
        ("1e3", "expected a duration"), ("inf", "expected a duration"), ("nan", "expected a duration"),
        ("Infinity", "expected a duration"), ("infinite", "expected a duration"),
        ("1s2", "has no unit"), ("s", "expected a duration"), ("", "expected a duration"),
        ("ms", "expected a duration"), ("1..5s", "expected a duration"), ("0x10", "expected a duration"),
        ("+3s", "expected a duration"), (" 1s", "expected a duration"), ("1s ", "expected a duration"),
        ("1 s", "expected a duration"), ("30S", "unknown unit 'S'"), ("2d", "unknown unit 'd'"),
        ("30s1m", "from the largest down"), ("1m1m", "from the largest down"), ("500ms1s", "from the largest down"),
        ("1h.", "expected a duration"), ("1m30", "has no unit"), ("1_000", "expected a duration"),
    ])
    func refusesMalformedDurationsWithAClearMessage(_ text: String, _ fragment: String) {
        for parse in [{ _ = try WaitDuration(parsing: text) }, { _ = try WaitTimeout(parsing: text) }] {
            do {
                try parse()
                Issue.record("'\(text)' was accepted")
            } catch let error as ValidationError {
                #expect(error.message.contains(fragment), "'\(text)': \(error.message)")
            } catch {
                Issue.record("'\(text)': unexpected \(error)")
            }
        }
    }

    @Test func theWaitMessageOffersInfinityAndTheGetMessageDoesNot() {
        #expect(Self.message { _ = try WaitTimeout(parsing: "inf") }.hasSuffix("a number of seconds, or infinity."))
        #expect(
            Self.message { _ = try WaitDuration(parsing: "inf") }.hasSuffix("1m30s, 2m500ms, or a number of seconds."))
    }

    @Test func waitParsesTheTimeoutWithItsDefault() async throws {
        #expect(try await Self.wait([]).timeout == .limited(.seconds(30)))
        #expect(try await Self.wait(["--timeout", "1m30s"]).timeout.duration == .seconds(90))
        #expect(try await Self.wait(["--timeout", "infinity"]).timeout == .unlimited)
        #expect(try await Self.wait(["--timeout=2m500ms"]).timeout.duration == .milliseconds(120_500))
        #expect(try await Self.wait(["--interface-type", "wifi"]).interfaceType == .wifi)
        #expect(try await Self.wait([]).interfaceType == nil)
        #expect(try await Self.wait(["--namespace", "blue"]).monitorOptions.namespace == "blue")
    }

    // MARK: Options given once

    @Test(arguments: [
        (["wait", "--timeout", "1s", "--timeout", "2s"], "--timeout was given 2 times (1s, 2s)"),
        (["wait", "--timeout=1s", "--timeout", "1s"], "--timeout was given 2 times (1s, 1s)"),
        (["wait", "--timeout", "infinity", "--timeout", "0"], "--timeout was given 2 times (infinity, 0s)"),
        (
            ["wait", "--interface-type", "wifi", "--interface-type", "cellular"],
            "--interface-type was given 2 times (wifi, cellular)"
        ),
        (["wait", "--namespace", "a", "--namespace", "b"], "--namespace was given 2 times (a, b)"),
        (
            ["status", "--namespace", "a", "--namespace", "b", "--namespace", "c"],
            "--namespace was given 3 times (a, b, c)"
        ),
        (["watch", "--json", "--namespace", "a", "--namespace", "a"], "--namespace was given 2 times (a, a)"),
    ])
    func aRepeatedSingleValuedOptionIsAUsageError(_ arguments: [String], _ message: String) async {
        do {
            _ = try NetreachCommand.parseAsRoot(arguments)
            Issue.record("\(arguments) was accepted")
        } catch {
            #expect(NetreachCommand.exitCode(for: error) == .validationFailure) // 64
            #expect(NetreachCommand.message(for: error) == message + "; give it once.")
        }
    }

    @Test func anOptionCheckedAsTheCommandRunsReadsAsAParseTimeUsageError() async {
        // watch checks --internet with --to in validate(), while parsing; get checks its options as
        // it runs. Both must print ArgumentParser's words: the message, the usage, the help hint.
        let message = "--internet judges the path to the internet; it cannot be combined with --to."
        do {
            _ = try NetreachCommand.parseAsRoot([
                "watch", "--internet", "--probe", "http://127.0.0.1:9/", "--to", "127.0.0.1",
            ])
            Issue.record("--internet with --to was accepted")
        } catch {
            #expect(
                NetreachCommand.usageError(ValidationError(message), in: WatchCommand.self)
                    == NetreachCommand.fullMessage(for: error))
        }
        #expect(
            NetreachCommand.usageError(ValidationError("--retries must be between 0 and 10."), in: GetCommand.self)
                == """
                Error: --retries must be between 0 and 10.
                Usage: netreach get [<options>] <url>
                  See 'netreach get --help' for more information.
                """)
    }

    @Test func anEmptyNamespaceIsStillAUsageError() async {
        do {
            _ = try NetreachCommand.parseAsRoot(["status", "--namespace", ""])
            Issue.record("an empty --namespace was accepted")
        } catch {
            #expect(NetreachCommand.exitCode(for: error) == .validationFailure)
            #expect(NetreachCommand.message(for: error).contains("--namespace needs"))
        }
    }

    // MARK: Help

    @Test(arguments: [["status"], ["watch"], ["wait"]])
    func helpDocumentsExitStatus74AndTheUsageDoesNotSuggestRepeatingOptions(_ command: [String]) async {
        let help = await Self.help(command)
        #expect(help.contains("  74  standard output could not be written"), "\(help)")
        #expect(help.contains("  64  usage error"), "\(help)")
        // The usage block: its first line, and the --internet form's on the next (watch, wait).
        let usage = help.split(separator: "\n", omittingEmptySubsequences: false)
            .drop { !$0.hasPrefix("USAGE: ") }.prefix { !$0.isEmpty }.joined(separator: "\n")
        #expect(usage.hasPrefix("USAGE: netreach \(command[0]) "), "\(usage)")
        // Only --probe can be given more than once.
        #expect(!usage.replacingOccurrences(of: "[--probe <url[=expect]> ...]", with: "").contains("..."), "\(usage)")
        // The written-out usage line names every option the OPTIONS section lists.
        let options = help.split(separator: "\n").drop { $0 != "OPTIONS:" }
            .compactMap { line -> String? in
                // An option's own line starts with it; continuation lines start with words.
                guard line.drop(while: { $0 == " " }).hasPrefix("-"),
                    let name = line.split(separator: " ").first(where: { $0.hasPrefix("--") })
                else { return nil }
                return String(name.trimmingCharacters(in: CharacterSet(charactersIn: ",")))
            }
            .filter { $0 != "--help" && $0 != "--version" }
        #expect(!options.isEmpty)
        for option in options {
            #expect(usage.contains("[\(option)") || usage.contains(" \(option) "), "\(option) is missing from \(usage)")
        }
    }

    @Test(arguments: [["status"], ["watch"]])
    func jsonHelpNamesTheSchema(_ command: [String]) async {
        let help = await Self.help(command)
        let jsonLine = help.split(separator: "\n", omittingEmptySubsequences: false)
            .drop { !$0.contains("--json") }.prefix(3).joined(separator: " ")
        #expect(jsonLine.contains("Docs/netreach-json.schema.json"), "\(help)")
    }

    @Test func rootHelpListsEveryExitStatus() async {
        let help = await Self.help([])
        for entry in ExitStatusTable.entries {
            #expect(help.contains("\n  \(entry.status) "), "exit status \(entry.status) is missing: \(help)")
        }
    }

    @Test func waitHelpShowsCompoundDurationsAndInfinity() async {
        let help = await Self.help(["wait"])
        #expect(help.contains("1m30s"))
        #expect(help.contains("--timeout infinity"))
        #expect(help.contains("infinity waits without limit"))
    }

    // MARK: Helpers

    static func wait(_ arguments: [String]) async throws -> WaitCommand {
        let command = try NetreachCommand.parseAsRoot(["wait"] + arguments)
        return try #require(command as? WaitCommand)
    }

    /// The help text `netreach COMMAND --help` prints, at a fixed width.
    static func help(_ command: [String]) async -> String {
        let types: [String: any ParsableCommand.Type] = [
            "status": StatusCommand.self, "watch": WatchCommand.self, "wait": WaitCommand.self,
        ]
        guard let name = command.first else { return NetreachCommand.helpMessage(columns: 100) }
        guard let type = types[name] else {
            Issue.record("no command \(name)")
            return ""
        }
        return NetreachCommand.helpMessage(for: type, columns: 100)
    }

    static func message(_ parse: () throws -> Void) -> String {
        do {
            try parse()
            return ""
        } catch let error as ValidationError {
            return error.message
        } catch {
            return "\(error)"
        }
    }
}
