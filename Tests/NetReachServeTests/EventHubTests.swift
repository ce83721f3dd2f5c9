import NetReachServe
import Synchronization
import Testing

/// The event stream's bookkeeping: what a new or returning client is sent first, that every
/// client gets every event in order, and that one that stops reading is dropped alone.
@Suite("EventLog and EventHub")
struct EventHubTests {
    @Test func replaysTheEventsAfterAnIDStillKept() {
        var log = EventLog(capacity: 3)
        for index in 1...5 { log.append(.path, topic: "path/a", data: "\(index)") }
        #expect(log.replay(after: 3)?.map(\.data) == ["4", "5"])
        #expect(log.replay(after: 2)?.map(\.data) == ["3", "4", "5"])
        #expect(log.replay(after: 5)?.isEmpty == true)
    }

    @Test func anIDNoLongerKeptOrNeverSentNeedsTheCurrentStateInstead() {
        var log = EventLog(capacity: 3)
        for index in 1...5 { log.append(.path, topic: "path/a", data: "\(index)") }
        #expect(log.replay(after: 1) == nil) // 2 has left the ring
        #expect(log.replay(after: 99) == nil) // another run's id
    }

    @Test func currentStateIsTheLatestEventOfEachTopicUnderTheNewestID() {
        var log = EventLog(capacity: 8)
        log.append(.namespace, topic: "namespace/", data: "up")
        log.append(.path, topic: "path/a", data: "a1")
        log.append(.path, topic: "path/b", data: "b1")
        log.append(.path, topic: "path/a", data: "a2")
        #expect(log.current.map(\.data) == ["up", "a2", "b1"])
        #expect(log.current.allSatisfy { $0.id == 4 })
        log.remove(topic: "path/b")
        #expect(log.current.map(\.data) == ["up", "a2"])
    }

    @Test func theWireFormatIsOneEventWithOneDataLine() {
        let event = ServerSentEvent(id: 7, name: .path, data: "{\"a\":1}\n{\"b\":2}")
        #expect(event.wire == "id: 7\nevent: path\ndata: {\"a\":1} {\"b\":2}\n\n")
        // CR and CRLF end an SSE line too.
        let crlf = ServerSentEvent(id: 8, name: .path, data: "{\"a\":1}\r\n{\"b\":2}\r{\"c\":3}")
        #expect(crlf.wire == "id: 8\nevent: path\ndata: {\"a\":1} {\"b\":2} {\"c\":3}\n\n")
        // A path's size (not a small string): a break at either end (dropped, as between CR
        // and LF), in the middle, or none.
        let long = String(repeating: "x", count: 400)
        for (data, line) in [
            (long + "\r", long), ("\n" + long, long), (long + "\n" + long, long + " " + long), (long, long),
        ] {
            #expect(ServerSentEvent(id: 9, name: .path, data: data).wire == "id: 9\nevent: path\ndata: \(line)\n\n")
        }
    }

    @Test func aNewClientGetsTheCurrentStateThenEveryEventInOrder() async {
        let hub = EventHub(replayCapacity: 16, clientBuffer: 64)
        hub.publish(.path, topic: "path/a", data: "a1")
        let subscription = hub.subscribe(lastEventID: nil, onDrop: {})
        for index in 2...20 { hub.publish(.path, topic: "path/a", data: "a\(index)") }
        hub.shutDown()
        var received: [String] = []
        for await chunk in subscription.chunks { received.append(chunk) }
        #expect(received.first == "id: 1\nevent: path\ndata: a1\n\n")
        #expect(
            received.dropFirst().prefix(19) == ArraySlice((2...20).map { "id: \($0)\nevent: path\ndata: a\($0)\n\n" }))
        #expect(received.last == "id: 20\nevent: shutdown\ndata: {}\n\n")
    }

    @Test func aReturningClientGetsOnlyWhatItMissed() async {
        let hub = EventHub(replayCapacity: 16, clientBuffer: 64)
        for index in 1...5 { hub.publish(.path, topic: "path/a", data: "a\(index)") }
        let subscription = hub.subscribe(lastEventID: 3, onDrop: {})
        hub.shutDown()
        var received: [String] = []
        for await chunk in subscription.chunks { received.append(chunk) }
        #expect(received.map { $0.split(separator: "\n").first.map(String.init) ?? "" } == ["id: 4", "id: 5", "id: 5"])
        #expect(received.last?.contains("event: shutdown") == true)
    }

    @Test func aClientThatStopsReadingIsDroppedAloneAndTheOthersGetEverything() async {
        let hub = EventHub(replayCapacity: 16, clientBuffer: 4)
        let drops = Atomic(0)
        let stalled = hub.subscribe(lastEventID: nil, onDrop: { drops.add(1, ordering: .relaxed) })
        let reading = hub.subscribe(lastEventID: nil, onDrop: { Issue.record("the reading client was dropped") })
        var iterator = reading.chunks.makeAsyncIterator()
        var received = 0
        for index in 1...10 {
            hub.publish(.path, topic: "path/a", data: "\(index)")
            if await iterator.next() != nil { received += 1 }
        }
        #expect(received == 10)
        #expect(drops.load(ordering: .relaxed) == 1)
        #expect(hub.droppedCount == 1)
        #expect(hub.clientCount == 1)
        // The stalled client's stream holds what fitted in its buffer, then ends.
        var kept = 0
        for await _ in stalled.chunks { kept += 1 }
        #expect(kept == 4)
    }

    @Test func aClientThatConnectsAfterShutdownIsToldAtOnce() async {
        let hub = EventHub(replayCapacity: 16, clientBuffer: 4)
        hub.publish(.path, topic: "path/a", data: "a")
        hub.shutDown()
        var received: [String] = []
        for await chunk in hub.subscribe(lastEventID: nil, onDrop: {}).chunks { received.append(chunk) }
        #expect(received.count == 2)
        #expect(received.last?.contains("event: shutdown") == true)
    }
}
