// ConnectivityLatency: what a ConnectivityMonitor costs and how fast it judges (issue 14).
//
//   ConnectivityLatency [--rounds N] [--idle-seconds S] [--json FILE]
//   ConnectivityLatency --serve          (the probe server: this executable, re-launched)
//
// 1. Verdict after a path change: a simulated link comes back (carrier up), the path monitor
//    delivers the path, the ConnectivityMonitor probes (AsyncHTTPClientProber, over IPv4, to a
//    server on 127.0.0.1 in another process) and publishes `full`. Measured from the change to the
//    verdict, against the probe's own round trip (the prober's latency, from the evidence) and a
//    bare GET to the same server with a fresh AsyncHTTPClientTransport, interleaved in the same run.
// 2. While full and idle for S seconds: probes the server saw, and context switches of every
//    thread of this process (from /proc/self/task/*/status).
// 3. Resident memory: a started PathMonitor, then a ConnectivityMonitor with a prober that sends
//    nothing, then the HTTP stack loaded (one GET), then a ConnectivityMonitor with
//    AsyncHTTPClientProber after a round.
//
// Only 127.0.0.1 is contacted.
import BenchStatistics
import Dispatch
import Foundation
import HTTPTypes
import NetReach
import NetReachAsyncHTTPClient
import NetReachConnectivity
import NetReachHTTP
import NetReachTesting
#if canImport(Glibc)
import Glibc
#endif

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("ConnectivityLatency: \(message)\n".utf8))
    exit(1)
}

let arguments = Array(CommandLine.arguments.dropFirst())
func option(_ name: String, _ fallback: Int) -> Int {
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count, let value = Int(arguments[index + 1]) else { return fallback }
    return value
}
func stringOption(_ name: String) -> String? {
    guard let index = arguments.firstIndex(of: name), index + 1 < arguments.count else { return nil }
    return arguments[index + 1]
}

if arguments.first == "--serve" { ProbeServer.serve() }

let rounds = option("--rounds", 200)
let idleSeconds = option("--idle-seconds", 12)

// MARK: The probe server, in a child process

let server = ProbeServer.Client()
let probeURL = URL(string: "http://127.0.0.1:\(server.port)/generate_204")!

func residentKB() -> Int {
    let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
    for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
        return Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
    }
    return 0
}

/// Voluntary + involuntary context switches per thread of this process.
func switchesPerThread() -> [String: Int] {
    var result: [String: Int] = [:]
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
    for tid in tasks {
        guard let status = try? String(contentsOfFile: "/proc/self/task/\(tid)/status", encoding: .utf8) else { continue }
        var name = tid, total = 0
        for line in status.split(separator: "\n") {
            if line.hasPrefix("Name:") { name = "\(tid) \(line.dropFirst(5).trimmingCharacters(in: .whitespaces))" }
            if line.hasPrefix("voluntary_ctxt_switches:") || line.hasPrefix("nonvoluntary_ctxt_switches:") {
                total += Int(line.split(separator: "\t").last.map { $0.trimmingCharacters(in: .whitespaces) } ?? "0") ?? 0
            }
        }
        result[name] = total
    }
    return result
}

struct SendsNothing: ConnectivityProber {
    func probe(_ probe: ConnectivityProbe, over family: IPAddress.Family, timeout: Duration) async -> ProbeResult {
        ProbeResult(probe: probe, family: family, status: 204, latency: .zero, verdict: .passed)
    }
}

func waitFor(_ monitor: ConnectivityMonitor, _ predicate: (Connectivity) -> Bool) async -> ContinuousClock.Instant? {
    for _ in 0..<20_000 {   // at most 20 s
        if predicate(monitor.current) { return .now }
        try? await Task.sleep(for: .milliseconds(1))
    }
    return nil
}

// MARK: 3 (first, while the process is fresh). Resident memory

let network = SimulatedNetwork.connected(.wiredEthernet, name: "eth0")
let paths = PathMonitor(source: network)
paths.start(queue: DispatchQueue(label: "paths"))
try? await Task.sleep(for: .milliseconds(300))
let rssPaths = residentKB()

// The baseline for section 2: the same idle window with the PathMonitor alone.
let baselineBefore = switchesPerThread()
try? await Task.sleep(for: .seconds(idleSeconds))
let baselineSwitches = switchesPerThread().reduce(0) { sum, entry in sum + entry.value - (baselineBefore[entry.key] ?? entry.value) }

var quiet = ConnectivityMonitor.Configuration(probes: [ConnectivityProbe(probeURL)])
quiet.families = [.ipv4]
quiet.usesCaptivePortalAPI = false
// Section 1 times the verdict after the carrier returns; the loss before it need not wait out the
// carrier-loss delay (6 s by default) to show `none`.
quiet.carrierLossDelay = .zero
let nothing = ConnectivityMonitor(configuration: quiet, pathMonitor: paths, prober: SendsNothing())
nothing.start(queue: DispatchQueue(label: "nothing"))
_ = await waitFor(nothing) { $0.level == .full }
try? await Task.sleep(for: .milliseconds(300))
let rssMonitor = residentKB()
nothing.cancel()

// An application that already sends HTTP with AsyncHTTPClient has its stack loaded: one GET.
let head = HTTPRequest(method: .get, scheme: "http", authority: "127.0.0.1:\(server.port)", path: "/generate_204")
func bareGETOnce() async throws -> Duration {
    let start = ContinuousClock.now
    let transport = try AsyncHTTPClientTransport(settings: TransportSettings(proxy: .environment([:])))
    let (response, body) = try await transport.send(head, body: nil, options: TransportOptions(stallTimeout: .seconds(5)))
    for try await _ in body {}
    guard response.status.code == 204 else { fail("bare GET: \(response.status)") }
    return ContinuousClock.now - start
}
_ = try await bareGETOnce()
try? await Task.sleep(for: .milliseconds(300))
let rssHTTP = residentKB()

// No proxy, as for the bare GET it is compared with.
let monitor = ConnectivityMonitor(
    configuration: quiet, pathMonitor: paths,
    prober: AsyncHTTPClientProber(settings: TransportSettings(proxy: .environment([:]))))
monitor.start(queue: DispatchQueue(label: "connectivity"))
guard await waitFor(monitor, { $0.level == .full }) != nil else { fail("the first round did not say full: \(monitor.current)") }
try? await Task.sleep(for: .milliseconds(300))
let rssProber = residentKB()

// MARK: 1. Verdict after a path change, interleaved with bare GETs

var changeToVerdict: [Int64] = []
var probeLatency: [Int64] = []
var overhead: [Int64] = []
var bareGET: [Int64] = []
func nanoseconds(_ duration: Duration) -> Int64 {
    duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000
}
for _ in 0..<rounds {
    network.setCarrier("eth0", false)
    guard await waitFor(monitor, { $0.level == .none }) != nil else { fail("no `none` after carrier loss") }
    let start = ContinuousClock.now
    network.setCarrier("eth0", true)
    guard let end = await waitFor(monitor, { $0.level == .full }) else { fail("no `full` after carrier: \(monitor.current)") }
    let total = end - start
    let probe = monitor.current.ipv4.evidence.first?.latency ?? .zero
    changeToVerdict.append(nanoseconds(total))
    probeLatency.append(nanoseconds(probe))
    overhead.append(nanoseconds(total - probe))
    // A bare GET with a fresh transport, as the prober makes one per probe.
    bareGET.append(nanoseconds(try await bareGETOnce()))
}

// MARK: 2. Full and idle

try? await Task.sleep(for: .seconds(1))
let probesBefore = server.requests
let switchesBefore = switchesPerThread()
try? await Task.sleep(for: .seconds(idleSeconds))
let switchesAfter = switchesPerThread()
let probesIdle = server.requests - probesBefore
let mainThread = "\(getpid())"
var idleSwitches: [(String, Int)] = []
for (thread, after) in switchesAfter {
    guard let before = switchesBefore[thread] else { continue }
    idleSwitches.append((thread, after - before))
}
idleSwitches.sort { $0.0 < $1.0 }

// MARK: Report

let verdictDistribution = Distribution(changeToVerdict)
let probeDistribution = Distribution(probeLatency)
let overheadDistribution = Distribution(overhead)
let bareDistribution = Distribution(bareGET)
print("== verdict after a path change (carrier up → full), \(rounds) rounds, µs")
print("change → verdict      \(verdictDistribution.line)")
print("probe round trip      \(probeDistribution.line)")
print("verdict − probe       \(overheadDistribution.line)")
print("bare GET (fresh AHC)  \(bareDistribution.line)")
print(String(format: "p50 verdict / (p50 bare GET + 5 ms) = %.3f  (target ≤ 1)", verdictDistribution.p50 / (bareDistribution.p50 + 5000)))
print(String(format: "p90 verdict / (p90 bare GET + 5 ms) = %.3f", verdictDistribution.p90 / (bareDistribution.p90 + 5000)))
print("== full and idle for \(idleSeconds) s")
print("probes the server saw: \(probesIdle)")
print("context switches, all threads: \(idleSwitches.reduce(0) { $0 + $1.1 }) (the same window with the PathMonitor alone, before any ConnectivityMonitor: \(baselineSwitches))")
for (thread, count) in idleSwitches {
    print("  thread \(thread): \(count) context switches\(thread.hasPrefix(mainThread + " ") ? " (main thread)" : "")")
}
print("== resident memory (VmRSS)")
print(String(format: "PathMonitor started:                              %6.2f MB", Double(rssPaths) / 1024))
print(String(format: "+ ConnectivityMonitor (prober sends nothing):     %6.2f MB (+%.2f MB)", Double(rssMonitor) / 1024, Double(rssMonitor - rssPaths) / 1024))
print(String(format: "+ one GET with AsyncHTTPClientTransport (HTTP stack loaded): %6.2f MB", Double(rssHTTP) / 1024))
print(String(format: "+ ConnectivityMonitor with AsyncHTTPClientProber: %6.2f MB (+%.2f MB over the HTTP stack, +%.2f MB over the PathMonitor alone)",
             Double(rssProber) / 1024, Double(rssProber - rssHTTP) / 1024, Double(rssProber - rssPaths) / 1024))

if let path = stringOption("--json") {
    struct Output: Encodable {
        var rounds: Int
        var changeToVerdict, probeLatency, verdictMinusProbe, bareGET: Distribution
        var idleSeconds, probesWhileIdle, baselineIdleSwitches: Int
        var idleSwitches: [String: Int]
        var rssPathMonitorKB, rssWithMonitorKB, rssWithHTTPStackKB, rssWithProberKB: Int
    }
    let output = Output(rounds: rounds, changeToVerdict: verdictDistribution, probeLatency: probeDistribution,
                        verdictMinusProbe: overheadDistribution, bareGET: bareDistribution,
                        idleSeconds: idleSeconds, probesWhileIdle: probesIdle, baselineIdleSwitches: baselineSwitches,
                        idleSwitches: Dictionary(uniqueKeysWithValues: idleSwitches),
                        rssPathMonitorKB: rssPaths, rssWithMonitorKB: rssMonitor, rssWithHTTPStackKB: rssHTTP, rssWithProberKB: rssProber)
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    try encoder.encode(output).write(to: URL(fileURLWithPath: path))
}
monitor.cancel()
paths.cancel()
server.stop()
exit(0)
