#if os(Linux)
import Foundation
import NetReachTestSupport
import Glibc
import Synchronization
import Testing
@testable import NetReach

/// `netreach condition` as users run it: in front of nginx, used by curl and by `netreach get`,
/// changed with curl through its control API. The same transfers go direct in the same test, so
/// every check compares with the real thing.
@Suite(
    "netreach condition in front of nginx, with curl (integration)", .offPool, .serialized, .needsNamespaceRoot,
    .timeLimit(.minutes(3)))
struct ConditionCommandTests {
    @Test func throughALimitedLinkCurlGetsTheSameBytesLater() async throws {
        try await offPool { try Self.throughALimitedLinkCurlGetsTheSameBytesLaterBody() }
    }

    private static func throughALimitedLinkCurlGetsTheSameBytesLaterBody() throws {
        let nginx = try Nginx.start()
        defer { nginx.stop() }
        let condition = try Conditioner.start([
            "--upstream", "127.0.0.1:\(nginx.port)", "--down-bandwidth", "16mbit", "--delay", "20ms",
        ])
        defer { condition.stop() }
        let started = Date()
        let through = try run("/usr/bin/curl", ["-sS", condition.url("/file.bin")])
        let seconds = Date().timeIntervalSince(started)
        let direct = try run("/usr/bin/curl", ["-sS", nginx.url("/file.bin")])
        #expect(through.status == 0 && direct.status == 0, "\(through.error)")
        #expect(through.outputData == direct.outputData, "the same bytes")
        // 4 MB at 2 MB/s: at least 2 s (a lower bound is behaviour; how close is measured in the benchmark).
        #expect(seconds >= 1.9, "\(seconds) s")
        let finished = condition.stopAndCollect()
        #expect(finished.status == 0, "\(finished.error)")
        let connection = finished.events.first { $0["event"] as? String == "connection" }
        let downstream = connection?["downstream"] as? [String: Any]
        #expect(
            (downstream?["bytesDelivered"] as? Int ?? 0) > Nginx.fileSize,
            "headers and body: \(String(describing: downstream))")
        #expect(finished.events.last?["event"] as? String == "stopped")
    }

    @Test func theControlAPIChangesAListenerWhileItRunsAndLeavesTheOtherAlone() async throws {
        try await offPool { try Self.theControlAPIChangesAListenerWhileItRunsAndLeavesTheOtherAloneBody() }
    }

    private static func theControlAPIChangesAListenerWhileItRunsAndLeavesTheOtherAloneBody() throws {
        let nginx = try Nginx.start()
        defer { nginx.stop() }
        // Listener a on an address of its own: while it is down, no other test's server can take
        // its port there and answer the connection that must be refused.
        let condition = try Conditioner.start([
            "--listen", "a=\(otherLoopbackAddress()):0", "--listen", "b=127.0.0.1:0",
            "--upstream", "127.0.0.1:\(nginx.port)",
        ])
        defer { condition.stop() }
        let small = try run("/usr/bin/curl", ["-sS", nginx.url("/small.bin")]).outputData

        let profile = try condition.control("PUT", "/listeners/a/conditions", #"{"profile":"dsl"}"#)
        #expect(profile.code == 200 && profile.json["profile"] as? String == "dsl", "\(profile.body)")
        let fault = try condition.control(
            "POST", "/listeners/a/faults",
            #"{"name":"cut","type":"limit_data","bytes":100000,"direction":"downstream"}"#)
        #expect(fault.code == 201, "\(fault.body)")
        let cut = try run("/usr/bin/curl", ["-sS", condition.url("/small.bin", listener: "a")])
        #expect(cut.status == 18, "curl: transfer closed with outstanding data: \(cut.error)")
        #expect(cut.outputData.count < 100_000 && small.starts(with: cut.outputData))
        let other = try run("/usr/bin/curl", ["-sS", condition.url("/small.bin", listener: "b")])
        #expect(other.status == 0 && other.outputData == small, "listener b is unaffected")

        #expect(try condition.control("DELETE", "/listeners/a/faults/cut").code == 204)
        #expect(try condition.control("PUT", "/listeners/a/conditions", "{}").code == 200)
        #expect(try run("/usr/bin/curl", ["-sS", condition.url("/small.bin", listener: "a")]).outputData == small)

        #expect(try condition.control("POST", "/listeners/a/down").json["listening"] as? Bool == false)
        #expect(
            try run("/usr/bin/curl", ["-sS", condition.url("/small.bin", listener: "a")]).status == 7,
            "connection refused")
        #expect(try condition.control("POST", "/listeners/a/up").json["listening"] as? Bool == true)
        #expect(try run("/usr/bin/curl", ["-sS", condition.url("/small.bin", listener: "a")]).outputData == small)

        // Malformed requests: a clear error each, and the conditioner carries on.
        let notJSON = try condition.control("PUT", "/listeners/a/conditions", "fast please")
        #expect(notJSON.code == 400 && (notJSON.json["error"] as? String ?? "").contains("not a JSON object"))
        let unknown = try condition.control("PUT", "/listeners/a/conditions", #"{"profile":"5g"}"#)
        #expect(unknown.code == 400 && (unknown.json["error"] as? String ?? "").contains("unknown profile 5g"))
        #expect(try condition.control("GET", "/listeners/c").code == 404)
        #expect(try condition.control("DELETE", "/stats").code == 405)
        let stats = try condition.control("GET", "/stats")
        let listeners = stats.json["listeners"] as? [[String: Any]] ?? []
        #expect(listeners.map { $0["name"] as? String } == ["a", "b"])
        #expect(
            (listeners.first?["connections"] as? [Any])?.count == 3,
            "cut, restored, after up (the refused connect never was one)")
        #expect(try run("/usr/bin/curl", ["-sS", condition.url("/small.bin", listener: "b")]).outputData == small)
        #expect(condition.stopAndCollect().status == 0)
    }

    @Test func aSlowTransferIsNotAStallButATotalLimitCutsIt() async throws {
        try await offPool { try Self.aSlowTransferIsNotAStallButATotalLimitCutsItBody() }
    }

    private static func aSlowTransferIsNotAStallButATotalLimitCutsItBody() throws {
        let nginx = try Nginx.start()
        defer { nginx.stop() }
        // 20 kB every 100 ms: 200 kB/s, never 100 ms without a byte.
        let condition = try Conditioner.start([
            "--upstream", "127.0.0.1:\(nginx.port)", "--fault", "slicer:size=20000,delay=100ms",
        ])
        defer { condition.stop() }
        let scratch = nginx.scratch
        let slow = try run(
            netreachPath(),
            [
                "get", "-q", "--stall-timeout", "600ms", "--retries", "0", "-o", scratch + "/slow.bin",
                condition.url("/small.bin"),
            ])
        #expect(slow.status == 0, "a transfer that keeps flowing is never cut: \(slow.error)")
        #expect(
            FileManager.default.contents(atPath: scratch + "/slow.bin")
                == FileManager.default.contents(atPath: scratch + "/root/small.bin"))

        let limited = try run(
            netreachPath(),
            ["get", "--max-time", "800ms", "--retries", "0", "-o", scratch + "/cut.bin", condition.url("/small.bin")])
        #expect(limited.status == 28 && limited.error.contains("timed out"), "\(limited.error)")
        let part = (try? FileManager.default.attributesOfItem(atPath: scratch + "/cut.bin.part")[.size] as? Int) ?? 0
        #expect(part > 0 && part < Nginx.smallSize, "the part kept: \(part) bytes")
    }

    @Test func aStalledDownloadEndsAtTheStallTimeoutAndContinueFinishesIt() async throws {
        try await offPool { try Self.aStalledDownloadEndsAtTheStallTimeoutAndContinueFinishesItBody() }
    }

    private static func aStalledDownloadEndsAtTheStallTimeoutAndContinueFinishesItBody() throws {
        let nginx = try Nginx.start()
        defer { nginx.stop() }
        // 400 kB at 1 Mbit/s takes 3.2 s; the link stalls (timeout fault: nothing more delivered) once
        // the first bytes are in the file (not after a fixed time: a busy machine may start `get` late).
        let condition = try Conditioner.start(["--upstream", "127.0.0.1:\(nginx.port)", "--down-bandwidth", "1mbit"])
        defer { condition.stop() }
        let file = nginx.scratch + "/stalled.bin"
        let stalledAt = Mutex<Date?>(nil)
        let stall = Thread {
            let deadline = Date().addingTimeInterval(30)
            while Date() < deadline {
                let size = (try? FileManager.default.attributesOfItem(atPath: file + ".part")[.size] as? Int) ?? 0
                if size > 0 { break }
                usleep(5_000)
            }
            _ = try? condition.control(
                "POST", "/listeners/1/faults", #"{"name":"stall","type":"timeout","direction":"downstream"}"#)
            stalledAt.withLock { $0 = Date() }
        }
        stall.start()
        let stalled = try run(
            netreachPath(), ["get", "--stall-timeout", "1s", "--retries", "0", "-o", file, condition.url("/small.bin")])
        let ended = Date()
        #expect(stalled.status == 28 && stalled.error.contains("timed out"), "\(stalled.error)")
        let sinceStall = stalledAt.withLock { $0 }.map { ended.timeIntervalSince($0) } ?? -1
        // At least the stall timeout after the last byte (which came just before the fault), and
        // far less than any other limit `get` has.
        #expect(sinceStall >= 0.9 && sinceStall < 10, "ended by the stall timeout: \(sinceStall) s after the stall")
        let part = (try? FileManager.default.attributesOfItem(atPath: file + ".part")[.size] as? Int) ?? 0
        #expect(part > 0 && part < Nginx.smallSize, "the part kept: \(part) bytes")

        #expect(try condition.control("DELETE", "/listeners/1/faults/stall").code == 204)
        let resumed = try run(netreachPath(), ["get", "-q", "--continue", "-o", file, condition.url("/small.bin")])
        #expect(resumed.status == 0, "\(resumed.error)")
        let direct = try run("/usr/bin/curl", ["-sS", nginx.url("/small.bin")])
        #expect(FileManager.default.contents(atPath: file) == direct.outputData, "the resumed file is what curl gets")
        let log = (try? String(contentsOfFile: nginx.scratch + "/access.log", encoding: .utf8)) ?? ""
        #expect(log.contains("\"GET /small.bin HTTP/1.1\" 206"), "resumed with a range: \(log)")
    }

    @Test func badInputIsAClearErrorAndARefusingUpstreamClosesOnlyItsClients() async throws {
        try await offPool { try Self.badInputIsAClearErrorAndARefusingUpstreamClosesOnlyItsClientsBody() }
    }

    private static func badInputIsAClearErrorAndARefusingUpstreamClosesOnlyItsClientsBody() throws {
        let nginx = try Nginx.start()
        defer { nginx.stop() }
        let usage: [([String], String)] = [
            (
                ["--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:80", "--profile", "5g"],
                "unknown profile; the profiles are wifi, wifi-ac, lte"
            ),
            (
                ["--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:80", "--bandwidth", "fast"],
                "expected a bandwidth such as"
            ),
            (["--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:80", "--loss", "150%"], "a loss is from 0 to 100%"),
            (["--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:80", "--fault", "explode"], "unknown fault explode"),
            (
                ["--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:80", "--fault", "slicer:size=10,variation=10"],
                "sizeVariation must be"
            ),
            (["--listen", "127.0.0.1:0", "--upstream", "nowhere"], "expected HOST:PORT"),
            (
                ["--listen", "x=127.0.0.1:0", "--listen", "x=127.0.0.1:0", "--upstream", "127.0.0.1:80"],
                "two listeners are named x"
            ),
            (
                ["--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:80", "--profile", "3g", "--profile", "edge"],
                "--profile was given more than once"
            ),
            (["--upstream", "127.0.0.1:80"], "--listen is required"),
        ]
        for (arguments, message) in usage {
            let result = try run(netreachPath(), ["condition"] + arguments)
            #expect(
                result.status == 64 && result.error.contains(message), "\(arguments): \(result.status) \(result.error)")
        }
        let taken = try run(
            netreachPath(), ["condition", "--listen", "127.0.0.1:\(nginx.port)", "--upstream", "127.0.0.1:80"])
        #expect(taken.status == 3 && taken.error.contains("Address already in use"), "\(taken.error)")
        let open = try run(
            netreachPath(),
            ["condition", "--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:80", "--control", "0.0.0.0:0"])
        #expect(open.status == 3 && open.error.contains("loopback only"), "\(open.error)")

        let condition = try Conditioner.start([
            "--listen", "dead=127.0.0.1:0", "--listen", "live=127.0.0.1:0",
            "--upstream", "\(otherLoopbackAddress()):9", "--upstream", "127.0.0.1:\(nginx.port)",
        ])
        defer { condition.stop() }
        let dead = try run("/usr/bin/curl", ["-sS", condition.url("/small.bin", listener: "dead")])
        #expect(dead.status == 52 || dead.status == 56, "an empty reply or a reset: \(dead.status) \(dead.error)")
        let live = try run("/usr/bin/curl", ["-sS", condition.url("/small.bin", listener: "live")])
        #expect(live.status == 0 && live.outputData.count == Nginx.smallSize, "the other listener is unaffected")
        let finished = condition.stopAndCollect()
        #expect(finished.status == 0)
        #expect(
            finished.error.contains("listener dead, connection 1: the upstream could not be connected to"),
            "\(finished.error)")
        let refused = finished.events.first {
            $0["event"] as? String == "connection" && $0["listener"] as? String == "dead"
        }
        #expect((refused?["upstream"] as? [String: Any])?["upstreamRefused"] as? Bool == true)
    }

    @Test func helpShowsEveryProfileWithItsFigures() async throws {
        try await offPool { try Self.helpShowsEveryProfileWithItsFiguresBody() }
    }

    private static func helpShowsEveryProfileWithItsFiguresBody() throws {
        let help = try run(netreachPath(), ["condition", "--help"])
        #expect(help.status == 0)
        for line in [
            "3g                780 kbit/s  100 ms  330 kbit/s  100 ms  0",
            "very-bad          1 Mbit/s    500 ms  1 Mbit/s    500 ms  10%",
            "edge              240 kbit/s  400 ms  200 kbit/s  440 ms  0",
        ] {
            #expect(help.output.contains(line), "\(line)")
        }
        #expect(
            help.output.split(separator: "\n").allSatisfy {
                $0.count <= 80 || $0.hasPrefix("USAGE") || $0.hasPrefix(" ") && $0.contains("[--")
            },
            "fits 80 columns")
    }
}

/// A `netreach condition` process: its addresses from the ready line, its later lines kept.
private final class Conditioner: Sendable {
    let process: ChildProcess
    let control: String
    let listeners: [String: String]

    /// Starts it with `arguments` (a `--listen 127.0.0.1:0` is added when none is given) and
    /// `--json`, and waits (at most 30 s) for its ready line.
    static func start(_ arguments: [String]) throws -> Conditioner {
        var arguments = arguments
        if !arguments.contains("--listen") { arguments = ["--listen", "127.0.0.1:0"] + arguments }
        return try Conditioner(process: ChildProcess(try netreachPath(), ["condition"] + arguments + ["--json"]))
    }

    private init(process: ChildProcess) throws {
        self.process = process
        let deadline = Date().addingTimeInterval(30)
        while process.outputLines.isEmpty && process.isRunning && Date() < deadline { usleep(10_000) }
        guard let line = process.outputLines.first,
            let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
            object["event"] as? String == "ready"
        else {
            process.kill()
            _ = process.waitBlocking(timeout: .seconds(10))
            throw ConditionerStartError(
                description: "no ready line: \(process.standardOutput) \(process.standardError)")
        }
        control = object["control"] as? String ?? ""
        var listeners: [String: String] = [:]
        for listener in object["listeners"] as? [[String: Any]] ?? [] {
            if let name = listener["name"] as? String, let listen = listener["listen"] as? String {
                listeners[name] = listen
            }
        }
        self.listeners = listeners
    }

    func url(_ path: String, listener: String = "1") -> String { "http://\(listeners[listener] ?? "?")\(path)" }

    /// A control request made with curl: its status code, body and the body as JSON.
    func control(
        _ method: String, _ path: String, _ body: String? = nil
    ) throws -> (code: Int, body: String, json: [String: Any]) {
        var arguments = ["-sS", "-X", method, "-w", "\n%{http_code}", "http://\(control)\(path)"]
        if let body { arguments += ["--data-binary", body] }
        let result = try run("/usr/bin/curl", arguments)
        var lines = result.output.split(separator: "\n", omittingEmptySubsequences: false)
        let code = Int(lines.popLast() ?? "") ?? 0
        let text = lines.joined(separator: "\n")
        let json = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] ?? [:]
        return (code, text, json)
    }

    /// SIGTERM, then its exit status, every JSON line it printed (parsed) and its standard error.
    func stopAndCollect() -> (status: Int32, events: [[String: Any]], error: String) {
        process.terminate()
        var status = process.waitBlocking(timeout: .seconds(10))
        if status == nil {
            process.kill()
            status = process.waitBlocking(timeout: .seconds(10))
        }
        // Every line is one the schema describes ($defs/conditionLine).
        for line in process.outputLines {
            #expect((try? CLIJSONSchemaTests.expectConforms(line, definition: "conditionLine")) != nil, "\(line)")
        }
        let events = process.outputLines.compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        return (status ?? -1, events, process.standardError)
    }

    func stop() {
        process.terminate()
    }
}

private struct ConditionerStartError: Error, CustomStringConvertible {
    var description: String
}
#endif
