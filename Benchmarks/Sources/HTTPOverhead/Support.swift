import Dispatch
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Prints `message` on stderr and exits; the server child sees its stdin close and exits too.
func fail(_ message: String, status: Int32 = 1) -> Never {
    FileHandle.standardError.write(Data("HTTPOverhead: \(message)\n".utf8))
    exit(status)
}

/// Progress for people, on stderr, so stdout carries only the table.
func log(_ message: String) {
    FileHandle.standardError.write(Data("HTTPOverhead: \(message)\n".utf8))
}

/// `CLOCK_MONOTONIC` in ns: every latency and wall time in this harness.
func monotonicNanoseconds() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
}

/// CPU time of this whole process (every thread), in ns.
func processCPUNanoseconds() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now)
    return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
}

/// Voluntary and involuntary context switches of every thread of this process so far.
func processContextSwitches() -> Int {
    var usage = rusage()
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    return usage.ru_nvcsw + usage.ru_nivcsw
}

/// The run's time limit. Loops check it between requests; a watchdog enforces it even while a
/// request hangs, killing the server and exiting with status 3.
struct Deadline: Sendable {
    let seconds: Int
    let endNanoseconds: Int64

    init(seconds: Int) {
        self.seconds = seconds
        endNanoseconds = monotonicNanoseconds() + Int64(seconds) * 1_000_000_000
    }

    var hasPassed: Bool { monotonicNanoseconds() >= endNanoseconds }

    /// Exits with a message if the deadline has passed; `doing` says where the run was.
    func check(_ doing: @autoclosure () -> String) {
        if hasPassed { fail("the \(seconds) s deadline passed while \(doing()); aborted", status: 3) }
    }

    func arm(killingOnExpiry serverPID: Int32) {
        let seconds = self.seconds
        DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(seconds)) {
            kill(serverPID, SIGTERM)
            fail("the \(seconds) s deadline passed (a request may be stuck); aborted", status: 3)
        }
    }
}

/// The 1-, 5- and 15-minute load averages.
struct LoadAverage: Codable, CustomStringConvertible {
    var one: Double
    var five: Double
    var fifteen: Double

    static func now() -> LoadAverage? {
        guard let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8) else { return nil }
        let fields = text.split(separator: " ").prefix(3).compactMap { Double($0) }
        guard fields.count == 3 else { return nil }
        return LoadAverage(one: fields[0], five: fields[1], fifteen: fields[2])
    }

    var description: String { String(format: "%.2f %.2f %.2f", one, five, fifteen) }
}

/// Which library code was measured.
struct Checkout {
    var commit: String
    /// Uncommitted changes under `Sources/` (0 means the commit is what ran).
    var changedFilesUnderSources: Int?

    /// Asks git about the repository around the current directory.
    static func current() -> Checkout {
        let commit = git(["rev-parse", "--short", "HEAD"])?.trimmingCharacters(in: .whitespacesAndNewlines)
        let root = git(["rev-parse", "--show-toplevel"])?.trimmingCharacters(in: .whitespacesAndNewlines)
        let changed = root.flatMap { git(["-C", $0, "status", "--short", "--", "Sources"]) }
            .map { $0.split(separator: "\n").count }
        return Checkout(commit: commit ?? "unknown", changedFilesUnderSources: changed)
    }

    private static func git(_ arguments: [String]) -> String? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["git"] + arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch { return nil }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { return nil }
        return String(decoding: data, as: UTF8.self)
    }
}

/// What the numbers were measured on.
enum Machine {
    static func describe() -> String {
        let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let model = cpuinfo.split(separator: "\n").first { $0.hasPrefix("model name") }
            .map { $0.split(separator: ":", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespaces) } ?? "" } ?? "unknown CPU"
        var name = utsname()
        uname(&name)
        let release = withUnsafeBytes(of: &name.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        return "\(ProcessInfo.processInfo.activeProcessorCount) cores, \(model), kernel \(release)"
    }
}
