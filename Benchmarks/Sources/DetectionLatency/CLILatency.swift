import BenchStatistics
import CNetReachBench
import Foundation

// `netreach watch --json` against `ip -o monitor link address route rule`: the same changes, both readers
// started before, each child's standard output a pipe read by a thread of ours that timestamps the
// read which completes a line (CLOCK_MONOTONIC), so both pay the same pipe and the same wake-up.

/// The lines a child writes to its standard output, each with the time the read that completed it
/// returned.
final class LineReader: @unchecked Sendable {
    // @unchecked: `lines` and `ended` are only touched with `condition` locked.
    struct Line { let ts: Int64; let text: String }
    private let condition = NSCondition()
    private var lines: [Line] = []
    private var ended = false
    let process = Process()

    init(executable: String, arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.standardError
        try process.run()
        let fd = pipe.fileHandleForReading.fileDescriptor
        Thread { [self] in readLoop(fd) }.start()
    }

    private func readLoop(_ fd: Int32) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 16, alignment: 8)
        defer { buffer.deallocate() }
        var pending: [UInt8] = []
        while true {
            let n = read(fd, buffer.baseAddress, buffer.count)
            let ts = nrb_now_ns()
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            var complete: [Line] = []
            while let newline = pending.firstIndex(of: 10) {
                complete.append(Line(ts: ts, text: String(decoding: pending[..<newline], as: UTF8.self)))
                pending.removeSubrange(...newline)
            }
            if !complete.isEmpty {
                condition.lock(); lines += complete; condition.broadcast(); condition.unlock()
            }
        }
        condition.lock(); ended = true; condition.broadcast(); condition.unlock()
    }

    var count: Int { condition.lock(); defer { condition.unlock() }; return lines.count }
    var hasEnded: Bool { condition.lock(); defer { condition.unlock() }; return ended }

    /// The first line at index >= `start` that matches, waiting until `deadline` (monotonic ns).
    func waitForMatch(from start: Int, deadline: Int64, _ matches: (String) -> Bool) -> Line? {
        condition.lock()
        defer { condition.unlock() }
        var index = start
        while true {
            while index < lines.count {
                if matches(lines[index].text) { return lines[index] }
                index += 1
            }
            let remaining = deadline - nrb_now_ns()
            if remaining <= 0 || ended { return nil }
            _ = condition.wait(until: Date(timeIntervalSinceNow: Double(min(remaining, 50_000_000)) / 1e9))
        }
    }

    func stop() {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }
}

struct CLILatencyGroup: Codable {
    var kind: String
    var ipMonitor: Distribution
    var watch: Distribution
    var delta: Distribution   // per change: watch − ip monitor
    var p50Ratio: Double
}

struct CLILatency: Codable {
    var cli: String
    var flaps: Int
    var timeouts: Int
    var loadBefore: String
    var groups: [CLILatencyGroup]
    var watchCPUMicrosPerChange: Double
    var ipCPUMicrosPerChange: Double
    var watchTickCPUMicrosPerChange: Double
    var ipTickCPUMicrosPerChange: Double
    var watchLines: Int
    var ipLines: Int
}

extension Change {
    /// The `watch --json` line that shows this change (the same paths `netReachMatches` accepts).
    func watchMatches(_ line: String) -> Bool {
        let unsatisfied = line.contains("\"status\":\"unsatisfied\"")
        switch self {
        case .routeDelete, .linkUp: return unsatisfied && line.contains("\"unsatisfiedReason\":\"noDefaultRoute\"")
        case .routeAdd, .routeReadd, .ruleDelete: return line.contains("\"status\":\"satisfied\"")
        case .ruleAdd: return unsatisfied && line.contains("\"unsatisfiedReason\":\"routeRefused\"")
        case .linkDown: return unsatisfied && line.contains("\"unsatisfiedReason\":\"linkDown\"")
        case .probeAdd, .probeDelete: return false
        }
    }

    /// The `ip -o monitor` line that shows this change (the same facts `floorMatches` accepts:
    /// operational = UP + carrier, which ip prints as LOWER_UP without NO-CARRIER, and state UP).
    func ipMatches(_ line: String) -> Bool {
        func flags() -> [Substring]? {
            guard line.contains(": nb0"), let open = line.firstIndex(of: "<"), let close = line.firstIndex(of: ">"), open < close else { return nil }
            return line[line.index(after: open)..<close].split(separator: ",")
        }
        switch self {
        case .routeDelete: return line.contains("Deleted default via \(Namespaces.gateway) dev nb0")
        case .routeAdd, .routeReadd: return line.contains("default via \(Namespaces.gateway) dev nb0") && !line.contains("Deleted")
        case .linkDown:
            guard let flags = flags() else { return false }
            return !flags.contains("UP")
        case .linkUp:
            guard let flags = flags() else { return false }
            return flags.contains("UP") && flags.contains("LOWER_UP") && !flags.contains("NO-CARRIER") && line.contains(" state UP ")
        case .ruleAdd: return line.hasPrefix("\(Change.rulePriority):") && line.contains("lookup \(Change.ruleTable)")
        case .ruleDelete: return line.hasPrefix("Deleted \(Change.rulePriority):") && line.contains("lookup \(Change.ruleTable)")
        case .probeAdd, .probeDelete: return false
        }
    }
}

/// CPU time of a process: the sum of its live threads' schedstat run time (ns), and utime + stime
/// from /proc/PID/stat (clock ticks, includes exited threads).
func processCPU(_ pid: Int32) -> (schedNS: Int64, ticks: Int64) {
    var sched: Int64 = 0
    if let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") {
        for task in tasks {
            let text = readFile("/proc/\(pid)/task/\(task)/schedstat")
            sched += Int64(text.split(separator: " ").first ?? "") ?? 0
        }
    }
    let stat = readFile("/proc/\(pid)/stat")
    var ticks: Int64 = 0
    if let close = stat.lastIndex(of: ")") {
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // After "(comm)": state is field 3, utime field 14, stime field 15 → indices 11 and 12 here.
        if fields.count > 12 { ticks = (Int64(fields[11]) ?? 0) + (Int64(fields[12]) ?? 0) }
    }
    return (sched, ticks)
}

@MainActor func measureCLILatency(_ cli: String) -> CLILatency? {
    let loadBefore = readFile("/proc/loadavg")
    log("watch --json vs ip monitor: \(options.cliFlaps) route flaps + \(options.cliFlaps) link flaps (load \(loadBefore))")
    let watch: LineReader, ip: LineReader
    do {
        watch = try LineReader(executable: cli, arguments: ["watch", "--json", "--namespace", namespaces.name])
        ip = try LineReader(executable: "/usr/bin/env", arguments: ["ip", "-n", namespaces.name, "-o", "monitor", "link", "address", "route", "rule"])
    } catch {
        log("cannot start the CLI readers: \(error)")
        return nil
    }
    defer { watch.stop(); ip.stop() }
    // watch prints the current path first; ip prints nothing until a change.
    guard watch.waitForMatch(from: 0, deadline: nrb_now_ns() + 10_000_000_000, { _ in true }) != nil else {
        log("netreach watch printed nothing within 10 s")
        return nil
    }
    usleep(300_000)
    var timeouts = 0
    /// (ip monitor, watch) latencies in ns, or nil on a timeout.
    func change(_ change: Change) -> (Int64, Int64)? {
        let watchStart = watch.count, ipStart = ip.count
        sequence &+= 1
        let t0 = nrb_now_ns()
        let sent = change.send(sequence: sequence)
        guard sent == 0 else { fail("\(change.rawValue): sendmsg: \(String(cString: strerror(-sent)))") }
        let deadline = t0 + 3_000_000_000
        let w = watch.waitForMatch(from: watchStart, deadline: deadline, change.watchMatches)
        let i = ip.waitForMatch(from: ipStart, deadline: deadline, change.ipMatches)
        var error: Int32 = 0
        if nrb_drain_errors(issuer, &error) > 0 { fail("\(change.rawValue) refused by the kernel: \(String(cString: strerror(error)))") }
        guard let w, let i else {
            timeouts += 1
            log("CLI phase: timeout on \(change.rawValue): watch \(w != nil), ip monitor \(i != nil)")
            return nil
        }
        return (i.ts - t0, w.ts - t0)
    }
    // Warm-up (also makes sure ip monitor has joined its groups): not recorded.
    for _ in 0..<5 {
        for c in Change.measured { _ = change(c); pauseBetweenChanges() }
    }
    timeouts = 0
    var samples: [Change: [(Int64, Int64)]] = [:]
    let cpuStart = (processCPU(watch.process.processIdentifier), processCPU(ip.process.processIdentifier))
    var changes = 0
    for _ in 0..<options.cliFlaps {
        for c in Change.measured {
            changes += 1
            if let sample = change(c) { samples[c, default: []].append(sample) }
            pauseBetweenChanges()
        }
    }
    let cpuEnd = (processCPU(watch.process.processIdentifier), processCPU(ip.process.processIdentifier))
    let tick = 1e6 / Double(sysconf(Int32(_SC_CLK_TCK)))
    func group(_ kind: String, _ of: [Change]) -> CLILatencyGroup {
        let pairs = of.flatMap { samples[$0] ?? [] }
        let ipDist = Distribution(pairs.map(\.0)), watchDist = Distribution(pairs.map(\.1))
        return CLILatencyGroup(kind: kind, ipMonitor: ipDist, watch: watchDist, delta: Distribution(pairs.map { $0.1 - $0.0 }),
                               p50Ratio: watchDist.p50 / ipDist.p50)
    }
    var groups = [group("route changes (delete, add, re-add after link up)", [.routeDelete, .routeAdd, .routeReadd]),
                  group("link changes (down, up)", [.linkDown, .linkUp]),
                  group("rule changes (add, delete)", [.ruleAdd, .ruleDelete])]
    groups += Change.measured.map { group($0.rawValue, [$0]) }
    groups.append(group("all changes", Change.measured))
    let n = Double(changes)
    return CLILatency(
        cli: cli, flaps: options.cliFlaps, timeouts: timeouts, loadBefore: loadBefore, groups: groups,
        watchCPUMicrosPerChange: Double(cpuEnd.0.schedNS - cpuStart.0.schedNS) / 1000 / n,
        ipCPUMicrosPerChange: Double(cpuEnd.1.schedNS - cpuStart.1.schedNS) / 1000 / n,
        watchTickCPUMicrosPerChange: Double(cpuEnd.0.ticks - cpuStart.0.ticks) * tick / n,
        ipTickCPUMicrosPerChange: Double(cpuEnd.1.ticks - cpuStart.1.ticks) * tick / n,
        watchLines: watch.count, ipLines: ip.count)
}
