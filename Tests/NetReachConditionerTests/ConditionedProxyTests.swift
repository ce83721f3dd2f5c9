import Foundation
import NetReachConditioner
import NetReachTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The proxy between a client and a server that both run here on 127.0.0.1, seen from both ends.
@Suite("ConditionedProxy end to end on loopback", .offPool, .timeLimit(.minutes(2)))
struct ConditionedProxyTests {
    @Test("With no conditions, 4 MiB cross both ways intact")
    func transparent() async throws {
        let server = try LoopbackServer(.echo)
        defer { server.stop() }
        let proxy = try await ConditionedProxy.start(upstreamHost: "127.0.0.1", upstreamPort: server.port)
        let payload = (0..<(4 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) }
        let echoed = try await offPool {
            try LoopbackClient.exchange(port: proxy.port, send: payload, expect: payload.count)
        }
        #expect(byteDifference(echoed, payload) == nil)
        try await proxy.stop()
        let statistics = await proxy.statistics()
        #expect(statistics.count == 1)
        #expect(statistics.first?.upstream.bytesDelivered == payload.count)
        #expect(statistics.first?.downstream.bytesDelivered == payload.count)
    }

    @Test("Delay each way: a round trip through 40 ms + 60 ms takes at least 100 ms, and the statistics say so")
    func delay() async throws {
        let server = try LoopbackServer(.echo)
        defer { server.stop() }
        let proxy = try await ConditionedProxy.start(
            upstreamHost: "127.0.0.1", upstreamPort: server.port,
            conditions: LinkConditions(
                upstream: .init(delay: .milliseconds(40)), downstream: .init(delay: .milliseconds(60))))
        let started = ContinuousClock.now
        let echoed = try await offPool {
            try LoopbackClient.exchange(port: proxy.port, send: Array("ping".utf8), expect: 4)
        }
        #expect(String(decoding: echoed, as: UTF8.self) == "ping")
        #expect(ContinuousClock.now - started >= .milliseconds(100))
        let statistics = await proxy.statistics()
        #expect((statistics.first?.upstream.maximumDelayMilliseconds ?? 0) >= 40)
        #expect((statistics.first?.downstream.maximumDelayMilliseconds ?? 0) >= 60)
        try await proxy.stop()
    }

    @Test("Bandwidth: 512 KiB downstream at 1 MB/s takes at least half a second")
    func bandwidth() async throws {
        let server = try LoopbackServer(.send(512 * 1024))
        defer { server.stop() }
        let proxy = try await ConditionedProxy.start(
            upstreamHost: "127.0.0.1", upstreamPort: server.port,
            conditions: LinkConditions(
                downstream: .init(bandwidth: 1_000_000)))
        let started = ContinuousClock.now
        let received = try await offPool { try LoopbackClient.exchange(port: proxy.port, send: [], expect: 512 * 1024) }
        #expect(received.count == 512 * 1024)
        #expect(ContinuousClock.now - started >= .milliseconds(500))
        try await proxy.stop()
    }

    @Test(
        "A listener is the link: four downloads share its bandwidth, interleaved; with bandwidthPerConnection each has it all"
    )
    func connectionsShareTheLink() async throws {
        let size = 64 * 1024
        let server = try LoopbackServer(.send(size))
        defer { server.stop() }
        /// Four downloads at once: when the first and the last ended.
        func fourDownloads(_ conditions: LinkConditions) async throws -> (first: Duration, last: Duration) {
            let proxy = try await ConditionedProxy.start(
                upstreamHost: "127.0.0.1", upstreamPort: server.port, conditions: conditions)
            let started = ContinuousClock.now
            var ends: [Duration] = []
            try await withThrowingTaskGroup(of: Duration.self) { group in
                for _ in 0..<4 {
                    group.addTask {
                        let received = try await offPool {
                            try LoopbackClient.exchange(port: proxy.port, send: [], expect: size)
                        }
                        #expect(received.count == size)
                        return ContinuousClock.now - started
                    }
                }
                for try await end in group { ends.append(end) }
            }
            try await proxy.stop()
            return (ends.min() ?? .zero, ends.max() ?? .zero)
        }
        // A slow link (100 kB/s), so the shaped times dwarf what a busy machine adds to them.
        let shared = try await fourDownloads(LinkConditions(downstream: .init(bandwidth: 100_000)))
        // 256 KiB over a 100 kB/s link takes 2.6 s whatever the flows do (all but the burst, one
        // 1448-byte slice, at the rate: a lower bound no load can break); interleaved slice by
        // slice, even the first to finish has shared the link nearly all that time (alone: 0.66 s).
        #expect(shared.last >= .milliseconds(2600), "\(shared)")
        #expect(shared.first >= .milliseconds(1500), "the flows took turns: \(shared)")
        let separate = try await fourDownloads(
            LinkConditions(downstream: .init(bandwidth: 100_000), bandwidthPerConnection: true))
        // 64 KiB at 100 kB/s less the one slice an idle link sends at once: at least 641 ms.
        #expect(separate.last >= .milliseconds(640), "\(separate)")
        // Each at the full rate: about four times faster than sharing; one link for all would be
        // 1x. 1.5 lies far from both, and what load adds (fractions of a second) cannot close it.
        #expect(shared.last / separate.last >= 1.5, "shared \(shared.last), per connection \(separate.last)")
    }

    @Test("A profile change applies to bytes not yet on the wire: a slow download speeds up at once")
    func changeReachesBytesNotYetSent() async throws {
        let size = 512 * 1024
        let server = try LoopbackServer(.send(size))
        defer { server.stop() }
        // 20 kB/s: the whole body would take 26 s at this rate.
        let proxy = try await ConditionedProxy.start(
            upstreamHost: "127.0.0.1", upstreamPort: server.port,
            conditions: LinkConditions(downstream: .init(bandwidth: 20_000)))
        let client = try LoopbackClient(port: proxy.port)
        defer { client.close() }
        // A few slices in (at least 4 KiB: reads return what has come).
        let first = try await offPool { try client.read(upTo: 4096) }
        #expect(first.count >= 4096 && first.count < 64 * 1024)
        try proxy.setConditions(.none)
        let changed = ContinuousClock.now
        let rest = try await offPool { try client.read(upTo: size - first.count) }
        let after = ContinuousClock.now - changed
        #expect(first.count + rest.count == size)
        // Scheduled at read time, the ~500 kB already read would still take 25 s; within a slice
        // (70 ms at 20 kB/s) they follow the new conditions.
        #expect(after < .seconds(10), "the rest took \(after) after the change")
        try await proxy.stop()
    }

    @Test("Bytes a timeout held leave at the link's rate when it is removed, not in one burst")
    func heldBytesLeaveAtTheLinkRate() async throws {
        let (server, proxy, client, payload) = try await sendWhileHeld(
            LinkConditions(downstream: .init(bandwidth: 100_000)))
        defer { server.stop() }
        defer { client.close() }
        // Until the echo has been read back by the proxy (held, not delivered).
        for _ in 0..<200 {
            if let read = await proxy.statistics().first?.downstream.bytesRead, read >= payload.count + 1 { break }
            try await Task.sleep(for: .milliseconds(10))
        }
        try proxy.removeFault(named: "stall")
        let released = ContinuousClock.now
        let echoed = try await offPool { try client.read(upTo: payload.count) }
        let took = ContinuousClock.now - released
        #expect(byteDifference(echoed, payload) == nil)
        // 200 kB at 100 kB/s: two seconds on the link (before, all of it came within 0.2 s).
        #expect(took >= .milliseconds(1800), "released in \(took)")
        try await proxy.stop()
    }

    @Test("limit_data closes after exactly that many bytes; the client sees them, then the end")
    func limitData() async throws {
        let server = try LoopbackServer(.send(100_000))
        defer { server.stop() }
        let proxy = try await ConditionedProxy.start(upstreamHost: "127.0.0.1", upstreamPort: server.port)
        try proxy.addFault(.limitData(bytes: 1_000), directions: [.downstream], name: "cut")
        let received = try await offPool { try LoopbackClient.exchange(port: proxy.port, send: [], expect: nil) }
        #expect(received.count == 1_000)
        try await proxy.stop()
    }

    @Test("reset_peer resets the client's connection; timeout holds everything")
    func resetAndTimeout() async throws {
        let server = try LoopbackServer(.echo)
        defer { server.stop() }
        let proxy = try await ConditionedProxy.start(upstreamHost: "127.0.0.1", upstreamPort: server.port)
        try proxy.addFault(.resetPeer(after: .milliseconds(50)), name: "reset")
        let reset = await offPool { Result { try LoopbackClient.exchange(port: proxy.port, send: [], expect: nil) } }
        #expect(throws: LoopbackClient.Failure.reset) { try reset.get() }
        try proxy.removeFault(named: "reset")

        try proxy.addFault(.timeout(after: .milliseconds(300)), name: "hold")
        let started = ContinuousClock.now
        let held = try await offPool {
            try LoopbackClient.exchange(port: proxy.port, send: Array("hello".utf8), expect: nil)
        }
        #expect(held.isEmpty, "nothing came back")
        #expect(ContinuousClock.now - started >= .milliseconds(300), "closed when the timeout ran out")
        try await proxy.stop()
    }

    /// An echo server behind a proxy under `conditions`; a client that made one round trip (1 byte
    /// each way), then sent 200,000 bytes while a timeout fault named `stall` holds downstream.
    /// The caller stops the server and closes the client.
    private func sendWhileHeld(
        _ conditions: LinkConditions
    ) async throws
        -> (server: LoopbackServer, proxy: ConditionedProxy, client: LoopbackClient, payload: [UInt8])
    {
        let server = try LoopbackServer(.echo)
        do {
            let proxy = try await ConditionedProxy.start(
                upstreamHost: "127.0.0.1", upstreamPort: server.port, conditions: conditions)
            let client = try LoopbackClient(port: proxy.port)
            do {
                _ = try await offPool { try client.roundTrip(Array("0".utf8)) }
                try proxy.addFault(.timeout(after: nil), directions: [.downstream], name: "stall")
                try await Task.sleep(for: .milliseconds(20)) // the change reaches the connection's loop
                let payload = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
                #expect(sendAll(client.descriptor, payload))
                return (server, proxy, client, payload)
            } catch {
                client.close()
                throw error
            }
        } catch {
            server.stop()
            throw error
        }
    }

    @Test("A timeout holds bytes, not drops them: removed, they arrive intact and in order")
    func timeoutHoldsAndReleases() async throws {
        let (server, proxy, client, payload) = try await sendWhileHeld(.none)
        defer { server.stop() }
        defer { client.close() }
        try await Task.sleep(for: .milliseconds(300))
        #expect(await proxy.statistics().first?.downstream.bytesDelivered == 1, "nothing more came back while held")
        try proxy.removeFault(named: "stall")
        let echoed = try await offPool { try client.read(upTo: payload.count) }
        #expect(byteDifference(echoed, payload) == nil)
        try await proxy.stop()
    }

    @Test(
        "Faults seen from the server's end: reset_peer resets it, limit_data closes it after exactly N bytes, a timeout delivers nothing then closes it, slow_close closes it late"
    )
    func faultsAtTheServer() async throws {
        let server = try LoopbackServer(.record)
        defer { server.stop() }
        let proxy = try await ConditionedProxy.start(upstreamHost: "127.0.0.1", upstreamPort: server.port)
        let payload = [UInt8](repeating: 0x41, count: 10_000)

        // The reset comes 2 s after the connection starts: "before" (delivered in about a
        // millisecond) must reach the server first, also on a busy machine (100 ms did not, once,
        // under a parallel run: the reset then beat the upstream connection).
        try proxy.addFault(.resetPeer(after: .seconds(2)), name: "reset")
        let resetClient = try LoopbackClient(port: proxy.port)
        #expect(sendAll(resetClient.descriptor, Array("before".utf8)))
        let reset = await offPool { server.waitForRecordings(1) }
        resetClient.close()
        #expect(reset.first?.end == .reset, "the server's connection was reset")
        #expect(reset.first.map { String(decoding: $0.bytes, as: UTF8.self) } == "before")
        try proxy.removeFault(named: "reset")

        try proxy.addFault(.limitData(bytes: 1_000), directions: [.upstream], name: "cut")
        let cutClient = try LoopbackClient(port: proxy.port)
        defer { cutClient.close() }
        #expect(sendAll(cutClient.descriptor, payload))
        let cut = await offPool { server.waitForRecordings(2) }
        #expect(
            cut.count == 2 && cut[1].bytes.count == 1_000 && cut[1].end == .closed, "exactly 1000 bytes, then a close")
        try proxy.removeFault(named: "cut")

        try proxy.addFault(.timeout(after: .milliseconds(300)), directions: [.upstream], name: "hold")
        let heldStart = Date() // the proxy accepts (and the timeout starts) after this
        let heldClient = try LoopbackClient(port: proxy.port)
        defer { heldClient.close() }
        #expect(sendAll(heldClient.descriptor, payload))
        let held = await offPool { server.waitForRecordings(3) }
        #expect(held.count == 3 && held[2].bytes.isEmpty && held[2].end == .closed, "nothing delivered, then closed")
        let heldFor = held.count == 3 ? held[2].ended.timeIntervalSince(heldStart) : 0
        #expect(heldFor >= 0.29, "closed when the timeout ran out: \(heldFor) s after connecting")
        try proxy.removeFault(named: "hold")

        try proxy.addFault(.slowClose(delay: .milliseconds(300)), directions: [.upstream], name: "late")
        let lateClient = try LoopbackClient(port: proxy.port)
        #expect(sendAll(lateClient.descriptor, Array("bye".utf8)))
        try await Task.sleep(for: .milliseconds(50))
        let closedAt = Date()
        lateClient.close()
        let late = await offPool { server.waitForRecordings(4) }
        #expect(late.count == 4 && late[3].bytes == Array("bye".utf8) && late[3].end == .closed)
        let lateBy = late.count == 4 ? late[3].ended.timeIntervalSince(closedAt) : 0
        #expect(lateBy >= 0.29, "the close reached the server 300 ms late: \(lateBy) s")
        try await proxy.stop()
    }

    @Test("Conditions change for a connection already open")
    func changeWhileOpen() async throws {
        let server = try LoopbackServer(.echo)
        defer { server.stop() }
        let proxy = try await ConditionedProxy.start(upstreamHost: "127.0.0.1", upstreamPort: server.port)
        let client = try LoopbackClient(port: proxy.port)
        defer { client.close() }
        let fast = try await offPool { try client.roundTrip(Array("a".utf8)) }
        try proxy.setConditions(LinkConditions(upstream: .init(delay: .milliseconds(150))))
        try await Task.sleep(for: .milliseconds(20)) // the change reaches the connection's loop
        let slow = try await offPool { try client.roundTrip(Array("b".utf8)) }
        #expect(slow >= .milliseconds(150), "fast \(fast), then \(slow)")
        try await proxy.stop()
    }

    @Test("Bad input: a port in use, an invalid upstream, duplicate and unknown fault names, an upstream that refuses")
    func badInput() async throws {
        let server = try LoopbackServer(.echo)
        defer { server.stop() }
        let proxy = try await ConditionedProxy.start(upstreamHost: "127.0.0.1", upstreamPort: server.port)
        await #expect(throws: ConditionerError.self) {
            try await ConditionedProxy.start(port: proxy.port, upstreamHost: "127.0.0.1", upstreamPort: server.port)
        }
        await #expect(throws: ConditionerError.invalidUpstream("127.0.0.1:0")) {
            try await ConditionedProxy.start(upstreamHost: "127.0.0.1", upstreamPort: 0)
        }
        try proxy.addFault(.slowClose(delay: .milliseconds(10)), name: "slow")
        #expect(throws: ConditionerError.duplicateFault("slow")) {
            try proxy.addFault(.limitData(bytes: 1), name: "slow")
        }
        #expect(throws: ConditionerError.noSuchFault("nope")) { try proxy.removeFault(named: "nope") }

        // An upstream nobody listens on: the client's connection is closed, the listener lives on.
        let refusing = try await ConditionedProxy.start(upstreamHost: otherLoopbackAddress(), upstreamPort: 9)
        let nothing = try await offPool { try LoopbackClient.exchange(port: refusing.port, send: [], expect: nil) }
        #expect(nothing.isEmpty)
        #expect(await refusing.statistics().first?.upstream.upstreamRefused == true)
        let still = try await offPool {
            try LoopbackClient.exchange(port: proxy.port, send: Array("ok".utf8), expect: 2)
        }
        #expect(still == Array("ok".utf8), "the other listener is unaffected")
        try await refusing.stop()
        try await proxy.stop()
    }
}
