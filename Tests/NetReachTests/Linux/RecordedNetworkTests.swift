#if os(Linux)
import Dispatch
import Foundation
import NetReachSystem
import NetReachTesting
import Testing

@testable import NetReach

/// `RecordedNetwork` on `Fixtures/path-changes.hex`: what the kernel sent the engine for a dump and
/// twelve changes (route delete and add, link down and up, addresses, a rule), recorded by
/// `Fixtures/record_path_changes.sh` with the kernel's own route choice after each. The PathChange
/// benchmark (Benchmarks/) replays the same bytes.
@Suite("RecordedNetwork: a recorded kernel replayed")
struct RecordedNetworkTests {
    /// Collects updates as the observer gets them.
    private final class Updates: Sendable {
        private let list = Locked([PathUpdate]())
        func append(_ update: PathUpdate) { list.withLock { $0.append(update) } }
        var last: PathUpdate? { list.withLock { $0.last } }
        var count: Int { list.withLock { $0.count } }
    }

    /// After the dump and after every change, the route the path was judged from (read from the
    /// replayed default routes) leaves through the interface, via the gateway, that the kernel
    /// chose at that moment (`ip route get`, recorded beside the bytes).
    @Test func everyUpdateFollowsTheKernelsRouteChoice() throws {
        let fixture = try PathChangeFixture.load()
        let network = RecordedNetwork(dump: fixture.dump)
        let monitor = PathMonitor(source: network)
        defer { monitor.cancel() }
        let updates = Updates()
        monitor.updateObserver = { updates.append($0) }
        monitor.start(queue: DispatchQueue(label: "updates"))
        try Self.expect(updates.last, toFollow: fixture.initialKernel, after: "the dump")
        for change in fixture.changes {
            network.receive(change.datagrams)
            try Self.expect(updates.last, toFollow: change.kernel, after: change.name)
        }
        #expect(network.malformedMessages == 0)
    }

    /// The changes end where the dump began, so a replay can go round them again and again (the
    /// benchmark does), each round delivering the same updates.
    @Test func theChangesEndInTheStateTheyStartedFrom() throws {
        let fixture = try PathChangeFixture.load()
        let network = RecordedNetwork(dump: fixture.dump)
        let start = network.snapshot
        let monitor = PathMonitor(source: network)
        defer { monitor.cancel() }
        let updates = Updates()
        monitor.updateObserver = { updates.append($0) }
        monitor.start(queue: DispatchQueue(label: "updates"))
        for change in fixture.changes { network.receive(change.datagrams) }
        #expect(network.snapshot == start)
        let firstRound = updates.count
        for change in fixture.changes { network.receive(change.datagrams) }
        #expect(network.snapshot == start)
        #expect(updates.count - firstRound == firstRound - 1, "the second round delivers as many as the first")
    }

    /// Bytes that are not rtnetlink are skipped and counted, as the engine skips them: no crash,
    /// no delivery.
    @Test func aMalformedDatagramIsSkippedAndCounted() throws {
        let fixture = try PathChangeFixture.load()
        let network = RecordedNetwork(dump: fixture.dump)
        let before = network.snapshot
        let monitor = PathMonitor(source: network)
        defer { monitor.cancel() }
        let updates = Updates()
        monitor.updateObserver = { updates.append($0) }
        monitor.start(queue: DispatchQueue(label: "updates"))
        network.receive([[0x20, 0, 0, 0, 16, 0]])
        #expect(network.malformedMessages == 1)
        #expect(network.snapshot == before)
        #expect(updates.count == 1)
    }

    private static func expect(
        _ update: PathUpdate?, toFollow kernel: [IPAddress.Family: PathChangeFixture.Choice], after step: String
    ) throws {
        let update = try #require(update, "no update after \(step)")
        for (family, choice) in kernel {
            switch (update.routes[family], choice) {
            case (.route(let route), .route(let device, let gateway)):
                #expect(update.interface(at: route.interfaceIndex)?.name == device, "\(family) after \(step)")
                #expect(route.gateway == gateway, "\(family) after \(step)")
            case (.route, .unreachable), (_, .route):
                Issue.record("\(family) after \(step): \(String(describing: update.routes[family])), kernel \(choice)")
            case (_, .unreachable):
                break
            }
        }
    }
}

/// `Fixtures/path-changes.hex` read: `#` comments, `dump`, `change NAME: COMMAND`,
/// `kernel FAMILY DEVICE GATEWAY` (or `unreachable`), and datagrams in hex, one a line.
private struct PathChangeFixture {
    enum Choice: Equatable {
        case route(device: String, gateway: IPAddress?)
        case unreachable
    }

    struct Change {
        var name: String
        var datagrams: [[UInt8]] = []
        var kernel: [IPAddress.Family: Choice] = [:]
    }

    var dump: [[UInt8]] = []
    var initialKernel: [IPAddress.Family: Choice] = [:]
    var changes: [Change] = []

    enum FixtureError: Error { case unreadable(String) }

    static func load() throws -> PathChangeFixture {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("Fixtures/path-changes.hex")
        var fixture = PathChangeFixture()
        for line in try String(contentsOf: url, encoding: .utf8).split(separator: "\n") {
            let words = line.split(separator: " ")
            switch words.first {
            case "#"?: continue
            case "dump"?: continue
            case "change"?: fixture.changes.append(Change(name: String(line.dropFirst("change ".count))))
            case "kernel"?:
                guard words.count >= 3, let family = IPAddress.Family(words[1]) else {
                    throw FixtureError.unreadable(String(line))
                }
                let choice: Choice =
                    words[2] == "unreachable"
                    ? .unreachable
                    : .route(device: String(words[2]), gateway: words.count > 3 ? IPAddress(String(words[3])) : nil)
                if fixture.changes.isEmpty {
                    fixture.initialKernel[family] = choice
                } else {
                    fixture.changes[fixture.changes.count - 1].kernel[family] = choice
                }
            default:
                let datagram = try bytes(line)
                if fixture.changes.isEmpty {
                    fixture.dump.append(datagram)
                } else {
                    fixture.changes[fixture.changes.count - 1].datagrams.append(datagram)
                }
            }
        }
        guard !fixture.dump.isEmpty, !fixture.changes.isEmpty, fixture.initialKernel.count == 2 else {
            throw FixtureError.unreadable("no dump, no changes or no kernel choice")
        }
        return fixture
    }

    private static func bytes(_ hex: Substring) throws -> [UInt8] {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { throw FixtureError.unreadable(String(hex.prefix(40))) }
        return try stride(from: 0, to: digits.count, by: 2).map { index in
            guard let byte = UInt8(String(decoding: digits[index..<index + 2], as: UTF8.self), radix: 16) else {
                throw FixtureError.unreadable(String(hex.prefix(40)))
            }
            return byte
        }
    }
}

extension IPAddress.Family {
    /// `ipv4` or `ipv6`, as the fixture writes them.
    fileprivate init?(_ word: Substring) {
        switch word {
        case "ipv4": self = .ipv4
        case "ipv6": self = .ipv6
        default: return nil
        }
    }
}
#endif
