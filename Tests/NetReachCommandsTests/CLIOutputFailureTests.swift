import Foundation
import NetReachTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Output that could not be written is an error (exit 74, the reason on standard error), never
/// status 0 with the lines lost, and never death by SIGPIPE. Observing only, in this process's
/// own network namespace: no root needed, nothing sent anywhere.
@Suite("netreach CLI when standard output cannot be written", .offPool)
struct CLIOutputFailureTests {
    static let outputFailed: Int32 = 74

    /// Commands that print on standard output at once, whatever the network looks like (`wait`
    /// asks for loopback, which is up wherever tests run).
    static let printingCommands: [[String]] = [
        ["status"], ["status", "--json"],
        ["watch"], ["watch", "--json"],
        ["wait", "--interface-type", "loopback", "--timeout", "0"],
        ["--help"], ["wait", "--help"],
    ]

    static let brokenOutputs: [(ChildProcess.Output, String)] = [
        (.devFull, "No space left on device"),
        (.closed, "it is closed"),
        (.pipeWithoutReader, "its reader has gone"),
    ]

    @Test(arguments: printingCommands, brokenOutputs)
    func anUnwritableOutputExits74AndSaysWhy(_ command: [String], _ output: (ChildProcess.Output, String)) async throws
    {
        let run = try ChildProcess(NetreachProcess.executable().path, command, output: output.0)
        let status = await run.exitStatus()
        // 141 would be death by SIGPIPE (reset to its default for the child), 0 the old silence.
        #expect(status == Self.outputFailed, "standard error: \(run.standardError)")
        #expect(
            run.standardError.contains("netreach: cannot write the output: standard output: "),
            "standard error: \(run.standardError)")
        #expect(run.standardError.contains(output.1), "standard error: \(run.standardError)")
    }

    /// `get` writes the body, then (with --json) its lines: either lost is 74, not "200 OK" and 0.
    /// The server listens on the lab's own loopback; `get` runs inside the lab.
    @Test(.needsNamespaceRoot, arguments: [[String](), ["--json"]])
    func getExits74WhenTheBodyOrItsLinesCannotBeWritten(_ flags: [String]) async throws {
        try await NetnsLab.withLab(NetnsLab.Setup(defaultRoutes: false)) { lab in
            let server = try NamespaceHTTPServer(namespace: lab.name, address: "127.0.0.1")
            defer { server.stop() }
            let run = try ChildProcess(
                LabCommand.ipExecutable,
                ["netns", "exec", lab.name, try NetreachProcess.executable().path, "get"] + flags
                    + ["--timeout", "20s", "http://127.0.0.1:\(server.port)/hello"],
                output: .devFull)
            let status = await run.exitStatus()
            #expect(status == Self.outputFailed, "standard error: \(run.standardError)")
            #expect(
                run.standardError.contains("netreach: cannot write the output: standard output: No space"),
                "\(run.standardError)")
            #expect(!run.standardError.contains("standard output: standard output"), "\(run.standardError)")
            #expect(run.standardError.contains("No space left on device"), "\(run.standardError)")
            #expect(!run.standardError.contains("200 OK"), "no success summary for a lost body: \(run.standardError)")
        }
    }

    @Test func waitQuietWritesNothingSoAFullOutputIsNoError() async throws {
        let run = try ChildProcess(
            NetreachProcess.executable().path,
            ["wait", "--interface-type", "loopback", "--timeout", "0", "--quiet"], output: .devFull)
        #expect(await run.exitStatus() == 0, "standard error: \(run.standardError)")
    }

    /// The path rarely changes, so only noticing the hang-up itself (not a failed write) ends
    /// `watch` here.
    @Test(arguments: [["watch"], ["watch", "--json"]])
    func watchExits74SoonAfterItsReaderGoesAway(_ command: [String]) async throws {
        let run = try ChildProcess(NetreachProcess.executable().path, command, output: .collected)
        let first = await run.nextLine()
        #expect(first?.isEmpty == false, "no first line; standard error: \(run.standardError)")
        run.closeOutput()
        let status = await run.exitStatus()
        #expect(status == Self.outputFailed, "standard error: \(run.standardError)")
        #expect(run.standardError.contains("its reader has gone"), "standard error: \(run.standardError)")
    }

    /// `netreach watch | head -1` as scripts write it: it ends, and with pipefail the pipeline's
    /// status is watch's documented 74.
    @Test(
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/bin/bash"), "needs /bin/bash"),
        arguments: [["watch"], ["watch", "--json"]])
    func watchPipedIntoHeadEndsWithStatus74UnderPipefail(_ command: [String]) async throws {
        let script = #"set -o pipefail; "$0" "$@" | head -n 1"#
        let run = try ChildProcess(
            "/bin/bash", ["-c", script, NetreachProcess.executable().path] + command, output: .collected)
        let line = await run.nextLine()
        #expect(line?.isEmpty == false, "head printed nothing; standard error: \(run.standardError)")
        #expect(await run.exitStatus() == Self.outputFailed, "standard error: \(run.standardError)")
    }

    /// A write refused with EAGAIN (someone made the shared pipe non-blocking, and it is full) is
    /// retried once the reader makes room, not dropped.
    @Test func aFullNonBlockingPipeDelaysTheOutputButLosesNothing() async throws {
        let run = try ChildProcess(NetreachProcess.executable().path, ["status"], output: .fullNonBlockingPipe)
        // Time to start and meet the full pipe (the test passes either way; this makes it the
        // case it is about).
        await LabPoll.settle()
        var lines: [String] = []
        while let line = await run.nextLine() {
            if !line.isEmpty { lines.append(line) } // the newlines that filled the pipe first
        }
        #expect(await run.exitStatus() == 0, "standard error: \(run.standardError)")
        #expect(lines.first?.hasPrefix("status:") == true, "\(lines)")
        #expect(lines.last?.hasPrefix("gateways:") == true, "\(lines)")
    }

    @Test func helpToAWorkingPipeStillExitsZero() async throws {
        let run = try ChildProcess(NetreachProcess.executable().path, ["wait", "--help"], output: .collected)
        var lines: [String] = []
        while let line = await run.nextLine() { lines.append(line) }
        #expect(await run.exitStatus() == 0, "standard error: \(run.standardError)")
        #expect(lines.contains { $0.hasPrefix("USAGE: netreach wait") }, "\(lines)")
    }
}
