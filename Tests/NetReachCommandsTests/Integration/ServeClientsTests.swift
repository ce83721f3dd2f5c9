import Foundation
import NetReachTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `serve` on a node's address with nothing in front (issue 47): it takes the file limit it may,
/// holds a bounded number of connections and still answers within them, closes idle and slow
/// connections, drops an event-stream client as soon as it goes, and answers `/metrics` while
/// `/probe` lookups are stuck on a resolver. Each is shown by what happens, not by how fast:
/// where a wait is bounded, the bound is far from the behaviour it tells apart.
@Suite("serve survives its clients (integration)", .offPool, .timeLimit(.minutes(3)))
struct ServeClientsTests {
    private static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Scripts/serve_connections.py").path

    /// The driver's JSON report for `arguments` against the serve at `base`.
    private static func drive(_ base: String, _ arguments: [String]) async throws -> [String: Any] {
        let port = try #require(base.split(separator: ":").last.map(String.init))
        let run = try await ChildProcess.run(
            "/usr/bin/python3", [script, arguments[0], port] + arguments.dropFirst(), timeout: .seconds(120))
        #expect(run.status == 0, "\(run.standardError)")
        let line = run.standardOutput.split(separator: "\n").last.map(String.init) ?? ""
        return try #require(
            try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(run.standardOutput)")
    }

    @Test func theSoftFileLimitIsRaisedToTheHardLimit() async throws {
        // As systemd would start it, with a low soft limit: prlimit sets it and executes serve,
        // so the process id is serve's.
        let netreach = try NetreachProcess.executable().path
        let serve = try ChildProcess(
            "/usr/bin/prlimit", ["--nofile=256:4096", netreach, "serve", "--listen", "127.0.0.1:0"])
        defer { serve.kill() }
        _ = try await ServeClient.baseURL(of: serve)
        let limits = try String(contentsOfFile: "/proc/\(serve.pid)/limits", encoding: .utf8)
        let line = limits.split(separator: "\n").first { $0.hasPrefix("Max open files") }
        let fields = line.map { $0.split(separator: " ", omittingEmptySubsequences: true) } ?? []
        #expect(fields.count >= 5 && fields[3] == "4096" && fields[4] == "4096", "\(line ?? "no line")")
        #expect(serve.standardError.contains("open files limit raised from 256 to 4096"), "\(serve.standardError)")
        serve.signal(SIGTERM)
        #expect(await serve.exitStatus() == 0, "standard error: \(serve.standardError)")
    }

    @Test func beyondTheCapTheIdlestMakesRoomAndWhenAllAreBusyANewOneIsRefused() async throws {
        let serve = try NetreachProcess.start(["serve", "--listen", "127.0.0.1:0", "--max-connections", "8"])
        defer { serve.kill() }
        let base = try await ServeClient.baseURL(of: serve)
        #expect(serve.standardError.contains("at most 8 connections"), "\(serve.standardError)")
        let report = try await Self.drive(base, ["cap", "8"])
        #expect(report["heldStatuses"] as? [Int] == Array(repeating: 200, count: 8), "\(report)")
        // Eight idle keep-alive connections fill the cap: a scraper still gets in, and the
        // connection idle longest is the one closed for it.
        #expect(report["freshWhileIdleFull"] as? Int == 200, "\(report)")
        #expect(report["idlestClosed"] as? Bool == true, "\(report)")
        #expect(report["newestOpen"] as? Bool == true, "\(report)")
        // Eight event streams are busy: one more connection is answered 503 at once; once one
        // stream leaves, /livez answers on a fresh connection.
        #expect(report["streamsStarted"] as? [Bool] == Array(repeating: true, count: 8), "\(report)")
        #expect(report["freshWhileBusyFull"] as? Int == 503, "\(report)")
        #expect(report["livezAfterOneLeft"] as? Bool == true, "\(report)")
        serve.signal(SIGTERM)
        #expect(await serve.exitStatus() == 0, "standard error: \(serve.standardError)")
    }

    @Test func anIdleConnectionAndASlowHeaderAreClosed() async throws {
        // Timeouts of 1 and 2 s; the driver waits up to 30 s for each close. The slow header
        // sends a byte every 0.2 s, so only a deadline from its first byte ends it.
        let serve = try NetreachProcess.start([
            "serve", "--listen", "127.0.0.1:0", "--idle-timeout", "1s", "--header-timeout", "2s",
        ])
        defer { serve.kill() }
        let base = try await ServeClient.baseURL(of: serve)
        let report = try await Self.drive(base, ["timeouts"])
        #expect(report["idleStatus"] as? Int == 200, "\(report)")
        #expect(report["idleClosed"] as? Bool == true, "\(report)")
        #expect(report["slowClosed"] as? Bool == true, "\(report)")
        #expect(try await ServeClient.get(base + "/livez").status == 200)
        serve.signal(SIGTERM)
        #expect(await serve.exitStatus() == 0, "standard error: \(serve.standardError)")
    }

    /// With the keep-alive comment ten minutes away, only the connection's own close can drop the
    /// client within the driver's 30 s: before, the next comment's failed write did.
    @Test(arguments: ["fin", "reset"])
    func anEventStreamClientThatGoesIsDroppedAtOnce(_ how: String) async throws {
        let serve = try NetreachProcess.start([
            "serve", "--listen", "127.0.0.1:0", "--event-keep-alive", "10m",
        ])
        defer { serve.kill() }
        let base = try await ServeClient.baseURL(of: serve)
        let report = try await Self.drive(base, ["stream", how])
        #expect(report["started"] as? Bool == true, "\(report)")
        #expect(report["clientsWhileOpen"] as? Double == 1, "\(report)")
        #expect(report["dropped"] as? Bool == true, "\(report)")
        serve.signal(SIGTERM)
        #expect(await serve.exitStatus() == 0, "standard error: \(serve.standardError)")
    }
}

/// `/probe` on a resolver that never answers: serve in a lab namespace whose resolv.conf names
/// 127.0.0.1, where a UDP socket is bound that reads nothing (so no ICMP refusal either).
@Suite("serve's /probe on a stuck resolver (integration)", .offPool, .needsNamespaceRoot, .timeLimit(.minutes(3)))
struct ServeStuckResolverTests {
    private static func threads(of pid: pid_t, named prefix: String? = nil) -> Int {
        if let prefix {
            let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
            return tasks.filter {
                (try? String(contentsOfFile: "/proc/\(pid)/task/\($0)/comm", encoding: .utf8))?.hasPrefix(prefix)
                    == true
            }.count
        }
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("Threads:") }
        return line.flatMap { Int($0.split(separator: "\t").last ?? "") } ?? -1
    }

    @Test func metricsAnswersAndThreadsStayBoundedWhileLookupsHang() async throws {
        try await NetnsLab.withLab { lab in
            try EtcNetns.writeResolvConf("nameserver 127.0.0.1\noptions timeout:30 attempts:1\n", for: lab)
            defer { EtcNetns.remove(for: lab) }
            let silent = try ChildProcess(
                LabCommand.ipExecutable,
                [
                    "netns", "exec", lab.name, "/usr/bin/python3", "-c",
                    "import socket,time\ns=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\ns.bind(('127.0.0.1',53))\nprint('bound',flush=True)\ntime.sleep(300)",
                ])
            defer { silent.kill() }
            #expect(await silent.nextLine() == "bound")
            let serve = try NetreachProcess.start(["serve", "--listen", "127.0.0.1:0"], inNamespace: lab.name)
            defer { serve.kill() }
            let base = try await ServeClient.baseURL(of: serve)
            await ServeClient.until("ready", base, "/readyz", namespace: lab.name) { $0.status == 200 }
            let before = Self.threads(of: serve.pid)

            // Sixteen scrapes, each with 30 s to go: every lookup hangs for its whole timeout.
            var probes: [ChildProcess] = []
            defer { for probe in probes { probe.kill() } }
            for index in 0..<16 {
                probes.append(
                    try ChildProcess(
                        LabCommand.ipExecutable,
                        [
                            "netns", "exec", lab.name, ServeClient.curl, "-s", "--max-time", "60", "-H",
                            "X-Prometheus-Scrape-Timeout-Seconds: 30", base + "/probe?target=stuck\(index).example.net",
                        ]))
            }
            // The pool's four lookup threads are all stuck (the other twelve wait in line).
            await LabPoll.until("four lookups hang", timeout: .seconds(30)) {
                Self.threads(of: serve.pid, named: "netreach-lookup") == 4
            }
            let asked = ContinuousClock.now
            let metrics = try await ServeClient.get(base + "/metrics", namespace: lab.name)
            let took = ContinuousClock.now - asked
            #expect(metrics.status == 200)
            // Far below the lookups' 30 s (before, /metrics waited ~10 s behind them).
            #expect(took < .seconds(5), "/metrics took \(took) while lookups hung")
            let during = Self.threads(of: serve.pid)
            #expect(Self.threads(of: serve.pid, named: "netreach-lookup") == 4)
            // A thread per lookup and a blocked pool thread per probe would be 32 more.
            #expect(during <= before + 12, "threads: \(before) before, \(during) with 16 probes hanging")
            serve.signal(SIGTERM)
            #expect(await serve.exitStatus() != nil, "standard error: \(serve.standardError)")
        }
    }
}
