import Foundation
import NetReachTestSupport
import Testing

@testable import NetReach

#if canImport(Glibc)
import Glibc
#endif

/// The `netreach` executable driven end to end, as scripts and containers use it (README "CLI"):
/// exit 0 on success, 1 when `wait` times out (reason on standard error), 2 when the monitor cannot
/// observe the system.
@Suite("netreach CLI end to end (integration)", .offPool, .needsNamespaceRoot)
struct CLIEndToEndTests {
    @Test func watchJSONFollowsRouteChangesAndExitsZeroOnSIGTERM() async throws {
        try await NetnsLab.withLab { lab in
            let watch = try NetreachProcess.start(["watch", "--json", "--namespace", lab.name])
            defer { watch.kill() }
            await LabPoll.until("watch prints the current path") { watch.outputLines.count >= 1 }

            try await lab.deleteDefaultRoute()
            await LabPoll.until("watch prints unsatisfied(noDefaultRoute)") { watch.outputLines.count >= 2 }
            try await lab.addDefaultRoute()
            await LabPoll.until("watch prints satisfied again") { watch.outputLines.count >= 3 }
            await LabPoll.settle()

            watch.signal(SIGTERM)
            let status = await watch.exitStatus()
            #expect(status == 0, "standard error: \(watch.standardError)")
            let paths = try watch.outputLines.map(Self.decodePath)
            #expect(paths.map(PathStep.init) == [.satisfied, .unsatisfied(.noDefaultRoute), .satisfied])
            #expect(paths.first?.isLabIPv4Satisfied == true)
            #expect(paths.first == PathMonitor.freshPath(in: lab))
            #expect(watch.outputLines.allSatisfy { $0.contains("\"timestamp\"") })
        }
    }

    @Test func statusJSONIsTheMonitorsPath() async throws {
        try await NetnsLab.withLab { lab in
            let status = try NetreachProcess.start(["status", "--json", "--namespace", lab.name])
            defer { status.kill() }
            #expect(await status.exitStatus() == 0, "standard error: \(status.standardError)")
            #expect(status.outputLines.count == 1)
            let path = try Self.decodePath(status.outputLines.first ?? "")
            #expect(path == PathMonitor.freshPath(in: lab))
        }
    }

    @Test func waitExitsZeroAtOnceWhenAlreadySatisfied() async throws {
        try await NetnsLab.withLab { lab in
            let started = ContinuousClock.now
            let wait = try NetreachProcess.start(["wait", "--timeout", "600s", "--namespace", lab.name])
            defer { wait.kill() }
            let status = await wait.exitStatus(timeout: .seconds(90))
            let elapsed = ContinuousClock.now - started
            #expect(status == 0, "standard error: \(wait.standardError)")
            // Start-up included; anything near the 600 s timeout would mean it waited for nothing.
            #expect(elapsed < .seconds(60), "took \(elapsed) with --timeout 600s")
            #expect(wait.outputLines.first?.hasPrefix("satisfied") == true, "\(wait.outputLines)")
        }
    }

    @Test func waitStartedWithoutARouteExitsZeroSoonAfterTheRouteIsAdded() async throws {
        try await NetnsLab.withLab(.init(defaultRoutes: false)) { lab in
            let wait = try NetreachProcess.start(["wait", "--timeout", "600s", "--namespace", lab.name])
            defer { wait.kill() }
            await LabPoll.settle(.milliseconds(500))
            #expect(wait.isRunning, "wait exited before the route existed: \(wait.standardError)")

            let routeAdded = ContinuousClock.now
            try await lab.addDefaultRoute()
            let status = await wait.exitStatus(timeout: .seconds(90))
            let elapsed = ContinuousClock.now - routeAdded
            #expect(status == 0, "standard error: \(wait.standardError)")
            // On the change, not at the 600 s timeout (the latency target is measured in Benchmarks).
            #expect(elapsed < .seconds(60), "exited \(elapsed) after the route was added")
            #expect(wait.outputLines.first?.hasPrefix("satisfied") == true, "\(wait.outputLines)")
        }
    }

    @Test func waitTimesOutWithStatusOneAndSaysWhy() async throws {
        try await NetnsLab.withLab(.init(defaultRoutes: false)) { lab in
            let started = ContinuousClock.now
            let wait = try NetreachProcess.start(["wait", "--timeout", "1s", "--namespace", lab.name])
            defer { wait.kill() }
            let status = await wait.exitStatus()
            let elapsed = ContinuousClock.now - started
            #expect(status == 1)
            #expect(elapsed >= .milliseconds(900), "gave up after \(elapsed)")
            #expect(wait.standardError.contains("no default route"), "standard error: \(wait.standardError)")
            #expect(wait.outputLines.isEmpty)
        }
    }

    @Test func waitWithoutATimeLimitExitsZeroWhenTheRouteComes() async throws {
        try await NetnsLab.withLab(.init(defaultRoutes: false)) { lab in
            let wait = try NetreachProcess.start(["wait", "--timeout", "infinity", "--namespace", lab.name])
            defer { wait.kill() }
            await LabPoll.settle(.milliseconds(500))
            #expect(wait.isRunning, "wait exited before the route existed: \(wait.standardError)")
            try await lab.addDefaultRoute()
            #expect(await wait.exitStatus(timeout: .seconds(20)) == 0, "standard error: \(wait.standardError)")
            #expect(wait.outputLines.first?.hasPrefix("satisfied") == true, "\(wait.outputLines)")
        }
    }

    /// A monitor that can no longer observe its namespace will never see the route come: `wait`
    /// says why and exits 2 at once, not at (or, with `infinity`, never after) its timeout.
    @Test func waitExitsTwoWhenItsNamespaceIsDeleted() async throws {
        try await NetnsLab.withLab(.init(defaultRoutes: false)) { lab in
            let wait = try NetreachProcess.start(["wait", "--timeout", "infinity", "--namespace", lab.name])
            defer { wait.kill() }
            await LabPoll.settle(.milliseconds(500))
            #expect(wait.isRunning, "wait exited early: \(wait.standardError)")
            try await LabCommand.ip(["netns", "del", lab.name])
            #expect(await wait.exitStatus(timeout: .seconds(20)) == 2, "standard error: \(wait.standardError)")
            #expect(wait.standardError.contains("netreach: cannot observe the network: "), "\(wait.standardError)")
            #expect(wait.standardError.contains(lab.namespace.path), "\(wait.standardError)")
            #expect(wait.outputLines.isEmpty)
        }
    }

    static func decodePath(_ line: String) throws -> NetworkPath {
        try JSONDecoder().decode(NetworkPath.self, from: Data(line.utf8))
    }
}

/// A namespace that does not exist needs no root to be refused.
@Suite("netreach CLI with a bad namespace (integration)", .offPool)
struct CLIBadNamespaceTests {
    @Test(arguments: [["status"], ["status", "--json"], ["watch", "--json"], ["wait", "--timeout", "1s"]])
    func aMissingNamespaceExitsTwoAndNamesIt(_ command: [String]) async throws {
        let name = "nr-missing-\(UInt32.random(in: 0 ... .max))"
        let run = try NetreachProcess.start(command + ["--namespace", name])
        defer { run.kill() }
        let status = await run.exitStatus()
        #expect(status == 2, "standard error: \(run.standardError)")
        #expect(run.standardError.contains("/var/run/netns/\(name)"), "standard error: \(run.standardError)")
        #expect(run.outputLines.isEmpty)
    }
}

/// Usage errors are refused before anything is observed: exit 64, the reason on standard error.
@Suite("netreach CLI usage errors", .offPool)
struct CLIUsageErrorTests {
    @Test(arguments: [
        (["wait", "--timeout", "1s", "--timeout", "2s"], "--timeout was given 2 times (1s, 2s)"),
        (["wait", "--interface-type", "wifi", "--interface-type", "cellular"], "--interface-type was given 2 times"),
        (["status", "--namespace", "a", "--namespace", "b"], "--namespace was given 2 times (a, b)"),
        (["watch", "--namespace", "a", "--namespace", "b"], "--namespace was given 2 times (a, b)"),
        (["wait", "--timeout", "1s2"], "'2' at the end has no unit"),
        (["wait", "--timeout", "inf"], "or infinity"),
        (["wait", "--timeout", "-1m"], "cannot be negative"),
    ])
    func exitsWithStatus64AndSaysWhy(_ arguments: [String], _ message: String) async throws {
        let run = try NetreachProcess.start(arguments)
        defer { run.kill() }
        #expect(await run.exitStatus() == 64, "standard error: \(run.standardError)")
        #expect(run.standardError.contains(message), "standard error: \(run.standardError)")
        #expect(run.outputLines.isEmpty)
    }
}

// MARK: Running the executable

/// Runs the `netreach` executable this test target was built with.
enum NetreachProcess {
    /// Starts `netreach ARGUMENTS...`, its output collected as it arrives; with `namespace`, as
    /// `ip netns exec NAMESPACE netreach ...`, so the whole process (its monitor and its sockets)
    /// lives in that namespace.
    static func start(_ arguments: [String], inNamespace namespace: String? = nil) throws -> ChildProcess {
        let executable = try executable().path
        if let namespace {
            return try ChildProcess(LabCommand.ipExecutable, ["netns", "exec", namespace, executable] + arguments)
        }
        return try ChildProcess(executable, arguments)
    }

    /// The `netreach` built as a dependency of this test target: next to the test bundle in the
    /// build products directory, whatever the scratch path; else `.build/debug/netreach`.
    static func executable() throws -> URL {
        var directories: [URL] = []
        if let executable = Bundle.main.executableURL { directories.append(executable.deletingLastPathComponent()) }
        directories.append(Bundle.main.bundleURL)
        if let first = CommandLine.arguments.first {
            directories.append(URL(fileURLWithPath: first).absoluteURL.deletingLastPathComponent())
        }
        for start in directories {
            var directory = start.standardizedFileURL
            for _ in 0..<4 {
                let candidate = directory.appendingPathComponent("netreach")
                if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
                directory.deleteLastPathComponent()
            }
        }
        let packageRoot = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let fallback = packageRoot.appendingPathComponent(".build/debug/netreach")
        guard FileManager.default.isExecutableFile(atPath: fallback.path) else {
            throw LabError.systemCall(
                "locate netreach", "not next to \(directories.map(\.path)) nor at \(fallback.path)")
        }
        return fallback
    }
}
