// Detection latency, flap storm, CPU per event, idle wakeups and `netreach watch` memory, measured
// in one run inside a network namespace of our own. Needs root (namespaces, setns).
//
//   DetectionLatency [--flaps 200] [--pause-ms 10] [--storm 10000] [--idle-seconds 10]
//                    [--namespace NAME] [--cli PATH]... [--json PATH] [--same-peer-index] [--small-buffer BYTES]
//                    [--second-wait-seconds S] [--cli-flaps 100] [--asking-flaps 100] [--cli-compare]
//                    [--cli-pin]
//
// --asking-flaps rounds (0: none) follow the latency phase, alternating, round by round, a floor
// that only reads and one that then asks, in C, the kernel questions NetReach's engine asks about
// the batch (nrb_floor_prepare_asking): the lower bound of any reader that asks the kernel, as
// DESIGN's "ask the kernel after every batch" requires, measured beside NetReach in the same run.
// --cli-asking PATH (AskingMonitor) does the same for the CLI phase: rounds alternate between
// `watch` and that C process (the other one stopped with SIGSTOP), `ip -o monitor` in both.
//
// With --cli, a last phase runs the first CLI as `netreach watch --json --namespace NAME` and
// `ip -n NAME -o monitor link address route` side by side, both started before, each writing into
// a pipe read by a thread of ours that timestamps every line on arrival (CLOCK_MONOTONIC), and makes
// --cli-flaps route flaps + link flaps while the in-process monitor and the floor are stopped.
// --cli-compare runs that phase for every --cli, in the same phase: one watch at a time (the
// others stopped with SIGSTOP), rounds ordered A B B A, --cli-flaps rounds each, every kind of
// change reported per build beside `ip -o monitor` in that build's rounds, and each watch's memory
// after the phase (it has read every change of it).
// --cli-pin places that phase on CPUs, since on two CPUs an unpinned reader woken on a busy CPU
// waits for whatever runs there (the same binary's ratio swung 1.84-2.32× between runs): the issuer
// stays on CPU 0; one reader shares it, the other has CPU 1, and the placements alternate (every
// build gets each equally often), each reported apart as well as together.
//
// Both readers watch the same changes at the same time: the floor (a C thread blocked in poll on
// a NETLINK_ROUTE socket that timestamps right after recv) and a NetReach PathMonitor (timestamp
// at the start of pathUpdateHandler on a serial queue). A change is timed from just before the
// sendmsg that makes it, on the harness's own netlink socket in the namespace.
import BenchStatistics
import CNetReachBench
import Dispatch
import Foundation
import NetReach

// MARK: Options

struct Options {
    var flaps = 200
    var warmup = 10
    var pauseMS = 10
    var storm = 10_000
    var idleSeconds = 10
    var namespace = "nrbench-\(getpid())"
    var clis: [String] = []
    var json: String?
    var samePeerIndex = false
    var smallBuffer = 2048
    var secondWaitSeconds = 10
    var cliFlaps = 100
    var askingFlaps = 100
    var cliAsking: String?
    var cliCompare = false
    var cliPin = false

    init() {
        var arguments = CommandLine.arguments.dropFirst()
        func value(_ flag: String) -> String {
            guard let value = arguments.popFirst() else { fail("\(flag) needs a value") }
            return value
        }
        while let flag = arguments.popFirst() {
            switch flag {
            case "--flaps": flaps = Int(value(flag)) ?? flaps
            case "--warmup": warmup = Int(value(flag)) ?? warmup
            case "--pause-ms": pauseMS = Int(value(flag)) ?? pauseMS
            case "--storm": storm = Int(value(flag)) ?? storm
            case "--idle-seconds": idleSeconds = Int(value(flag)) ?? idleSeconds
            case "--namespace": namespace = value(flag)
            case "--cli": clis.append(value(flag))
            case "--json": json = value(flag)
            case "--same-peer-index": samePeerIndex = true
            case "--small-buffer": smallBuffer = Int(value(flag)) ?? smallBuffer
            case "--second-wait-seconds": secondWaitSeconds = Int(value(flag)) ?? secondWaitSeconds
            case "--cli-flaps": cliFlaps = Int(value(flag)) ?? cliFlaps
            case "--asking-flaps": askingFlaps = Int(value(flag)) ?? askingFlaps
            case "--cli-asking": cliAsking = value(flag)
            case "--cli-compare": cliCompare = true
            case "--cli-pin": cliPin = true
            default: fail("unknown option \(flag)")
            }
        }
    }
}

let options = Options()
guard getuid() == 0 else { fail("needs root (network namespaces, setns)") }

// MARK: Results (written as JSON with --json)

struct KindResult: Codable {
    var kind: String
    var floor: Distribution
    var netReach: Distribution
    var delta: Distribution   // per change: NetReach − floor
}

struct StormResult: Codable {
    var name: String
    var changes: Int
    var sendErrors: Int
    var issueSeconds: Double
    var notifications: UInt64
    var floorOverruns: UInt64
    var netReachResyncs: Int
    var handlerCalls: Int
    var expected: String
    var finalPath: String
    var finalCorrect: Bool
    var lastDeliveryMatchesCurrent: Bool
    var freshMonitorAgrees: Bool
    var floorSettleMicros: Double
    var netReachSettleMicros: Double
    var engineCPUMicros: Double
    var netReachCPUMicros: Double
    var floorCPUMicros: Double
    /// Storm 3 only: a second monitor with a small-buffer receive buffer (so it overruns) ended right.
    var secondMonitorCorrect: Bool?
    /// How long after the first monitor was quiet the second one took to show the expected path.
    var secondMonitorExtraWaitMillis: Double?
}

struct Report: Codable {
    var date: String
    var kernel: String
    var loadBefore: String
    var loadAfter: String
    var changesMeasured: Int
    var timeouts: Int
    var all: KindResult
    var kinds: [KindResult]
    var linkUpFirstLowerUp: Distribution
    var samePeerIndex: Bool
    var dispatchHop: Distribution
    var p50Ratio: Double
    var p99DeltaMicros: Double
    var latencyPhaseEngineCPUPerChange: Double
    var latencyPhaseNetReachCPUPerChange: Double
    var latencyPhaseFloorCPUPerChange: Double
    var storms: [StormResult]
    var idleSeconds: Int
    var idleEngineSwitches: Int
    var idleFloorSwitches: Int
    var idleOtherThreads: [String]
    var cli: [CLIMemory]
    var cliLatency: CLILatency?
    /// With --cli-compare, one per --cli (the first is `cliLatency`).
    var cliLatencies: [CLILatency]?
    var askingFloor: AskingReport?
}

func readFile(_ path: String) -> String {
    ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "?").trimmingCharacters(in: .whitespacesAndNewlines)
}

// MARK: Setup

let loadBefore = readFile("/proc/loadavg")
log("load: \(loadBefore)")
let namespaces = Namespaces(name: options.namespace, samePeerIndex: options.samePeerIndex)
let signals = DispatchQueue(label: "signals")
var signalSources: [DispatchSourceSignal] = []
for number in [SIGINT, SIGTERM, SIGHUP] {
    signal(number, SIG_IGN)
    let source = DispatchSource.makeSignalSource(signal: number, queue: signals)
    // `@Sendable`, and not the top-level `namespaces`: a closure written here belongs to the main
    // actor, and this one runs on `signals` (Swift 6's isolation check stopped the process at
    // SIGINT, before the namespaces were removed).
    source.setEventHandler { @Sendable in
        LineReader.endAll()
        Namespaces.current?.tearDown()
        exit(128 + number)
    }
    source.resume()
    signalSources.append(source)
}
log("namespaces \(namespaces.name) (observed) and \(namespaces.peer) ready")

let ifindex = nrb_ifindex_in(namespaces.path, "nb0")
guard ifindex > 0 else { fail("nb0 not found in \(namespaces.name): \(ifindex)") }
let issuer = nrb_open_route_socket_in(namespaces.path, 0, 1 << 20)
guard issuer >= 0 else { fail("issuer socket: \(String(cString: strerror(-issuer)))") }
let floorSocket = nrb_open_route_socket_in(namespaces.path, NRB_GROUPS_NETREACH, 4 << 20)
guard floorSocket >= 0 else { fail("floor socket: \(String(cString: strerror(-floorSocket)))") }
guard nrb_floor_start(floorSocket, 1 << 20) == 0 else { fail("cannot start the floor thread") }

let diagnostics = DiagnosticsCounter()
diagnostics.install()
let recorder = Recorder()
let threadsBeforeStart = Set(threadSamples().keys)
let monitor = PathMonitor(namespace: .named(namespaces.name))
monitor.pathUpdateHandler = { path in recorder.record(path) }
monitor.start(queue: DispatchQueue(label: "bench.handler"))
if let failure = monitor.failure { fail("monitor failed: \(failure)") }
guard monitor.currentPath.status == .satisfied else { fail("initial path not satisfied: \(monitor.currentPath)") }
let mainTID = Int32(nrb_gettid())
var engineCandidate: Int32?
for _ in 0..<100 where engineCandidate == nil {
    engineCandidate = engineThread(startedAfter: threadsBeforeStart)
    if engineCandidate == nil { usleep(20_000) }
}
guard let engineTID = engineCandidate else { fail("no NetReach engine thread found among \(threadSamples().values.map { "\($0.name)[\($0.tid)]" })") }
log("monitor started: \(monitor.currentPath); engine tid \(engineTID), floor tid \(nrb_floor_tid())")

// MARK: Changes

enum Change: String, CaseIterable {
    case routeDelete = "route delete"
    case routeAdd = "route add"
    case linkDown = "link down"
    case linkUp = "link up"
    case routeReadd = "route re-add after link up"
    /// A second default route (via 192.0.2.3, metric 100, protocol static), used to end a storm
    /// with a change whose result no storm state has.
    case probeAdd = "probe route add"
    case probeDelete = "probe route delete"
    /// `ip rule add pref 100 lookup 100`, where table 100 holds only `unreachable default`: every
    /// lookup is refused, though no route changed.
    case ruleAdd = "rule add"
    case ruleDelete = "rule delete"

    static let measured: [Change] = [.routeDelete, .routeAdd, .linkDown, .linkUp, .routeReadd, .ruleAdd, .ruleDelete]
    static let rulePriority: UInt32 = 100
    static let ruleTable: UInt32 = 100

    func send(sequence: UInt32) -> Int32 {
        let gateway = Namespaces.gatewayBigEndian, probe = Namespaces.probeGatewayBigEndian
        switch self {
        case .routeDelete: return nrb_send_route(issuer, 0, ifindex, gateway, 0, 0, sequence)
        case .routeAdd, .routeReadd: return nrb_send_route(issuer, 1, ifindex, gateway, 0, NRB_RTPROT_BOOT, sequence)
        case .linkDown: return nrb_send_link(issuer, ifindex, 0, sequence)
        case .linkUp: return nrb_send_link(issuer, ifindex, 1, sequence)
        case .probeAdd: return nrb_send_route(issuer, 1, ifindex, probe, 100, NRB_RTPROT_STATIC, sequence)
        case .probeDelete: return nrb_send_route(issuer, 0, ifindex, probe, 100, 0, sequence)
        case .ruleAdd: return nrb_send_rule(issuer, 1, Self.rulePriority, Self.ruleTable, sequence)
        case .ruleDelete: return nrb_send_rule(issuer, 0, Self.rulePriority, Self.ruleTable, sequence)
        }
    }

    /// The notification the floor waits for: the same fact NetReach needs, read from the header and
    /// the fixed part of the message only (ifinfomsg flags, rtmsg family/dst_len/table/protocol).
    /// "Operational" is IFF_UP + IFF_RUNNING, as NetReach's parser has it (IFF_LOWER_UP alone is
    /// not carrier to it); the first IFF_LOWER_UP after a link-up is recorded on the side.
    func floorMatches(_ event: nrb_event) -> Bool {
        let isDefault = event.family == 2 && event.dst_len == 0 && event.table == 254
        let isMain = isDefault && event.protocol == NRB_RTPROT_BOOT
        let isProbe = isDefault && event.protocol == NRB_RTPROT_STATIC
        let operational = event.flags & NRB_IFF_UP != 0 && event.flags & NRB_IFF_RUNNING != 0
        switch self {
        case .routeDelete: return event.type == NRB_RTM_DELROUTE && isMain
        case .routeAdd, .routeReadd: return event.type == NRB_RTM_NEWROUTE && isMain
        case .linkDown: return event.type == NRB_RTM_NEWLINK && event.ifindex == ifindex && !operational
        case .linkUp: return event.type == NRB_RTM_NEWLINK && event.ifindex == ifindex && operational
        case .probeAdd: return event.type == NRB_RTM_NEWROUTE && isProbe
        case .probeDelete: return event.type == NRB_RTM_DELROUTE && isProbe
        case .ruleAdd: return event.type == NRB_RTM_NEWRULE
        case .ruleDelete: return event.type == NRB_RTM_DELRULE
        }
    }

    /// The path NetReach must deliver for this change.
    func netReachMatches(_ path: NetworkPath) -> Bool {
        let probe = path.gateways.contains { "\($0)" == Namespaces.probeGateway }
        switch self {
        case .routeDelete, .linkUp: return path.status == .unsatisfied && path.unsatisfiedReason == .noDefaultRoute
        case .routeAdd, .routeReadd: return path.status == .satisfied
        case .linkDown: return path.status == .unsatisfied && path.unsatisfiedReason == .linkDown
        case .probeAdd: return path.status == .satisfied && probe
        case .probeDelete: return !probe
        case .ruleAdd: return path.status == .unsatisfied && path.unsatisfiedReason == .routeRefused
        case .ruleDelete: return path.status == .satisfied
        }
    }
}

let traceSlow = ProcessInfo.processInfo.environment["NRB_TRACE"] != nil
/// With asking on: the asking floor's latency for the last change `measure` timed (its answers
/// read after the notification the floor matched), else nil.
var lastAskedLatency: Int64?
var askingOn = false
var sequence: UInt32 = 100
var timeouts = 0
/// For each measured link-up: when the floor first saw nb0 with IFF_UP + IFF_LOWER_UP (ns after the change).
var lowerUpLatencies: [Int64] = []
var recordLowerUp = false

/// Makes one change and returns (floor, NetReach) latencies in ns, or nil on a timeout.
@MainActor func measure(_ change: Change, timeoutSeconds: Int64 = 3) -> (Int64, Int64)? {
    let floorStart = nrb_floor_count()
    let recorderStart = recorder.count
    sequence &+= 1
    let t0 = nrb_now_ns()
    let sent = change.send(sequence: sequence)
    guard sent == 0 else { fail("\(change.rawValue): sendmsg: \(String(cString: strerror(-sent)))") }
    // NetReach first: waiting on the floor would wake this thread (and take a core) sooner.
    let deadline = t0 + timeoutSeconds * 1_000_000_000
    let delivered = recorder.waitForMatch(from: recorderStart, deadline: deadline, change.netReachMatches)
    var floorTime: Int64?
    var index = floorStart
    lastAskedLatency = nil
    search: while true {
        let count = nrb_floor_count()
        while index < count {
            let event = nrb_floor_event(index)
            if change.floorMatches(event) { floorTime = event.ts; break search }
            index += 1
        }
        if nrb_now_ns() >= deadline { break }
        _ = nrb_floor_wait_beyond(count, deadline)
    }
    if askingOn, floorTime != nil {
        while nrb_floor_asked_count() <= index, nrb_now_ns() < deadline { _ = nrb_floor_wait_asked_beyond(index, deadline) }
        if nrb_floor_asked_count() > index {
            let asked = nrb_floor_event(index).asked_ts
            if asked > 0 { lastAskedLatency = asked - t0 }
        }
    }
    var error: Int32 = 0
    if nrb_drain_errors(issuer, &error) > 0 { fail("\(change.rawValue) refused by the kernel: \(String(cString: strerror(error)))") }
    if recordLowerUp && change == .linkUp {
        for i in floorStart..<nrb_floor_count() {
            let event = nrb_floor_event(i)
            if event.type == NRB_RTM_NEWLINK && event.ifindex == ifindex && event.flags & NRB_IFF_UP != 0 && event.flags & NRB_IFF_LOWER_UP != 0 {
                lowerUpLatencies.append(event.ts - t0)
                break
            }
        }
    }
    guard let delivered, let floorTime else {
        timeouts += 1
        log("timeout on \(change.rawValue): floor \(floorTime != nil), NetReach \(delivered != nil); path now \(monitor.currentPath)")
        return nil
    }
    if traceSlow, delivered.ts - t0 > 20_000_000 || floorTime - t0 > 20_000_000 {
        var lines = ["slow \(change.rawValue): floor \((floorTime - t0) / 1000) µs, NetReach \((delivered.ts - t0) / 1000) µs"]
        for event in recorder.events(from: recorderStart) { lines.append("  NetReach +\((event.ts - t0) / 1000) µs \(event.path)") }
        for i in floorStart..<min(nrb_floor_count(), floorStart + 40) {
            let e = nrb_floor_event(i)
            lines.append("  floor +\((e.ts - t0) / 1000) µs type \(e.type) ifindex \(e.ifindex) flags 0x\(String(e.flags, radix: 16)) family \(e.family) dst_len \(e.dst_len) table \(e.table) proto \(e.protocol)")
        }
        log(lines.joined(separator: "\n"))
    }
    return (floorTime - t0, delivered.ts - t0)
}

@MainActor func pauseBetweenChanges() { usleep(useconds_t(options.pauseMS * 1000)) }

/// Makes a change without measuring it, and waits until NetReach shows it.
@MainActor func apply(_ change: Change) {
    guard measure(change) != nil else { fail("could not apply \(change.rawValue)") }
    pauseBetweenChanges()
}

// MARK: Latency phase

var samples: [Change: [(Int64, Int64)]] = [:]
log("warm-up: \(options.warmup) route flaps and \(options.warmup) link flaps (not recorded)")
for _ in 0..<options.warmup {
    apply(.routeDelete); apply(.routeAdd)
    apply(.linkDown); apply(.linkUp); apply(.routeReadd)
}
log("latency: \(options.flaps) route flaps and \(options.flaps) link flaps, interleaved, \(options.pauseMS) ms apart")
recordLowerUp = true
let latencyCPUStart = CPUSample.now(mainTID: mainTID, engineTID: engineTID)
var latencyChanges = 0
for round in 0..<options.flaps {
    for change in Change.measured {
        latencyChanges += 1
        if let sample = measure(change) { samples[change, default: []].append(sample) }
        pauseBetweenChanges()
    }
    if (round + 1) % 50 == 0 { log("  \(round + 1) rounds") }
}
let latencyCPU = CPUSample.now(mainTID: mainTID, engineTID: engineTID) - latencyCPUStart
recordLowerUp = false

@MainActor func result(_ kind: String, _ pairs: [(Int64, Int64)]) -> KindResult {
    KindResult(kind: kind, floor: Distribution(pairs.map(\.0)), netReach: Distribution(pairs.map(\.1)),
               delta: Distribution(pairs.map { $0.1 - $0.0 }))
}
let kinds = Change.measured.map { result($0.rawValue, samples[$0] ?? []) }
let all = result("all changes", Change.measured.flatMap { samples[$0] ?? [] })

// MARK: Asking floor

struct AskingResult: Codable {
    var kind: String
    /// Rounds where the floor asked: its notification, its answers, NetReach's handler.
    var floor: Distribution
    var askingFloor: Distribution
    var netReach: Distribution
    /// Rounds where the floor only read.
    var floorReading: Distribution
    var netReachBesideReading: Distribution
}

struct AskingReport: Codable {
    var rounds: Int
    var kinds: [AskingResult]
    var all: AskingResult
    var askedBatches: UInt64
    var askedConnects: UInt64
    /// The floor thread's CPU per change, asking and only reading (same changes, same run).
    var floorCPUAskingMicros: Double
    var floorCPUReadingMicros: Double
    var engineCPUMicros: Double
}

@MainActor func measureAskingFloor() -> AskingReport? {
    guard options.askingFlaps > 0 else { return nil }
    let candidates = SystemPathSource.Configuration.defaultRouteLookupAddresses
    let v4 = candidates.filter { $0.family == .ipv4 }, v6 = candidates.filter { $0.family == .ipv6 }
    let prepared = nrb_floor_prepare_asking(
        namespaces.path, v4.flatMap(\.bytes), Int32(v4.count), v6.flatMap(\.bytes), Int32(v6.count))
    guard prepared == 0 else { fail("asking floor: \(String(cString: strerror(-prepared)))") }
    log("asking floor: \(options.askingFlaps) rounds asking, \(options.askingFlaps) only reading, alternating")
    var asking: [Change: [(floor: Int64, asked: Int64, netReach: Int64)]] = [:]
    var reading: [Change: [(Int64, Int64)]] = [:]
    var cpu = (asking: Int64(0), reading: Int64(0), engine: Int64(0), askingChanges: 0, readingChanges: 0)
    let batchesBefore = nrb_floor_asked_batches(), connectsBefore = nrb_floor_asked_connects()
    for round in 0..<(2 * options.askingFlaps) {
        askingOn = round % 2 == 0
        nrb_floor_set_asking(askingOn ? 1 : 0)
        let floorStart = nrb_thread_cpu_ns(nrb_floor_tid()), engineStart = nrb_thread_cpu_ns(engineTID)
        for change in Change.measured {
            if let (floor, netReach) = measure(change) {
                if askingOn {
                    if let asked = lastAskedLatency { asking[change, default: []].append((floor, asked, netReach)) }
                } else {
                    reading[change, default: []].append((floor, netReach))
                }
            }
            pauseBetweenChanges()
        }
        let floorCPU = nrb_thread_cpu_ns(nrb_floor_tid()) - floorStart
        if askingOn {
            cpu.asking += floorCPU; cpu.askingChanges += Change.measured.count
            cpu.engine += nrb_thread_cpu_ns(engineTID) - engineStart
        } else {
            cpu.reading += floorCPU; cpu.readingChanges += Change.measured.count
        }
        if (round + 1) % 50 == 0 { log("  \(round + 1) rounds") }
    }
    askingOn = false
    nrb_floor_set_asking(0)
    func result(_ kind: String, _ changes: [Change]) -> AskingResult {
        let on = changes.flatMap { asking[$0] ?? [] }, off = changes.flatMap { reading[$0] ?? [] }
        return AskingResult(
            kind: kind, floor: Distribution(on.map(\.floor)), askingFloor: Distribution(on.map(\.asked)),
            netReach: Distribution(on.map(\.netReach)), floorReading: Distribution(off.map(\.0)),
            netReachBesideReading: Distribution(off.map(\.1)))
    }
    return AskingReport(
        rounds: options.askingFlaps, kinds: Change.measured.map { result($0.rawValue, [$0]) },
        all: result("all changes", Change.measured),
        askedBatches: nrb_floor_asked_batches() - batchesBefore, askedConnects: nrb_floor_asked_connects() - connectsBefore,
        floorCPUAskingMicros: Double(cpu.asking) / 1000 / Double(max(cpu.askingChanges, 1)),
        floorCPUReadingMicros: Double(cpu.reading) / 1000 / Double(max(cpu.readingChanges, 1)),
        engineCPUMicros: Double(cpu.engine) / 1000 / Double(max(cpu.askingChanges, 1)))
}
let askingReport = measureAskingFloor()

// MARK: Reference: one DispatchQueue hop

/// How long a block takes to start on an idle serial queue: the hop every NWPathMonitor-style
/// delivery makes from the reading thread to the user's queue, and the floor does not.
final class HopProbe: @unchecked Sendable {
    // @unchecked: `started` is written on the queue and read after `done` is signalled.
    var started: Int64 = 0
    let done = DispatchSemaphore(value: 0)
}
let hopQueue = DispatchQueue(label: "bench.hop")
var hops: [Int64] = []
for _ in 0..<200 {
    let probe = HopProbe()
    let t0 = nrb_now_ns()
    hopQueue.async { probe.started = nrb_now_ns(); probe.done.signal() }
    probe.done.wait()
    hops.append(probe.started - t0)
    usleep(useconds_t(options.pauseMS * 1000))
}
let dispatchHop = Distribution(hops)

// MARK: Storms

/// Waits until nothing moves (engine CPU, floor messages, deliveries) for 300 ms; at most 60 s.
@MainActor func waitForQuiet() {
    var last = (Int64(-1), UInt64(0), -1)
    var stableSince = nrb_now_ns()
    let deadline = nrb_now_ns() + 60_000_000_000
    while nrb_now_ns() < deadline {
        let now = (nrb_thread_cpu_ns(engineTID), nrb_floor_messages(), recorder.count)
        if now != last { last = now; stableSince = nrb_now_ns() }
        if nrb_now_ns() - stableSince >= 300_000_000 { return }
        usleep(20_000)
    }
    log("warning: still busy after 60 s")
}

func describe(_ path: NetworkPath) -> String {
    path.status == .satisfied ? "satisfied via \(path.availableInterfaces.map(\.name)) gw \(path.gateways)"
        : "unsatisfied (\(path.unsatisfiedReason.map { "\($0)" } ?? "?"))"
}

/// `changes` changes from `cycle` as fast as the kernel takes them, then at once the probe (a second
/// default route via 192.0.2.3), timed like the latency phase: its latency is how long a change
/// waits behind the storm. Then: is the final path right, and does a fresh monitor agree?
@MainActor func storm(_ name: String, cycle: [Change], changes: Int, expected: @escaping (NetworkPath) -> Bool, expectedText: String,
                      second: (monitor: PathMonitor, recorder: Recorder)? = nil) -> StormResult {
    waitForQuiet()
    let messagesStart = nrb_floor_messages()
    let overrunsStart = nrb_floor_overruns()
    let resyncsStart = diagnostics.resyncCount
    let recorderStart = recorder.count
    var sendErrors = 0
    let cpuStart = CPUSample.now(mainTID: mainTID, engineTID: engineTID)
    let t0 = nrb_now_ns()
    for i in 0..<changes {
        sequence &+= 1
        let sent = cycle[i % cycle.count].send(sequence: sequence)
        if sent != 0 { fail("storm sendmsg: \(String(cString: strerror(-sent)))") }
        if i % 64 == 63 { var e: Int32 = 0; sendErrors += Int(nrb_drain_errors(issuer, &e)) }
    }
    let issueSeconds = Double(nrb_now_ns() - t0) / 1e9
    var e: Int32 = 0
    sendErrors += Int(nrb_drain_errors(issuer, &e))
    let probe = measure(.probeAdd, timeoutSeconds: 60)
    waitForQuiet()
    let cpu = CPUSample.now(mainTID: mainTID, engineTID: engineTID) - cpuStart
    let messages = nrb_floor_messages() - messagesStart
    let last = recorder.last
    let current = monitor.currentPath
    // An independent monitor: its own source, socket and fresh dump.
    let fresh = PathMonitor(source: SystemPathSource(configuration: .init(namespace: .named(namespaces.name))))
    fresh.start(queue: DispatchQueue(label: "bench.fresh"))
    let freshPath = fresh.currentPath
    fresh.cancel()
    var secondCorrect: Bool?
    var secondSettle: Double?
    if let second {
        // Its engine is not the one waitForQuiet watches: give it time to converge.
        let waitStart = nrb_now_ns(), deadline = waitStart + Int64(options.secondWaitSeconds) * 1_000_000_000
        while !expected(second.monitor.currentPath) && nrb_now_ns() < deadline { usleep(1_000) }
        secondSettle = Double(nrb_now_ns() - waitStart) / 1e6
        usleep(100_000)
        let path = second.monitor.currentPath
        secondCorrect = expected(path) && second.recorder.last?.path == path && path == freshPath
        if secondCorrect != true {
            // Where is its engine thread? poll(fds, 3, -1) = idle in its main loop (it believes its
            // state); poll(fds, 1, 5000) = waiting for a dump reply; 1000 = a resync retry pending.
            let syscall = readFile("/proc/self/task/\(smallEngineTID)/syscall")
            log("second monitor: \(path); last delivery \(String(describing: second.recorder.last?.path)); fresh monitor: \(freshPath); its engine thread \(smallEngineTID) syscall: \(syscall)")
        }
    }
    var outcome = StormResult(
        name: name, changes: changes + 1, sendErrors: sendErrors, issueSeconds: issueSeconds,
        notifications: messages, floorOverruns: nrb_floor_overruns() - overrunsStart,
        netReachResyncs: diagnostics.resyncCount - resyncsStart, handlerCalls: recorder.count - recorderStart,
        expected: expectedText, finalPath: describe(current),
        finalCorrect: expected(current) && last.map { expected($0.path) } == true,
        lastDeliveryMatchesCurrent: last?.path == current,
        freshMonitorAgrees: freshPath == current,
        floorSettleMicros: probe.map { Double($0.0) / 1000 } ?? .nan,
        netReachSettleMicros: probe.map { Double($0.1) / 1000 } ?? .nan,
        engineCPUMicros: Double(cpu.engine) / 1000, netReachCPUMicros: Double(cpu.netReach) / 1000,
        floorCPUMicros: Double(cpu.floor) / 1000)
    outcome.secondMonitorCorrect = secondCorrect
    outcome.secondMonitorExtraWaitMillis = secondSettle
    if !outcome.freshMonitorAgrees { log("fresh monitor: \(freshPath)\nlong-running: \(current)") }
    apply(.probeDelete)
    return outcome
}

var storms: [StormResult] = []
func gatewayList(_ path: NetworkPath) -> [String] { path.gateways.map { "\($0)" } }
// Since the library follows the kernel's own route lookup (5f6487e), a second default route through
// the same interface with a higher metric is not in the path at all: the probe must be what the
// kernel then uses. So the route storms run add/delete from "no default route", end without one, and
// the probe (via 192.0.2.3) becomes the route the kernel chooses.
log("storm 1: \(options.storm) route changes (add/delete), as fast as the kernel takes them, then the probe")
apply(.routeDelete)
storms.append(storm("route add/delete", cycle: [.routeAdd, .routeDelete], changes: options.storm,
                    expected: { $0.status == .satisfied && gatewayList($0) == [Namespaces.probeGateway] },
                    expectedText: "satisfied, gateways [\(Namespaces.probeGateway)] only"))
log("storm 2: \(options.storm) mixed changes (link down, link up, route add, route delete), then the probe")
storms.append(storm("link down/up + route add/delete", cycle: [.linkDown, .linkUp, .routeReadd, .routeDelete],
                    changes: options.storm,
                    expected: { $0.status == .satisfied && gatewayList($0) == [Namespaces.probeGateway] },
                    expectedText: "satisfied, gateways [\(Namespaces.probeGateway)] only"))
// Back to the satisfied state for the rest.
apply(.routeAdd)
// Storm 3: the same route storm, watched as well by a second monitor (its own source and socket)
// whose receive buffer is only small-buffer, so the kernel drops notifications (ENOBUFS) and it must
// re-dump: is its final state still right? Its CPU is in the process total, so storm 3's CPU
// figures are not comparable with storms 1 and 2.
let smallRecorder = Recorder()
let threadsBeforeSmall = Set(threadSamples().keys)
let small = PathMonitor(source: SystemPathSource(configuration: .init(namespace: .named(namespaces.name), receiveBufferSize: Int32(options.smallBuffer))))
small.pathUpdateHandler = { path in smallRecorder.record(path) }
small.start(queue: DispatchQueue(label: "bench.small"))
var smallEngineCandidate: Int32?
for _ in 0..<100 where smallEngineCandidate == nil {
    smallEngineCandidate = engineThread(startedAfter: threadsBeforeSmall)
    if smallEngineCandidate == nil { usleep(20_000) }
}
let smallEngineTID = smallEngineCandidate ?? -1
log("storm 3: \(options.storm) route changes, plus a second monitor with a \(options.smallBuffer)-byte receive buffer")
apply(.routeDelete)
storms.append(storm("route add/delete, 2nd monitor with a \(options.smallBuffer)-byte buffer", cycle: [.routeAdd, .routeDelete], changes: options.storm,
                    expected: { $0.status == .satisfied && gatewayList($0) == [Namespaces.probeGateway] },
                    expectedText: "satisfied, gateways [\(Namespaces.probeGateway)] only",
                    second: (small, smallRecorder)))
small.cancel()
apply(.routeAdd)

// MARK: Idle

log("idle: \(options.idleSeconds) s with nothing changing")
waitForQuiet()
sleep(1)
let idleBefore = threadSamples()
sleep(UInt32(options.idleSeconds))
let idleAfter = threadSamples()
@MainActor func switches(_ tid: Int32) -> Int {
    guard let before = idleBefore[tid], let after = idleAfter[tid] else { return -1 }
    return after.switches - before.switches
}
var otherThreads: [String] = []
for (tid, before) in idleBefore.sorted(by: { $0.key < $1.key }) where tid != engineTID && tid != nrb_floor_tid() {
    let note = tid == mainTID ? " (the harness's main thread, sleeping)" : ""
    if let after = idleAfter[tid] {
        otherThreads.append("\(before.name)[\(tid)]: \(after.switches - before.switches)\(note)")
    } else {
        otherThreads.append("\(before.name)[\(tid)]: exited during the window")
    }
}

// MARK: netreach watch memory

struct CLIMemory: Codable {
    var path: String
    var rssKB: Int?
    var hwmKB: Int?
    var anonKB: Int?
    var fileKB: Int?
    var note: String
}

/// Runs `netreach watch --namespace NAME` for ~2 s with two changes in between, then reads its
/// VmRSS/VmHWM/RssAnon/RssFile.
@MainActor func measureCLI(_ cli: String) -> CLIMemory {
    var result = CLIMemory(path: cli, note: "")
    let process = Process()
    process.executableURL = URL(fileURLWithPath: cli)
    process.arguments = ["watch", "--namespace", namespaces.name]
    let output = Pipe()
    process.standardOutput = output
    process.standardError = output
    let lines = LineCounter()
    output.fileHandleForReading.readabilityHandler = { handle in lines.add(handle.availableData) }
    defer { output.fileHandleForReading.readabilityHandler = nil }
    do {
        try process.run()
    } catch {
        result.note = "cannot run: \(error)"
        return result
    }
    usleep(1_000_000)
    // Two changes while it watches, so it has handled events, not only started.
    apply(.routeDelete); apply(.routeAdd)
    usleep(1_000_000)
    if process.isRunning, let memory = memory(ofProcess: process.processIdentifier) {
        result.rssKB = memory.rss; result.hwmKB = memory.hwm; result.anonKB = memory.anon; result.fileKB = memory.file
        process.terminate()
        process.waitUntilExit()
        result.note = "after ~2 s and 2 changes; it printed \(lines.count) line(s)"
    } else {
        process.waitUntilExit()
        result.note = "exited with status \(process.terminationStatus) before it could be measured; output: \(lines.text.prefix(300))"
    }
    return result
}

let cliMemory = options.clis.map { measureCLI($0) }

final class LineCounter: @unchecked Sendable {
    // @unchecked: `data` is only touched under `lock`.
    private let lock = NSLock()
    private var data = Data()
    func add(_ chunk: Data) { lock.lock(); data.append(chunk); lock.unlock() }
    var text: String { lock.lock(); defer { lock.unlock() }; return String(decoding: data, as: UTF8.self) }
    var count: Int { text.split(separator: "\n").count }
}

// MARK: Tear down and report

monitor.cancel()
nrb_floor_stop()
let cliLatencies = options.clis.isEmpty || options.cliFlaps == 0 ? nil : measureCLILatency(options.clis)
let cliLatency = cliLatencies?.first
namespaces.tearDown()
let loadAfter = readFile("/proc/loadavg")

let formatter = ISO8601DateFormatter()
let report = Report(
    date: formatter.string(from: Date()), kernel: readFile("/proc/sys/kernel/osrelease"),
    loadBefore: loadBefore, loadAfter: loadAfter, changesMeasured: latencyChanges, timeouts: timeouts,
    all: all, kinds: kinds, linkUpFirstLowerUp: Distribution(lowerUpLatencies), samePeerIndex: options.samePeerIndex,
    dispatchHop: dispatchHop,
    p50Ratio: all.netReach.p50 / all.floor.p50, p99DeltaMicros: all.netReach.p99 - all.floor.p99,
    latencyPhaseEngineCPUPerChange: Double(latencyCPU.engine) / 1000 / Double(latencyChanges),
    latencyPhaseNetReachCPUPerChange: Double(latencyCPU.netReach) / 1000 / Double(latencyChanges),
    latencyPhaseFloorCPUPerChange: Double(latencyCPU.floor) / 1000 / Double(latencyChanges),
    storms: storms, idleSeconds: options.idleSeconds,
    idleEngineSwitches: switches(engineTID), idleFloorSwitches: switches(nrb_floor_tid()),
    idleOtherThreads: otherThreads, cli: cliMemory, cliLatency: cliLatency,
    cliLatencies: options.cliCompare ? cliLatencies : nil, askingFloor: askingReport)

func yesNo(_ ok: Bool) -> String { ok ? "met" : "MISSED" }
var out = ""
@MainActor func say(_ line: String = "") { out += line + "\n" }
say("NetReach detection benchmark — \(report.date), kernel \(report.kernel)\(options.samePeerIndex ? " (--same-peer-index: rate-limited linkwatch)" : "")")
say("load before: \(loadBefore); after: \(loadAfter)")
say("")
say("Change → handler latency (µs), \(options.flaps) route flaps + \(options.flaps) link flaps, \(options.pauseMS) ms apart, \(timeouts) timeouts")
for kind in kinds + [all] {
    say("  \(kind.kind)")
    say("    floor     \(kind.floor.line)")
    say("    NetReach  \(kind.netReach.line)")
    say("    NR−floor  \(kind.delta.line)")
}
say("  link up, first IFF_LOWER_UP (floor socket; NetReach waits for IFF_RUNNING)")
say("    floor     \(report.linkUpFirstLowerUp.line)")
say("  reference: DispatchQueue.async hop to an idle serial queue, 10 ms apart (thread wake-up cost here)")
say("    hop       \(report.dispatchHop.line)")
say(String(format: "p50 ratio NetReach/floor: %.2f× (target ≤ 1.2×: %@)", report.p50Ratio, yesNo(report.p50Ratio <= 1.2)))
say(String(format: "p99 NetReach − floor: %+.1f µs (target ≤ +1000 µs: %@)", report.p99DeltaMicros, yesNo(report.p99DeltaMicros <= 1000)))
say(String(format: "CPU per isolated change: NetReach engine %.1f µs, NetReach total %.1f µs, floor %.1f µs",
           report.latencyPhaseEngineCPUPerChange, report.latencyPhaseNetReachCPUPerChange, report.latencyPhaseFloorCPUPerChange))
if let a = askingReport {
    say("")
    say("Asking floor: the same changes, \(a.rounds) rounds where the floor then asks NetReach's kernel questions in C and \(a.rounds) where it only reads, alternating (\(a.askedBatches) batches asked, \(a.askedConnects) connects)")
    for kind in a.kinds + [a.all] {
        say("  \(kind.kind)")
        say("    floor, reading        \(kind.floor.line)")
        say("    floor, answers read   \(kind.askingFloor.line)")
        say("    NetReach handler      \(kind.netReach.line)")
        say("    (rounds only reading) floor \(String(format: "%.1f", kind.floorReading.p50)) µs, NetReach \(String(format: "%.1f", kind.netReachBesideReading.p50)) µs p50")
        say(String(format: "    p50 ratios: asking floor/floor %.2f×, NetReach/floor %.2f× (%.2f× in reading rounds), NetReach/asking floor %.2f×",
                   kind.askingFloor.p50 / kind.floor.p50, kind.netReach.p50 / kind.floor.p50,
                   kind.netReachBesideReading.p50 / kind.floorReading.p50, kind.netReach.p50 / kind.askingFloor.p50))
    }
    say(String(format: "  floor thread CPU per change: asking %.1f µs, only reading %.1f µs (the questions: %.1f µs); NetReach engine %.1f µs",
               a.floorCPUAskingMicros, a.floorCPUReadingMicros, a.floorCPUAskingMicros - a.floorCPUReadingMicros, a.engineCPUMicros))
}
say("")
for s in storms {
    let n = Double(s.changes), m = Double(max(s.notifications, 1))
    say("Storm: \(s.changes) changes incl. the probe (\(s.name)) issued in \(String(format: "%.2f", s.issueSeconds)) s, \(s.sendErrors) refused")
    say("  notifications \(s.notifications), floor overruns \(s.floorOverruns), NetReach resyncs (ENOBUFS) \(s.netReachResyncs), handler calls \(s.handlerCalls)")
    say("  final: \(s.finalPath); expected \(s.expected): \(s.finalCorrect ? "correct" : "WRONG"); last delivery == currentPath: \(s.lastDeliveryMatchesCurrent); fresh monitor agrees: \(s.freshMonitorAgrees)")
    if let second = s.secondMonitorCorrect {
        say("  second monitor (\(options.smallBuffer)-byte receive buffer): final state \(second ? "correct, and equal to a fresh monitor's" : "WRONG"), reached \(String(format: "%.1f", s.secondMonitorExtraWaitMillis ?? .nan)) ms after the first monitor was quiet (limit \(options.secondWaitSeconds) s); resyncs above count both monitors; CPU below includes both")
    }
    say(String(format: "  probe change sent right behind the storm seen after: floor %.0f µs, NetReach handler %.0f µs", s.floorSettleMicros, s.netReachSettleMicros))
    say(String(format: "  CPU per change: NetReach engine %.2f µs, NetReach total %.2f µs, floor %.2f µs (target ≤ 20 µs: %@)",
               s.engineCPUMicros / n, s.netReachCPUMicros / n, s.floorCPUMicros / n, yesNo(s.netReachCPUMicros / n <= 20)))
    say(String(format: "  CPU per notification: NetReach engine %.2f µs, NetReach total %.2f µs, floor %.2f µs",
               s.engineCPUMicros / m, s.netReachCPUMicros / m, s.floorCPUMicros / m))
}
say("")
say("Idle \(options.idleSeconds) s: NetReach engine thread context switches \(report.idleEngineSwitches) (target 0: \(yesNo(report.idleEngineSwitches == 0))), floor \(report.idleFloorSwitches)")
say("  other threads: \(otherThreads.joined(separator: ", "))")
if cliMemory.isEmpty { say("netreach watch: not measured (no --cli)") }
for cli in cliMemory {
    if let rss = cli.rssKB {
        say(String(format: "netreach watch: VmRSS %.1f MB (anon %.1f, file-backed %.1f), VmHWM %.1f MB (target < 15 MB: %@) — %@ [%@]",
                   Double(rss) / 1024, Double(cli.anonKB ?? 0) / 1024, Double(cli.fileKB ?? 0) / 1024,
                   Double(cli.hwmKB ?? 0) / 1024, yesNo(Double(rss) / 1024 < 15), cli.note, cli.path))
    } else {
        say("netreach watch: \(cli.note) [\(cli.path)]")
    }
}
for c in cliLatencies ?? [] {
    say("")
    say("netreach watch --json vs ip -o monitor link address route (both into pipes, lines timestamped on arrival), \(c.flaps) route flaps + \(c.flaps) link flaps, \(options.pauseMS) ms apart, \(c.timeouts) timeouts, in-process monitor and floor stopped [\(c.cli)]")
    for group in c.groups {
        say("  \(group.kind)")
        say("    ip monitor \(group.ipMonitor.line)")
        say("    watch      \(group.watch.line)")
        say("    watch−ip   \(group.delta.line)")
        say(String(format: "    p50 ratio watch/ip: %.2f× (target ≤ 1.4×: %@)", group.p50Ratio, yesNo(group.p50Ratio <= 1.4)))
        if let a = group.askingMonitor, let i = group.ipBesideAsking, let r = group.askingP50Ratio {
            say("    rounds with AskingMonitor instead of watch (its C lower bound):")
            say("      ip monitor \(i.line)")
            say("      asking     \(a.line)")
            say(String(format: "      p50 ratio asking/ip: %.2f×; watch/asking (p50s of alternate rounds): %.2f×", r, group.watch.p50 / a.p50))
        }
    }
    say(String(format: "  CPU per change (schedstat of live threads): watch %.1f µs, ip monitor %.1f µs; by utime+stime ticks: watch %.1f µs, ip %.1f µs",
               c.watchCPUMicrosPerChange, c.ipCPUMicrosPerChange, c.watchTickCPUMicrosPerChange, c.ipTickCPUMicrosPerChange))
    if let rss = c.rssAfterKB {
        say(String(format: "  watch after the phase (%d changes read): VmRSS %.1f MB (anon %.1f, file-backed %.1f), VmHWM %.1f MB",
                   c.changesSeen ?? -1, Double(rss) / 1024, Double(c.anonAfterKB ?? 0) / 1024, Double(c.fileAfterKB ?? 0) / 1024,
                   Double(c.hwmAfterKB ?? 0) / 1024))
    }
    say("  lines: watch \(c.watchLines), ip monitor \(c.ipLines); load before \(c.loadBefore), after \(c.loadAfter ?? "?")")
    for placement in c.placements ?? [] {
        say("  pinned: \(placement.name), p50 watch / ip µs (ratio):")
        for g in placement.groups {
            say(String(format: "    %-44@ %8.1f / %8.1f  (%.2f×)  n=%d", g.kind, g.watch.p50, g.ipMonitor.p50, g.p50Ratio, g.watch.count))
        }
    }
    if let placements = c.placements, placements.count == 2 {
        // Like with like: each reader's p50 in the rounds where it, not the other, had CPU 1 alone
        // (or shared the issuer's CPU).
        say("  pinned, like with like (p50 watch/ip): alone on CPU 1; beside the issuer")
        for (first, second) in zip(placements[0].groups, placements[1].groups) {
            say(String(format: "    %-44@ %.2f×; %.2f×", first.kind, first.watch.p50 / second.ipMonitor.p50,
                       second.watch.p50 / first.ipMonitor.p50))
        }
    }
}
if options.cliCompare, let all = cliLatencies, all.count > 1 {
    say("")
    say("Builds compared in the same CLI phase (rounds A B B A; ip monitor's p50 in each build's own rounds), p50 / p90 µs:")
    for (index, group) in all[0].groups.enumerated() {
        say("  \(group.kind)")
        for c in all {
            let g = c.groups[index]
            say(String(format: "    watch %8.1f / %8.1f  ip %8.1f / %8.1f  watch/ip p50 %.2f× p90 %.2f×  vs first build p50 %.2f×  n=%d  [%@]",
                       g.watch.p50, g.watch.p90, g.ipMonitor.p50, g.ipMonitor.p90, g.p50Ratio, g.watch.p90 / g.ipMonitor.p90,
                       g.watch.p50 / all[0].groups[index].watch.p50, g.watch.count, c.cli))
        }
    }
    for c in all {
        say(String(format: "  CPU per change: watch %.1f µs, ip %.1f µs; after: VmRSS %.1f MB, VmHWM %.1f MB [%@]",
                   c.watchCPUMicrosPerChange, c.ipCPUMicrosPerChange, Double(c.rssAfterKB ?? 0) / 1024, Double(c.hwmAfterKB ?? 0) / 1024, c.cli))
    }
}
let other = diagnostics.otherMessages
if !other.isEmpty { say("NetReach diagnostics: \(other.prefix(5).joined(separator: " | "))") }
print(out, terminator: "")

if let path = options.json {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    encoder.nonConformingFloatEncodingStrategy = .convertToString(positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
    do { try encoder.encode(report).write(to: URL(fileURLWithPath: path)) } catch { fail("cannot write \(path): \(error)") }
}
