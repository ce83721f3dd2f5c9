import NetReachSystem

/// Hands every event to every connected client, each through its own bounded buffer, and keeps
/// the ``EventLog`` that new and returning clients start from.
///
/// Publishing never waits for a client: an event is put in each client's buffer, and a client
/// whose buffer is full (it stopped reading) is dropped, its connection closed by
/// ``Subscription/onDrop``, so it delays nobody else. It can reconnect with `Last-Event-ID`.
///
/// ```swift
/// let hub = EventHub(replayCapacity: 1024, clientBuffer: 256)
/// let subscription = hub.subscribe(lastEventID: nil, onDrop: { channel.close(promise: nil) })
/// hub.publish(.path, topic: "path//", data: json)
/// for await chunk in subscription.chunks { try await writer.write(chunk) }
/// ```
package final class EventHub: Sendable {
    /// One client's stream: the current state (or what it missed) first, then each event.
    package struct Subscription: Sendable {
        /// Wire-format chunks: events, keep-alive comments, and `event: shutdown` last.
        package let chunks: AsyncStream<String>
        /// Ends the client's stream early (it disconnected).
        package let cancel: @Sendable () -> Void
    }

    private struct Client {
        var continuation: AsyncStream<String>.Continuation
        var onDrop: @Sendable () -> Void
    }

    private struct State {
        var log: EventLog
        var clients: [UInt64: Client] = [:]
        var nextClient: UInt64 = 0
        var isShutDown = false
        var dropped = 0
    }

    private let state: Locked<State>
    /// Events one client may have waiting before it is dropped.
    package let clientBuffer: Int

    package init(replayCapacity: Int, clientBuffer: Int) {
        state = Locked(State(log: EventLog(capacity: replayCapacity)))
        self.clientBuffer = max(1, clientBuffer)
    }

    /// How many clients are connected.
    package var clientCount: Int { state.withLock { $0.clients.count } }

    /// How many clients were dropped for not reading.
    package var droppedCount: Int { state.withLock { $0.dropped } }

    /// The id of the newest event.
    package var lastID: UInt64 { state.withLock { $0.log.lastID } }

    /// Records an event of `topic` and puts it in every client's buffer.
    package func publish(_ name: ServerSentEvent.Name, topic: String, data: String) {
        let dropped = state.withLock { state in
            guard !state.isShutDown else { return [Client]() }
            let event = state.log.append(name, topic: topic, data: data)
            return Self.send(event.wire, in: &state)
        }
        Self.drop(dropped)
    }

    /// Forgets `topic`'s state (a namespace that is gone), after publishing its last event.
    package func forget(topic: String) {
        state.withLock { $0.log.remove(topic: topic) }
    }

    /// Sends a keep-alive comment to every client.
    package func sendKeepAlive() {
        Self.drop(state.withLock { state in Self.send(ServerSentEvent.keepAlive, in: &state) })
    }

    /// A new client's stream. With `lastEventID` it starts with the events after that id, when
    /// they are all still kept; otherwise with the current state of every topic.
    /// `onDrop` is called (once, outside the hub's lock) if the client falls too far behind.
    package func subscribe(lastEventID: UInt64?, onDrop: @escaping @Sendable () -> Void) -> Subscription {
        let (chunks, continuation, key) = state.withLock { state in
            let start = lastEventID.flatMap { state.log.replay(after: $0) } ?? state.log.current
            // The start is the state, not a backlog: the buffer holds all of it and clientBuffer more.
            let (chunks, continuation) = AsyncStream.makeStream(
                of: String.self, bufferingPolicy: .bufferingOldest(start.count + clientBuffer))
            for event in start { continuation.yield(event.wire) }
            if state.isShutDown {
                continuation.yield(Self.shutdownEvent(state.log.lastID))
                continuation.finish()
                return (chunks, continuation, UInt64?.none)
            }
            defer { state.nextClient += 1 }
            state.clients[state.nextClient] = Client(continuation: continuation, onDrop: onDrop)
            return (chunks, continuation, Optional(state.nextClient))
        }
        let cancel: @Sendable () -> Void = { [weak self] in
            guard let key else { return }
            let client = self?.state.withLock { $0.clients.removeValue(forKey: key) }
            client?.continuation.finish()
        }
        continuation.onTermination = { _ in cancel() }
        return Subscription(chunks: chunks, cancel: cancel)
    }

    /// Ends every stream with `event: shutdown`, and every later one at once.
    package func shutDown() {
        let clients = state.withLock { state in
            state.isShutDown = true
            defer { state.clients = [:] }
            return (Array(state.clients.values), Self.shutdownEvent(state.log.lastID))
        }
        for client in clients.0 {
            client.continuation.yield(clients.1)
            client.continuation.finish()
        }
    }

    private static func shutdownEvent(_ lastID: UInt64) -> String {
        ServerSentEvent(id: lastID, name: .shutdown, data: "{}").wire
    }

    /// Puts `chunk` in every client's buffer; removes the clients whose buffer is full and returns
    /// them, to be dropped once the lock is released (finishing a stream runs its termination
    /// handler, which takes the lock).
    private static func send(_ chunk: String, in state: inout State) -> [Client] {
        var dropped: [Client] = []
        for (key, client) in state.clients {
            switch client.continuation.yield(chunk) {
            case .enqueued:
                continue
            case .dropped:
                // Its buffer is full: the client is not reading.
                state.clients.removeValue(forKey: key)
                state.dropped += 1
                dropped.append(client)
            case .terminated:
                state.clients.removeValue(forKey: key)
            @unknown default:
                continue
            }
        }
        return dropped
    }

    /// Ends the streams of `clients` and closes their connections; outside the lock.
    private static func drop(_ clients: [Client]) {
        for client in clients {
            client.continuation.finish()
            client.onDrop()
        }
    }
}
