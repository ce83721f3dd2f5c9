import BenchStatistics
import CNetReachBench
import Foundation
import NetReach

/// Runs a command and returns its exit status; output goes to our stderr only on failure.
@discardableResult
func run(_ arguments: [String], check: Bool = true) -> Int32 {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = pipe
    do { try process.run() } catch {
        fail("cannot run \(arguments.joined(separator: " ")): \(error)")
    }
    let output = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    if check && process.terminationStatus != 0 {
        FileHandle.standardError.write(output)
        fail("`\(arguments.joined(separator: " "))` exited with \(process.terminationStatus)")
    }
    return process.terminationStatus
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("DetectionLatency: \(message)\n".utf8))
    LineReader.endAll()
    Namespaces.current?.tearDown()
    exit(1)
}

func log(_ message: String) {
    FileHandle.standardError.write(Data("[\(String(format: "%8.3f", Double(nrb_now_ns() - startTime) / 1e9))] \(message)\n".utf8))
}

let startTime = nrb_now_ns()

/// The benchmark's two namespaces: `name` (observed: lo + nb0) and `name-p` (the veth peer nb1,
/// so the observed namespace holds one interface and nothing but our changes happens in it).
final class Namespaces: @unchecked Sendable {
    // @unchecked: immutable after init except `removed`, which only tearDown touches, under `lock`.
    nonisolated(unsafe) static var current: Namespaces?

    let name: String
    var peer: String { name + "-p" }
    var path: String { "/var/run/netns/\(name)" }
    static let address = "192.0.2.2/24"     // TEST-NET-1: documentation range, never routed
    static let gateway = "192.0.2.1"
    static let gatewayBigEndian: UInt32 = UInt32(192) | UInt32(0) << 8 | UInt32(2) << 16 | UInt32(1) << 24
    static let probeGateway = "192.0.2.3"
    static let probeGatewayBigEndian: UInt32 = UInt32(192) | UInt32(0) << 8 | UInt32(2) << 16 | UInt32(3) << 24
    private let lock = NSLock()
    private var removed = false

    /// With `samePeerIndex`, nb0 and its peer nb1 both get ifindex 2, so nb0's iflink equals its own
    /// index, as on a physical NIC: the kernel's linkwatch then treats its carrier changes as not
    /// urgent and rate-limits them (IFF_RUNNING may lag IFF_LOWER_UP by up to 1 s). Otherwise a spare
    /// veth pair in the peer namespace pushes nb1 to index 4, as for a container's eth0 whose peer
    /// lives in the host, and carrier changes are urgent.
    init(name: String, samePeerIndex: Bool) {
        self.name = name
        Namespaces.current = self
        tearDown(quiet: true)
        removed = false
        run(["ip", "netns", "add", name])
        run(["ip", "netns", "add", peer])
        // IPv4 only: no IPv6 link-local addresses, DAD or router solicitations, so the only events
        // in the namespace are the ones the harness makes.
        run(["ip", "netns", "exec", name, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"])
        run(["ip", "netns", "exec", peer, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"])
        if !samePeerIndex { run(["ip", "-n", peer, "link", "add", "pad0", "type", "veth", "peer", "name", "pad1"]) }
        run(["ip", "-n", name, "link", "add", "nb0", "type", "veth", "peer", "name", "nb1", "netns", peer])
        run(["ip", "-n", name, "link", "set", "lo", "up"])
        run(["ip", "-n", name, "addr", "add", Self.address, "dev", "nb0"])
        run(["ip", "-n", name, "link", "set", "nb0", "up"])
        run(["ip", "-n", peer, "link", "set", "nb1", "up"])
        run(["ip", "-n", name, "route", "add", "default", "via", Self.gateway, "dev", "nb0"])
        // What the "rule add" change points every lookup at (no rule uses it until then).
        run(["ip", "-n", name, "route", "add", "unreachable", "default", "table", "\(Change.ruleTable)"])
    }

    func tearDown(quiet: Bool = false) {
        lock.lock()
        defer { lock.unlock() }
        guard !removed else { return }
        removed = true
        run(["ip", "netns", "del", name], check: false)
        run(["ip", "netns", "del", peer], check: false)
        if !quiet { log("removed namespaces \(name) and \(peer)") }
    }
}

/// Every path the NetReach monitor delivered to its handler, with the CLOCK_MONOTONIC time the
/// handler started.
final class Recorder: @unchecked Sendable {
    // @unchecked: `events` is only touched with `condition` locked.
    struct Event { let ts: Int64; let path: NetworkPath }
    private let condition = NSCondition()
    private var events: [Event] = []

    init() { events.reserveCapacity(1 << 16) }

    func record(_ path: NetworkPath) {
        let ts = nrb_now_ns()
        condition.lock()
        events.append(Event(ts: ts, path: path))
        condition.broadcast()
        condition.unlock()
    }

    var count: Int { condition.lock(); defer { condition.unlock() }; return events.count }
    var last: Event? { condition.lock(); defer { condition.unlock() }; return events.last }
    func events(from start: Int) -> [Event] { condition.lock(); defer { condition.unlock() }; return Array(events[min(start, events.count)...]) }

    /// The first event at index >= `start` whose path matches, waiting until `deadline` (monotonic ns).
    func waitForMatch(from start: Int, deadline: Int64, _ matches: (NetworkPath) -> Bool) -> Event? {
        condition.lock()
        defer { condition.unlock() }
        var index = start
        while true {
            while index < events.count {
                if matches(events[index].path) { return events[index] }
                index += 1
            }
            let remaining = deadline - nrb_now_ns()
            if remaining <= 0 { return nil }
            _ = condition.wait(until: Date(timeIntervalSinceNow: Double(min(remaining, 50_000_000)) / 1e9))
        }
    }
}

/// Counts NetReach's "messages were lost" diagnostics (each is one full re-dump after ENOBUFS).
final class DiagnosticsCounter: @unchecked Sendable {
    // @unchecked: the counters are only touched under `lock`.
    private let lock = NSLock()
    private var resyncs = 0
    private var other: [String] = []

    func install() {
        NetReachDiagnostics.handler = { [self] message in
            lock.lock()
            if message.contains("were lost") { resyncs += 1 } else { other.append(message) }
            lock.unlock()
        }
    }
    var resyncCount: Int { lock.lock(); defer { lock.unlock() }; return resyncs }
    var otherMessages: [String] { lock.lock(); defer { lock.unlock() }; return other }
}

/// Threads of this process: kernel id, name and context switches (from /proc/self/task).
struct ThreadSample {
    var tid: Int32
    var name: String
    var voluntary: Int
    var involuntary: Int
    var switches: Int { voluntary + involuntary }
}

func threadSamples() -> [Int32: ThreadSample] {
    var result: [Int32: ThreadSample] = [:]
    guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task") else { return [:] }
    for entry in entries {
        guard let tid = Int32(entry),
              let status = try? String(contentsOfFile: "/proc/self/task/\(entry)/status", encoding: .utf8) else { continue }
        var sample = ThreadSample(tid: tid, name: "", voluntary: 0, involuntary: 0)
        for line in status.split(separator: "\n") {
            let parts = line.split(separator: ":", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count == 2 else { continue }
            switch parts[0] {
            case "Name": sample.name = parts[1]
            case "voluntary_ctxt_switches": sample.voluntary = Int(parts[1]) ?? 0
            case "nonvoluntary_ctxt_switches": sample.involuntary = Int(parts[1]) ?? 0
            default: break
            }
        }
        result[tid] = sample
    }
    return result
}

/// The kernel id of NetReach's engine thread, by name if it has one; before commit 5362a0a the
/// name ("NetReach.netlink", 16 characters where Linux keeps 15) did not stick. Fallback: the one thread started since `before` that is not a Dispatch worker and sits
/// in poll(2)/ppoll(2) (syscall 7 or 271 on x86_64, 73 ppoll on arm64).
func engineThread(startedAfter before: Set<Int32>) -> Int32? {
    let samples = threadSamples()
    // Named "netreach-nl" since commit 5362a0a; earlier builds tried "NetReach.netlink".
    if let named = samples.values.first(where: { $0.name == "netreach-nl" || $0.name.hasPrefix("NetReach.netl") }) { return named.tid }
    let candidates = samples.values.filter { sample in
        guard !before.contains(sample.tid), sample.tid != nrb_floor_tid(), !sample.name.contains("qos"),
              !sample.name.contains("dispatch") else { return false }
        let syscall = readFile("/proc/self/task/\(sample.tid)/syscall").split(separator: " ").first.flatMap { Int($0) }
        return syscall == 7 || syscall == 271 || syscall == 73
    }
    return candidates.count == 1 ? candidates[0].tid : nil
}

/// VmRSS, VmHWM, RssAnon and RssFile of a process, in kB.
func memory(ofProcess pid: Int32) -> (rss: Int, hwm: Int, anon: Int, file: Int)? {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
    var values: [String: Int] = [:]
    for line in status.split(separator: "\n") {
        let parts = line.split(separator: ":", maxSplits: 1)
        guard parts.count == 2 else { continue }
        values[String(parts[0])] = Int(parts[1].trimmingCharacters(in: .whitespaces).split(separator: " ").first ?? "")
    }
    guard let rss = values["VmRSS"] else { return nil }
    return (rss, values["VmHWM"] ?? -1, values["RssAnon"] ?? -1, values["RssFile"] ?? -1)
}

/// CPU time counters for one phase, in ns.
struct CPUSample {
    var process: Int64
    var main: Int64
    var floor: Int64
    var engine: Int64

    static func now(mainTID: Int32, engineTID: Int32) -> CPUSample {
        CPUSample(process: nrb_process_cpu_ns(), main: nrb_thread_cpu_ns(mainTID),
                  floor: nrb_thread_cpu_ns(nrb_floor_tid()), engine: nrb_thread_cpu_ns(engineTID))
    }

    static func - (a: CPUSample, b: CPUSample) -> CPUSample {
        CPUSample(process: a.process - b.process, main: a.main - b.main, floor: a.floor - b.floor, engine: a.engine - b.engine)
    }

    /// Everything NetReach spent: the process less the harness's main thread and the floor
    /// (engine thread + dispatch threads running deliveries + the benchmark's trivial handler).
    var netReach: Int64 { process - main - floor }
}
