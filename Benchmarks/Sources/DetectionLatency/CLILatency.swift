import BenchStatistics
import CNetReachBench
import Foundation
import NetReach

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
    /// The reading thread's kernel id, once it runs (for `pin(to:)`).
    private var readerTID: Int32 = 0
    let process = Process()
    /// Children still running: the CLI phase stops one of them (SIGSTOP) at a time, and a stopped
    /// child would outlive a harness that failed or was interrupted.
    private static let live = NSLock()
    nonisolated(unsafe) private static var pids: Set<Int32> = []

    init(executable: String, arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.standardError
        try process.run()
        Self.live.lock(); Self.pids.insert(process.processIdentifier); Self.live.unlock()
        let fd = pipe.fileHandleForReading.fileDescriptor
        Thread { [self] in readLoop(fd) }.start()
    }

    private func readLoop(_ fd: Int32) {
        condition.lock(); readerTID = nrb_gettid(); condition.broadcast(); condition.unlock()
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

    /// Pins the child (every thread it has; threads it starts later inherit) and the thread of ours
    /// that reads it to `cpu`, or lets them run anywhere when `cpu` is nil.
    func pin(to cpu: Int?) {
        condition.lock()
        while readerTID == 0 && !ended { condition.wait() }
        let reader = readerTID
        condition.unlock()
        let pid = process.processIdentifier
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        for tid in tasks.compactMap({ Int32($0) }) + (reader == 0 ? [] : [reader]) {
            let status = nrb_pin_thread(tid, Int32(cpu ?? -1))
            if status != 0 && tid == reader { fail("cannot pin a reader thread: \(String(cString: strerror(-status)))") }
        }
    }

    func stop() {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
        Self.live.lock(); Self.pids.remove(process.processIdentifier); Self.live.unlock()
    }

    /// Ends every child still running, stopped ones too (on the harness's way out after a failure).
    static func endAll() {
        live.lock(); defer { live.unlock() }
        for pid in pids { kill(pid, SIGTERM); kill(pid, SIGCONT) }
        pids = []
    }
}

struct CLILatencyGroup: Codable {
    var kind: String
    var ipMonitor: Distribution
    var watch: Distribution
    var delta: Distribution   // per change: watch − ip monitor
    var p50Ratio: Double
    /// With --cli-asking, the rounds where AskingMonitor ran instead of watch: it, and ip monitor.
    var askingMonitor: Distribution?
    var ipBesideAsking: Distribution?
    var askingP50Ratio: Double?
}

/// With --cli-pin, the CPUs of one placement: the issuer (this process's main thread) runs on CPU 0;
/// one reader shares it, the other has CPU 1 to itself. Rounds alternate the two placements.
struct CLIPlacement: Codable {
    var name: String
    var groups: [CLILatencyGroup]
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
    var askingLines: Int?
    /// The load average after the phase.
    var loadAfter: String?
    /// `ip -o monitor`'s lines over the whole phase: every watch read these changes (warm-up included).
    var changesSeen: Int?
    /// With --cli-pin, the same groups for each placement alone (half the rounds each).
    var placements: [CLIPlacement]?
    /// The watch's memory after the phase (VmRSS, VmHWM, RssAnon, RssFile in kB).
    var rssAfterKB: Int?
    var hwmAfterKB: Int?
    var anonAfterKB: Int?
    var fileAfterKB: Int?
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

extension Change {
    /// The AskingMonitor line that shows this change: its fields read back into the floor's event.
    func askingMatches(_ line: String) -> Bool {
        guard line.hasPrefix("asked ") else { return false }
        var event = nrb_event()
        for field in line.dropFirst(6).split(separator: " ") {
            let parts = field.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, let value = Int64(parts[1]) else { continue }
            switch parts[0] {
            case "type": event.type = UInt16(truncatingIfNeeded: value)
            case "family": event.family = UInt8(truncatingIfNeeded: value)
            case "dst_len": event.dst_len = UInt8(truncatingIfNeeded: value)
            case "table": event.table = UInt32(truncatingIfNeeded: value)
            case "protocol": event.protocol = UInt8(truncatingIfNeeded: value)
            case "ifindex": event.ifindex = Int32(truncatingIfNeeded: value)
            case "flags": event.flags = UInt32(truncatingIfNeeded: value)
            default: continue
            }
        }
        return floorMatches(event)
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

/// The CLI phase for the first `--cli` (with `--cli-asking`, rounds alternate between it and
/// AskingMonitor), or, with `--cli-compare`, for every `--cli` in the same phase: one `watch` runs at
/// a time, the others stopped with SIGSTOP (as AskingMonitor is), in rounds ordered A B B A (for two;
/// for more, forward then backward), so a drift in the machine's load falls on every build alike and
/// each sees the same changes beside the same `ip -o monitor`. One result per `--cli` measured.
@MainActor func measureCLILatency(_ clis: [String]) -> [CLILatency]? {
    let loadBefore = readFile("/proc/loadavg")
    let compared = options.cliCompare ? clis : Array(clis.prefix(1))
    log("watch --json vs ip monitor: \(options.cliFlaps) route flaps + \(options.cliFlaps) link flaps per build, \(compared.count) build(s) (load \(loadBefore))")
    var watches: [LineReader] = []
    let ip: LineReader
    do {
        for cli in compared {
            watches.append(try LineReader(executable: cli, arguments: ["watch", "--json", "--namespace", namespaces.name]))
        }
        ip = try LineReader(executable: "/usr/bin/env", arguments: ["ip", "-n", namespaces.name, "-o", "monitor", "link", "address", "route", "rule"])
    } catch {
        log("cannot start the CLI readers: \(error)")
        for watch in watches { watch.stop() }
        return nil
    }
    var asking: LineReader?
    if let path = options.cliAsking, compared.count == 1 {
        let candidates = SystemPathSource.Configuration.defaultRouteLookupAddresses.map { "\($0)" }
        do { asking = try LineReader(executable: path, arguments: [namespaces.path] + candidates) } catch {
            log("cannot start \(path): \(error)")
            for watch in watches { watch.stop() }
            ip.stop()
            return nil
        }
    }
    defer {
        if let asking { kill(asking.process.processIdentifier, SIGCONT); asking.stop() }
        for watch in watches { kill(watch.process.processIdentifier, SIGCONT); watch.stop() }
        ip.stop()
    }
    // --cli-pin: the issuer on CPU 0 for the whole phase; each round places the readers (below).
    if options.cliPin {
        guard sysconf(Int32(_SC_NPROCESSORS_ONLN)) >= 2 else { fail("--cli-pin needs two CPUs") }
        let status = nrb_pin_thread(nrb_gettid(), 0)
        if status != 0 { fail("cannot pin the issuer: \(String(cString: strerror(-status)))") }
    }
    defer { if options.cliPin { _ = nrb_pin_thread(nrb_gettid(), -1) } }
    /// Placement 0: watch (or AskingMonitor) alone on CPU 1, ip monitor beside the issuer on CPU 0;
    /// placement 1 the other way round.
    let placementNames = ["watch alone on CPU 1, ip beside the issuer", "ip alone on CPU 1, watch beside the issuer"]
    func place(_ reader: LineReader, _ placement: Int) {
        reader.pin(to: placement == 0 ? 1 : 0)
        ip.pin(to: placement == 0 ? 0 : 1)
    }
    // watch prints the current path first; ip prints nothing until a change.
    for (watch, cli) in zip(watches, compared) {
        guard watch.waitForMatch(from: 0, deadline: nrb_now_ns() + 10_000_000_000, { _ in true }) != nil else {
            log("netreach watch printed nothing within 10 s [\(cli)]")
            return nil
        }
    }
    usleep(300_000)
    var timeouts = Array(repeating: 0, count: watches.count)
    /// (ip monitor, reader) latencies in ns, or nil on a timeout; `reader` is a watch or AskingMonitor.
    func change(_ change: Change, reader: LineReader) -> (Int64, Int64)? {
        let isWatch = reader !== asking
        let matches = isWatch ? change.watchMatches : change.askingMatches
        let readerStart = reader.count, ipStart = ip.count
        sequence &+= 1
        let t0 = nrb_now_ns()
        let sent = change.send(sequence: sequence)
        guard sent == 0 else { fail("\(change.rawValue): sendmsg: \(String(cString: strerror(-sent)))") }
        let deadline = t0 + 3_000_000_000
        let w = reader.waitForMatch(from: readerStart, deadline: deadline, matches)
        let i = ip.waitForMatch(from: ipStart, deadline: deadline, change.ipMatches)
        var error: Int32 = 0
        if nrb_drain_errors(issuer, &error) > 0 { fail("\(change.rawValue) refused by the kernel: \(String(cString: strerror(error)))") }
        guard let w, let i else {
            if let index = watches.firstIndex(where: { $0 === reader }) { timeouts[index] += 1 }
            log("CLI phase: timeout on \(change.rawValue): \(isWatch ? "watch" : "asking monitor") \(w != nil), ip monitor \(i != nil)")
            return nil
        }
        return (i.ts - t0, w.ts - t0)
    }
    /// The readers that take turns: the watches, then AskingMonitor.
    let readers = watches + (asking.map { [$0] } ?? [])
    /// Stops every reader but `running` (SIGSTOP: it gets no CPU, its socket queues what comes), lets
    /// `running` catch up on what it missed, and waits until it is quiet.
    func run(only running: LineReader) {
        for other in readers where other !== running { kill(other.process.processIdentifier, SIGSTOP) }
        kill(running.process.processIdentifier, SIGCONT)
        usleep(50_000)
    }
    // Warm-up (also makes sure ip monitor has joined its groups): not recorded. With one watch and
    // no AskingMonitor, as before: it runs all along.
    for watch in watches {
        if readers.count > 1 && watches.count > 1 { run(only: watch) }
        for _ in 0..<5 {
            for c in Change.measured { _ = change(c, reader: watch); pauseBetweenChanges() }
        }
    }
    if let asking {
        for _ in 0..<2 {
            for c in Change.measured { _ = change(c, reader: asking); pauseBetweenChanges() }
        }
    }
    timeouts = Array(repeating: 0, count: watches.count)
    var samples: [[Change: [(Int64, Int64)]]] = Array(repeating: [:], count: watches.count)
    /// With --cli-pin, each watch's samples by placement.
    var placed: [[[Change: [(Int64, Int64)]]]] = Array(repeating: [[:], [:]], count: watches.count)
    var askingSamples: [Change: [(Int64, Int64)]] = [:]
    var cpuSpent = Array(repeating: (watch: Int64(0), ip: Int64(0), watchTicks: Int64(0), ipTicks: Int64(0)), count: watches.count)
    var changes = Array(repeating: 0, count: watches.count)
    /// Which reader a round belongs to: watch and AskingMonitor alternate; builds compared go
    /// A B B A (forward, then backward).
    func turn(_ round: Int) -> Int {
        guard readers.count > 1 else { return 0 }
        if asking != nil { return round % 2 }
        let n = readers.count, position = round % n
        return (round / n).isMultiple(of: 2) ? position : n - 1 - position
    }
    for round in 0..<(readers.count * options.cliFlaps) {
        let reader = readers[turn(round)]
        // With --cli-pin, placements alternate every `readers.count` rounds, so with two builds
        // (A B B A A B B A ...) each build gets each placement equally often.
        let placement = (round / readers.count) % 2
        if options.cliPin { place(reader, placement) }
        // Every round alike: the others stopped, this one given time to catch up (also when it ran
        // the round before, as B does in A B B A).
        if readers.count > 1 { run(only: reader) }
        let index = watches.firstIndex { $0 === reader }
        let cpuStart = index.map { (processCPU(watches[$0].process.processIdentifier), processCPU(ip.process.processIdentifier)) }
        for c in Change.measured {
            if let index { changes[index] += 1 }
            if let sample = change(c, reader: reader) {
                if let index {
                    samples[index][c, default: []].append(sample)
                    placed[index][placement][c, default: []].append(sample)
                } else {
                    askingSamples[c, default: []].append(sample)
                }
            }
            pauseBetweenChanges()
        }
        if let index, let cpuStart {
            let cpuEnd = (processCPU(watches[index].process.processIdentifier), processCPU(ip.process.processIdentifier))
            cpuSpent[index].watch += cpuEnd.0.schedNS - cpuStart.0.schedNS
            cpuSpent[index].ip += cpuEnd.1.schedNS - cpuStart.1.schedNS
            cpuSpent[index].watchTicks += cpuEnd.0.ticks - cpuStart.0.ticks
            cpuSpent[index].ipTicks += cpuEnd.1.ticks - cpuStart.1.ticks
        }
    }
    // Every watch has now read every change of the phase (the stopped ones caught up in their
    // turns): its memory after them. Each one runs alone for its reading, so it has caught up.
    var memoryAfter: [(rss: Int, hwm: Int, anon: Int, file: Int)?] = []
    for watch in watches {
        if readers.count > 1 { run(only: watch); usleep(200_000) }
        memoryAfter.append(memory(ofProcess: watch.process.processIdentifier))
    }
    let tick = 1e6 / Double(sysconf(Int32(_SC_CLK_TCK)))
    let samplesOfAllRounds = samples
    return watches.indices.map { index in
        func group(_ kind: String, _ of: [Change], from samples: [Change: [(Int64, Int64)]]? = nil) -> CLILatencyGroup {
            let pairs = of.flatMap { (samples ?? samplesOfAllRounds[index])[$0] ?? [] }
            let ipDist = Distribution(pairs.map(\.0)), watchDist = Distribution(pairs.map(\.1))
            let askingPairs = of.flatMap { askingSamples[$0] ?? [] }
            let askingDist = asking == nil ? nil : Distribution(askingPairs.map(\.1))
            let ipBeside = asking == nil ? nil : Distribution(askingPairs.map(\.0))
            return CLILatencyGroup(kind: kind, ipMonitor: ipDist, watch: watchDist, delta: Distribution(pairs.map { $0.1 - $0.0 }),
                                   p50Ratio: watchDist.p50 / ipDist.p50, askingMonitor: askingDist, ipBesideAsking: ipBeside,
                                   askingP50Ratio: askingDist.flatMap { a in ipBeside.map { a.p50 / $0.p50 } })
        }
        var groups = [group("route changes (delete, add, re-add after link up)", [.routeDelete, .routeAdd, .routeReadd]),
                      group("link changes (down, up)", [.linkDown, .linkUp]),
                      group("rule changes (add, delete)", [.ruleAdd, .ruleDelete])]
        groups += Change.measured.map { group($0.rawValue, [$0]) }
        groups.append(group("all changes", Change.measured))
        let placements = !options.cliPin ? nil : placementNames.indices.map { placement in
            CLIPlacement(
                name: placementNames[placement],
                groups: Change.measured.map { group($0.rawValue, [$0], from: placed[index][placement]) }
                    + [group("all changes", Change.measured, from: placed[index][placement])])
        }
        let n = Double(changes[index])
        let after = memoryAfter[index]
        return CLILatency(
            cli: compared[index], flaps: options.cliFlaps, timeouts: timeouts[index], loadBefore: loadBefore, groups: groups,
            watchCPUMicrosPerChange: Double(cpuSpent[index].watch) / 1000 / n,
            ipCPUMicrosPerChange: Double(cpuSpent[index].ip) / 1000 / n,
            watchTickCPUMicrosPerChange: Double(cpuSpent[index].watchTicks) * tick / n,
            ipTickCPUMicrosPerChange: Double(cpuSpent[index].ipTicks) * tick / n,
            watchLines: watches[index].count, ipLines: ip.count, askingLines: asking?.count,
            loadAfter: readFile("/proc/loadavg"), changesSeen: ip.count, placements: placements,
            rssAfterKB: after?.rss, hwmAfterKB: after?.hwm, anonAfterKB: after?.anon, fileAfterKB: after?.file)
    }
}
