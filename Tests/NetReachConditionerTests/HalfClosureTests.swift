import Foundation
import NetReachConditioner
import NetReachTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The kernel is the reference: what a client and a server see of a half-close, or of a link that
/// carries nothing, directly or over a veth pair shaped by `tc`, they must see through the
/// conditioner too.
@Suite("Half-closure and a dead link: the conditioner against the kernel", .offPool, .timeLimit(.minutes(3)))
struct HalfClosureTests {
    /// What the client sends before its FIN (or after the server's).
    static let requestSize = 65_536
    /// What the server sends after the client's FIN (or before its own).
    static let responseSize = 262_144

    /// Profiles without loss (a lost segment is a delay here, so loss would only slow the test).
    enum Profile: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case none = "no conditions"
        case threeG = "3g"
        case veryBadWithoutLoss = "very-bad without its loss"

        var conditions: LinkConditions {
            switch self {
            case .none:
                return .none
            case .threeG:
                return LinkProfile.threeG.conditions
            case .veryBadWithoutLoss:
                var conditions = LinkProfile.veryBad.conditions
                conditions.upstream.loss = 0
                conditions.downstream.loss = 0
                return conditions
            }
        }

        var testDescription: String { rawValue }
    }

    /// Who half-closes first.
    enum Scenario: String, CaseIterable, Sendable, CustomTestStringConvertible {
        /// The client sends its request and its FIN, then reads the response to the server's end.
        case clientFirst = "the client half-closes after its request"
        /// The server sends and half-closes; the client reads to that end, then sends and closes.
        case serverFirst = "the server half-closes after sending; the client sends after that"

        var testDescription: String { rawValue }
    }

    /// Where the client reaches the server.
    struct Path: Sendable {
        var host: String
        var port: Int
        /// The client's `ip netns` namespace, `nil` for this process's.
        var namespace: String?
    }

    /// What each end saw of one exchange.
    struct Outcome: Sendable, CustomStringConvertible {
        /// What the client read before its end of file.
        var clientRead: [UInt8]
        /// What the server read before the client's FIN, and how its reading ended.
        var serverRead: [UInt8]
        var serverEnd: LoopbackServer.Recording.End?

        var description: String {
            "client read \(clientRead.count) bytes, server \(serverRead.count) then \(serverEnd.map { "\($0)" } ?? "no end")"
        }

        /// Issues for every way this differs from what both ends sent.
        func expectWhole(_ label: String, sourceLocation: SourceLocation = #_sourceLocation) {
            #expect(
                byteDifference(clientRead, LoopbackServer.pattern(responseSize)) == nil,
                "\(label): the client got all the server sent, then its FIN: \(self)", sourceLocation: sourceLocation)
            #expect(
                byteDifference(serverRead, LoopbackServer.pattern(requestSize)) == nil,
                "\(label): the server got all the client sent before its FIN: \(self)", sourceLocation: sourceLocation)
            #expect(
                serverEnd == .closed, "\(label): the server read the client's FIN: \(self)",
                sourceLocation: sourceLocation)
        }
    }

    /// Runs `scenario` against `server` through `path`.
    static func exchange(_ scenario: Scenario, with server: LoopbackServer, over path: Path) async throws -> Outcome {
        let (clientRead, sent) = try await offPool {
            let client = try LoopbackClient(host: path.host, port: path.port, namespace: path.namespace)
            defer { client.close() }
            switch scenario {
            case .clientFirst:
                // The server reads to the FIN before it answers: no deadlock.
                let sent = sendAll(client.descriptor, LoopbackServer.pattern(requestSize))
                client.finishSending()
                return (try client.read(upTo: nil), sent)
            case .serverFirst:
                let read = try client.read(upTo: nil)
                // Its input ended; its output is open: the server still reads this.
                let sent = sendAll(client.descriptor, LoopbackServer.pattern(requestSize))
                client.finishSending()
                return (read, sent)
            }
        }
        #expect(sent, "the client sent all of its bytes")
        let recordings = await offPool { server.waitForRecordings(1, timeout: 30) }
        return Outcome(
            clientRead: clientRead, serverRead: recordings.first?.bytes ?? [], serverEnd: recordings.first?.end)
    }

    static func server(
        for scenario: Scenario, host: String = "127.0.0.1", namespace: String? = nil
    ) throws
        -> LoopbackServer
    {
        switch scenario {
        case .clientFirst: try LoopbackServer(.replyAfterEnd(responseSize), host: host, namespace: namespace)
        case .serverFirst: try LoopbackServer(.sendThenRecord(responseSize), host: host, namespace: namespace)
        }
    }

    /// Waits (bounded) until the proxy's connections have all ended, and returns their statistics.
    static func finishedConnections(of proxy: ConditionedProxy) async -> [ConnectionStatistics] {
        let deadline = ContinuousClock.now + .seconds(20)
        var statistics = await proxy.statistics()
        while statistics.contains(where: \.isOpen) && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
            statistics = await proxy.statistics()
        }
        return statistics
    }

    // MARK: Half-closure

    @Test(
        "Half-closure: the same bytes and FINs directly and through the conditioner",
        arguments: Scenario.allCases, Profile.allCases)
    func halfClosure(_ scenario: Scenario, _ profile: Profile) async throws {
        let direct = try Self.server(for: scenario)
        defer { direct.stop() }
        let reference = try await Self.exchange(
            scenario, with: direct, over: Path(host: "127.0.0.1", port: direct.port))
        reference.expectWhole("directly")

        let server = try Self.server(for: scenario)
        defer { server.stop() }
        let proxy = try await ConditionedProxy.start(
            upstreamHost: "127.0.0.1", upstreamPort: server.port, conditions: profile.conditions)
        let through = try await Self.exchange(scenario, with: server, over: Path(host: "127.0.0.1", port: proxy.port))
        through.expectWhole("through the conditioner (\(profile.rawValue))")
        #expect(through.clientRead.count == reference.clientRead.count)
        #expect(through.serverRead.count == reference.serverRead.count)
        // Both ways ended, so both sockets were closed.
        let statistics = await Self.finishedConnections(of: proxy)
        #expect(statistics.count == 1 && statistics.allSatisfy { !$0.isOpen }, "\(statistics)")
        #expect(statistics.first?.upstream.bytesDelivered == Self.requestSize)
        #expect(statistics.first?.downstream.bytesDelivered == Self.responseSize)
        try await proxy.stop()
    }

    @Test(
        "Half-closure over a veth pair shaped by tc tbf (the kernel's reference): the same bytes and FINs",
        .needsNamespaceRoot, arguments: Scenario.allCases, Profile.allCases)
    func halfClosureOverVeth(_ scenario: Scenario, _ profile: Profile) async throws {
        try await Self.withPeers { lab in
            let conditions = profile.conditions
            // tbf shapes what leaves a device: veth0 is the client's way up, veth1 the way down.
            if let up = conditions.upstream.bandwidth { try await Self.shape(lab, peer: false, bytesPerSecond: up) }
            if let down = conditions.downstream.bandwidth {
                try await Self.shape(lab, peer: true, bytesPerSecond: down)
            }
            let server = try Self.server(for: scenario, host: NetnsLab.ipv4Gateway, namespace: lab.peerName)
            defer { server.stop() }
            let overVeth = try await Self.exchange(
                scenario, with: server, over: Path(host: NetnsLab.ipv4Gateway, port: server.port, namespace: lab.name))
            overVeth.expectWhole("over veth (tbf at \(profile.rawValue)'s rates)")
        }
    }

    /// A lab whose peer namespace answers at 10.123.0.1 (``NetnsLab/ipv4Gateway``) on `veth1`.
    static func withPeers(_ body: (NetnsLab) async throws -> Void) async throws {
        try await NetnsLab.withLab(NetnsLab.Setup(defaultRoutes: false)) { lab in
            try await lab.peerIP("addr", "add", NetnsLab.ipv4Gateway + "/24", "dev", NetnsLab.peerInterface)
            try await body(lab)
        }
    }

    /// `tc tbf` at `bytesPerSecond` on `veth0` (the lab's way out) or `veth1` (the peer's).
    static func shape(_ lab: NetnsLab, peer: Bool, bytesPerSecond: Int) async throws {
        let arguments = [
            "qdisc", "add", "dev", peer ? NetnsLab.peerInterface : NetnsLab.interface, "root", "tbf",
            "rate", "\(bytesPerSecond * 8)bit", "burst", "16kb", "latency", "1s",
        ]
        try await LabCommand.run(LabCommand.tcExecutable, ["-n", peer ? lab.peerName : lab.name] + arguments)
    }

    // MARK: A link that carries nothing

    /// What a client saw of a link that carried nothing, then carried packets again.
    struct DeadLinkOutcome: Sendable, Equatable {
        /// The client's connect 2.5 s into the dead link (its first SYN retransmission is at 1 s).
        var connectWhileDead: LoopbackClient.Connect
        var acceptedWhileDead: Int
        /// The same connect once the link carries packets again (its next retransmission).
        var connectAfterwards: LoopbackClient.Connect
        var responseAfterwards: Int
        var acceptedAfterwards: Int
    }

    /// Connects over a dead link, brings it back with `revive`, and finishes the exchange.
    static func deadLink(
        server: LoopbackServer, over path: Path, revive: () async throws -> Void
    ) async throws -> DeadLinkOutcome {
        let client = try LoopbackClient.startConnecting(host: path.host, port: path.port, namespace: path.namespace)
        defer { client.close() }
        // Nothing may answer: waiting out a bound is the only way to see that; 2.5 s spans the
        // first retransmission.
        let whileDead = await offPool { client.waitUntilConnected(timeout: .milliseconds(2500)) }
        let acceptedWhileDead = server.accepted
        try await revive()
        // The next retransmission (3 s, then 7 s after the first SYN) is answered.
        let afterwards = await offPool { client.waitUntilConnected(timeout: .seconds(20)) }
        var response = 0
        if afterwards == .connected {
            response = try await offPool {
                guard sendAll(client.descriptor, LoopbackServer.pattern(requestSize)) else { return -1 }
                client.finishSending()
                return try client.read(upTo: nil).count
            }
        }
        return DeadLinkOutcome(
            connectWhileDead: whileDead, acceptedWhileDead: acceptedWhileDead, connectAfterwards: afterwards,
            responseAfterwards: response, acceptedAfterwards: server.accepted)
    }

    static let deadLinkExpected = DeadLinkOutcome(
        connectWhileDead: .pending, acceptedWhileDead: 0, connectAfterwards: .connected,
        responseAfterwards: responseSize, acceptedAfterwards: 1)

    @Test(
        "100-loss: a client's connect gets no answer and the server no connection; when the loss is lowered the connect completes and the exchange is whole"
    )
    func deadLinkConnect() async throws {
        let server = try LoopbackServer(.replyAfterEnd(Self.responseSize))
        defer { server.stop() }
        let proxy = try await ConditionedProxy.start(
            upstreamHost: "127.0.0.1", upstreamPort: server.port, conditions: LinkProfile.loss100.conditions)
        let outcome = try await Self.deadLink(server: server, over: Path(host: "127.0.0.1", port: proxy.port)) {
            #expect(await proxy.statistics().isEmpty, "the proxy accepted nothing while the link was dead")
            try proxy.setConditions(.none)
        }
        #expect(outcome == Self.deadLinkExpected)
        try await proxy.stop()
    }

    @Test(
        "A dead link in the kernel (veth, every packet dropped by a pfifo of 0 packets): the same as 100-loss",
        .needsNamespaceRoot)
    func deadLinkOverVeth() async throws {
        try await Self.withPeers { lab in
            // No ARP on a dead link: the client's neighbour entry is fixed, so its SYNs are what
            // is lost (not a failed lookup, which would end the connect at once).
            let link = try await lab.peerIP("-j", "link", "show", "dev", NetnsLab.peerInterface)
            let peerAddress = try #require(
                (try JSONSerialization.jsonObject(with: Data(link.utf8)) as? [[String: Any]])?.first?["address"]
                    as? String)
            try await lab.ip(
                "neigh", "replace", NetnsLab.ipv4Gateway, "lladdr", peerAddress, "dev", NetnsLab.interface, "nud",
                "permanent")
            // netem is not in this kernel, nor tc's drop action: a FIFO of 0 packets drops them all.
            try await lab.tc("qdisc", "add", "dev", NetnsLab.interface, "root", "pfifo", "limit", "0")
            try await lab.peerTC("qdisc", "add", "dev", NetnsLab.peerInterface, "root", "pfifo", "limit", "0")
            let server = try LoopbackServer(
                .replyAfterEnd(Self.responseSize), host: NetnsLab.ipv4Gateway, namespace: lab.peerName)
            defer { server.stop() }
            let outcome = try await Self.deadLink(
                server: server, over: Path(host: NetnsLab.ipv4Gateway, port: server.port, namespace: lab.name)
            ) {
                try await lab.tc("qdisc", "del", "dev", NetnsLab.interface, "root")
                try await lab.peerTC("qdisc", "del", "dev", NetnsLab.peerInterface, "root")
            }
            #expect(outcome == Self.deadLinkExpected)
        }
    }

    @Test(
        "Loss raised to 100% on an open connection holds its bytes and its FIN (and new connects); lowered, all of it arrives"
    )
    func deadLinkHoldsAnOpenConnection() async throws {
        let server = try LoopbackServer(.record)
        defer { server.stop() }
        let proxy = try await ConditionedProxy.start(upstreamHost: "127.0.0.1", upstreamPort: server.port)
        let client = try LoopbackClient(port: proxy.port)
        defer { client.close() }
        #expect(sendAll(client.descriptor, Array("before ".utf8)))
        #expect(await Self.eventually { await Self.delivered(proxy) == 7 }, "the first bytes went through")

        try proxy.setConditions(LinkProfile.loss100.conditions)
        // statistics() runs on the connection's loop after the change: it is in force now.
        _ = await proxy.statistics()
        #expect(sendAll(client.descriptor, Array("held".utf8)))
        client.finishSending()
        #expect(
            await Self.eventually { await proxy.statistics().first?.upstream.bytesRead == 11 },
            "the proxy read what came while the link was dead")
        let waiting = try LoopbackClient.startConnecting(port: proxy.port)
        defer { waiting.close() }
        #expect(await offPool { waiting.waitUntilConnected(timeout: .milliseconds(1500)) } == .pending)
        #expect(await Self.delivered(proxy) == 7, "nothing more was delivered")
        #expect(server.recordings.isEmpty, "the server saw no FIN")

        try proxy.setConditions(.none)
        let recordings = await offPool { server.waitForRecordings(1) }
        #expect(recordings.first.map { String(decoding: $0.bytes, as: UTF8.self) } == "before held")
        #expect(recordings.first?.end == .closed)
        #expect(await offPool { waiting.waitUntilConnected(timeout: .seconds(20)) } == .connected)
        try await proxy.stop()
    }

    /// Whether `condition` holds within 10 s (checked every 10 ms).
    static func eventually(_ condition: () async -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(10)
        while !(await condition()) {
            guard ContinuousClock.now < deadline else { return false }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return true
    }

    static func delivered(_ proxy: ConditionedProxy) async -> Int? {
        await proxy.statistics().first?.upstream.bytesDelivered
    }
}
