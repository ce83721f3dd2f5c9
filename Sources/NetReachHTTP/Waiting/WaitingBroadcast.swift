import NetReachSystem

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

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

/// The continuations of live `waitingEvents` sequences.
private final class ProtectedStreams: Sendable {
    private let state = Locked((streams: [UInt64: AsyncStream<WaitingEvent>.Continuation](), nextID: UInt64(0)))

    func add(_ continuation: AsyncStream<WaitingEvent>.Continuation) -> UInt64 {
        state.withLock { state in
            defer { state.nextID += 1 }
            state.streams[state.nextID] = continuation
            return state.nextID
        }
    }

    func remove(_ id: UInt64) { state.withLock { _ = $0.streams.removeValue(forKey: id) } }
    var all: [AsyncStream<WaitingEvent>.Continuation] { state.withLock { Array($0.streams.values) } }
}
