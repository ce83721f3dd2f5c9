/// The events `serve` has sent, the latest `capacity` of them, and the current state each topic
/// (a destination's path in a namespace, a namespace's availability) is in.
///
/// A value: the hub keeps it under its lock. A client that connects anew is sent ``current``;
/// one that comes back with `Last-Event-ID` is sent what it missed (``replay(after:)``), or the
/// current state again when that has left the ring.
///
/// ```swift
/// var log = EventLog(capacity: 2)
/// log.append(.path, topic: "path//", data: #"{"status":"satisfied"}"#)    // id 1
/// log.replay(after: 0)?.count   // 1
/// ```
package struct EventLog: Sendable {
    /// How many events are kept for replay.
    package let capacity: Int
    /// The kept events, oldest first.
    private var ring: [ServerSentEvent] = []
    private var start = 0
    /// The latest event of each topic, in the order topics first appeared.
    private var latest: [String: ServerSentEvent] = [:]
    private var topics: [String] = []
    /// The id of the latest event; 0 before the first.
    package private(set) var lastID: UInt64 = 0

    package init(capacity: Int) {
        self.capacity = max(1, capacity)
        ring.reserveCapacity(self.capacity)
    }

    /// Records an event of `topic` and returns it with its id.
    @discardableResult
    package mutating func append(_ name: ServerSentEvent.Name, topic: String, data: String) -> ServerSentEvent {
        lastID += 1
        let event = ServerSentEvent(id: lastID, name: name, data: data)
        if ring.count < capacity {
            ring.append(event)
        } else {
            ring[start] = event
            start = (start + 1) % capacity
        }
        if latest.updateValue(event, forKey: topic) == nil { topics.append(topic) }
        return event
    }

    /// Forgets `topic` (a namespace that went away): new clients are not sent its last state.
    package mutating func remove(topic: String) {
        guard latest.removeValue(forKey: topic) != nil else { return }
        topics.removeAll { $0 == topic }
    }

    /// The latest event of every topic, each with the id of the newest event overall, so a client
    /// that reconnects with that id resumes exactly after this state.
    package var current: [ServerSentEvent] {
        topics.compactMap { latest[$0] }.map { ServerSentEvent(id: lastID, name: $0.name, data: $0.data) }
    }

    /// The events after `id`, oldest first; `nil` when some of them are no longer kept, or `id`
    /// was never sent (from another server's run): the client needs ``current`` instead.
    package func replay(after id: UInt64) -> [ServerSentEvent]? {
        guard id <= lastID else { return nil }
        let missed = Int(lastID - id)
        guard missed <= ring.count else { return nil }
        let ordered = ring.count < capacity ? ring : Array(ring[start...] + ring[..<start])
        return Array(ordered.suffix(missed))
    }
}
