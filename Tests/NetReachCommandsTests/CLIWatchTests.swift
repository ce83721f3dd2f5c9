import ArgumentParser
import Foundation
import NetReach
import NetReachTestSupport
import Synchronization
import Testing

@testable import NetReachCommands

/// `watch`'s line writer, fed paths directly: what it prints, and when it stops. No root, no kernel.
@Suite("netreach watch loop")
struct CLIWatchTests {
    static let satisfied = NetworkPath(
        status: .satisfied, availableInterfaces: [NetworkInterface(name: "veth0", index: 2, type: .wiredEthernet)],
        supportsIPv4: true, gateways: [IPAddress("10.123.0.1")!])
    static let failure = PathMonitorError.namespaceUnavailable(path: "/var/run/netns/gone", errno: 2)
    static let moment = Date(timeIntervalSince1970: 1_795_376_401.123)

    /// What one run of the loop did.
    struct Run {
        var lines: [String] = []
        var complaints: [String] = []
        var thrown: ExitCode?
    }

    /// The text of one write: a whole line, which must end in its one newline (one write(2) per
    /// line), without it.
    static func line(_ bytes: UnsafeRawBufferPointer) -> String {
        #expect(bytes.last == UInt8(ascii: "\n"))
        #expect(!bytes.dropLast().contains(UInt8(ascii: "\n")))
        return String(decoding: bytes.dropLast(), as: UTF8.self)
    }

    /// Feeds `paths` to watch's line writer as the monitor's engine would, once armed (then the
    /// writer stays open, as for a live monitor, unless `finishes`: an interrupt), with `write`
    /// failing from the `failingWrite`th line on if given.
    static func follow(
        _ paths: [NetworkPath], json: Bool = false, finishes: Bool = true,
        failingWrite: Int? = nil
    ) async -> Run {
        let run = Mutex(Run())
        let writer = PathLineWriter(
            json: json, failure: { failure },
            complain: { complaint in run.withLock { $0.complaints.append(complaint) } },
            write: { bytes throws(ExitCode) in
                try run.withLock { (run) throws(ExitCode) in
                    if let failingWrite, run.lines.count + 1 >= failingWrite { throw CLIExitCode.outputFailed }
                    run.lines.append(line(bytes))
                }
            })
        writer.arm()
        for path in paths { writer.receive(PathUpdate(path: path, time: moment)) }
        if finishes { writer.finish(.interrupted) }
        let ending = await writer.ending()
        return run.withLock { run in
            if case .failed(let status) = ending { run.thrown = status }
            return run
        }
    }

    @Test func onlyTheLatestPathBeforeArmingIsWritten() async {
        let lines = Mutex([String]())
        let writer = PathLineWriter(
            json: false, failure: { nil }, complain: { _ in },
            write: { bytes throws(ExitCode) in lines.withLock { $0.append(Self.line(bytes)) } })
        writer.receive(PathUpdate(path: .unsatisfied(.linkDown), time: Self.moment))
        writer.receive(PathUpdate(path: Self.satisfied, time: Self.moment))
        #expect(lines.withLock { $0 }.isEmpty)
        writer.arm()
        writer.receive(PathUpdate(path: .unsatisfied(.noDefaultRoute), time: Self.moment))
        writer.finish(.interrupted)
        writer.receive(PathUpdate(path: .unsatisfied(.linkDown), time: Self.moment)) // after the end: dropped
        #expect(await writer.ending() == .interrupted)
        #expect(
            lines.withLock { $0 } == [
                "2026-11-22T19:40:01.123Z satisfied veth0(wiredEthernet) ipv4 gw 10.123.0.1",
                "2026-11-22T19:40:01.123Z unsatisfied (no default route)",
            ])
    }

    /// An update that only changed what the path was judged from (a route's table, an interface
    /// the path does not use) is no change of the path: no line.
    @Test func anUpdateWithTheSamePathWritesNoLine() async {
        let lines = Mutex([String]())
        let writer = PathLineWriter(
            json: false, failure: { nil }, complain: { _ in },
            write: { bytes throws(ExitCode) in lines.withLock { $0.append(Self.line(bytes)) } })
        writer.arm()
        let route = RouteLookup.route(.init(interfaceIndex: 2, gateway: IPAddress("10.123.0.1")))
        writer.receive(PathUpdate(path: Self.satisfied, routes: [.ipv4: route], time: Self.moment, sequence: 1))
        writer.receive(
            PathUpdate(
                path: Self.satisfied, routes: [.ipv4: .route(.init(interfaceIndex: 2, table: 100))],
                time: Self.moment, sequence: 2))
        writer.receive(PathUpdate(path: .unsatisfied(.linkDown), time: Self.moment, sequence: 3))
        writer.finish(.interrupted)
        #expect(await writer.ending() == .interrupted)
        #expect(
            lines.withLock { $0 } == [
                "2026-11-22T19:40:01.123Z satisfied veth0(wiredEthernet) ipv4 gw 10.123.0.1",
                "2026-11-22T19:40:01.123Z unsatisfied (link down)",
            ])
    }

    @Test func printsEveryPathUntilTheSequenceEnds() async {
        let run = await Self.follow([Self.satisfied, .unsatisfied(.noDefaultRoute), Self.satisfied])
        #expect(run.thrown == nil)
        #expect(
            run.lines == [
                "2026-11-22T19:40:01.123Z satisfied veth0(wiredEthernet) ipv4 gw 10.123.0.1",
                "2026-11-22T19:40:01.123Z unsatisfied (no default route)",
                "2026-11-22T19:40:01.123Z satisfied veth0(wiredEthernet) ipv4 gw 10.123.0.1",
            ])
        #expect(run.complaints.isEmpty)
    }

    /// `--json` lines are written from the bytes they were made in: each the object
    /// `PathJSON` makes (held to `JSONEncoder`'s), then its newline.
    @Test func jsonLinesAreTheObjectsAndTheirNewlines() async throws {
        let paths = [Self.satisfied, .unsatisfied(.noDefaultRoute)]
        let run = await Self.follow(paths, json: true)
        #expect(run.thrown == nil)
        #expect(run.lines == paths.map { PathJSON.line($0, at: Self.moment) })
        let first = try JSONDecoder().decode(NetworkPath.self, from: Data(try #require(run.lines.first).utf8))
        #expect(first == Self.satisfied)
    }

    /// The library's report that the monitor stopped observing (a deleted namespace): the line as
    /// usual, then the failure, then exit 2, without waiting for a change that cannot come
    /// (`finishes: false` would hang the loop otherwise).
    @Test(arguments: [false, true])
    func aMonitorThatStopsObservingIsPrintedThenEndsWithStatus2(json: Bool) async throws {
        let run = await Self.follow(
            [Self.satisfied, .unsatisfied(.monitorUnavailable), Self.satisfied],
            json: json, finishes: false)
        #expect(run.thrown == CLIExitCode.monitorUnavailable)
        #expect(run.lines.count == 2)
        if json {
            let last = try JSONDecoder().decode(NetworkPath.self, from: Data((run.lines.last ?? "").utf8))
            #expect(last.unsatisfiedReason == .monitorUnavailable)
        } else {
            #expect(run.lines.last == "2026-11-22T19:40:01.123Z unsatisfied (monitor unavailable)")
        }
        #expect(run.complaints == ["cannot observe the network: \(Self.failure)"])
    }

    @Test func aFailedWriteEndsTheLoopWithTheWritersStatus() async {
        let run = await Self.follow(
            [Self.satisfied, .unsatisfied(.linkDown), Self.satisfied],
            finishes: false, failingWrite: 2)
        #expect(run.thrown == CLIExitCode.outputFailed)
        #expect(run.lines.count == 1)
    }

    @Test func aFailedWriteOfTheUnavailablePathIsStillAnOutputFailure() async {
        let run = await Self.follow([.unsatisfied(.monitorUnavailable)], finishes: false, failingWrite: 1)
        #expect(run.thrown == CLIExitCode.outputFailed)
        #expect(run.complaints.isEmpty)
    }

    /// `status`'s block: every key, each value in one column, so `awk '/^dns:/ {print $2}'` and the
    /// eye both find it.
    @Test func statusBlockAlignsEveryValueInOneColumn() {
        let block = PathFormatting.block(Self.satisfied)
        let lines = block.split(separator: "\n").map(String.init)
        #expect(
            lines.map { String($0.prefix { $0 != ":" }) } == [
                "status", "reason", "interfaces", "ipv4", "ipv6", "dns", "expensive", "constrained", "multipath",
                "gateways",
            ])
        // "constrained:" is the longest key: one space after the colon that follows it.
        #expect(lines.contains("constrained: no"))
        #expect(lines.contains("status:      satisfied"))
        #expect(lines.contains("gateways:    10.123.0.1"))
        let valueColumns = Set(lines.map { line in line.distance(from: line.startIndex, to: line.lastIndex(of: " ")!) })
        #expect(valueColumns == ["constrained: ".count - 1], "\(lines)")
    }
}
