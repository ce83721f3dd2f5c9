import Foundation

/// Hands each ``WaitingEvent`` to the service's callback and to every `waitingEvents` sequence.
final class WaitingBroadcast: Sendable {
    private let callback: (@Sendable (WaitingEvent) -> Void)?
    private let state = ProtectedStreams()

    init(callback: (@Sendable (WaitingEvent) -> Void)?) { self.callback = callback }

    func send(_ event: WaitingEvent) {
        callback?(event)
        for continuation in state.all { continuation.yield(event) }
    }

    func stream() -> AsyncStream<WaitingEvent> {
        AsyncStream { continuation in
            let id = state.add(continuation)
            continuation.onTermination = { [state] _ in state.remove(id) }
        }
    }
}

/// The continuations of live `waitingEvents` sequences, behind a lock TSan understands.
private final class ProtectedStreams: @unchecked Sendable {
    // @unchecked: `streams` and `nextID` are only touched while `lock` is held.
    private let lock = NSLock()
    private var streams: [UInt64: AsyncStream<WaitingEvent>.Continuation] = [:]
    private var nextID: UInt64 = 0

    func add(_ continuation: AsyncStream<WaitingEvent>.Continuation) -> UInt64 {
        lock.withLock {
            defer { nextID += 1 }
            streams[nextID] = continuation
            return nextID
        }
    }

    func remove(_ id: UInt64) { lock.withLock { _ = streams.removeValue(forKey: id) } }
    var all: [AsyncStream<WaitingEvent>.Continuation] { lock.withLock { Array(streams.values) } }
}
