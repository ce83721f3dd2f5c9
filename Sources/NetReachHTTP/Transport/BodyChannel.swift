import NetReachSystem
import OpenAPIRuntime

/// A queue of body chunks from one producer (a transport's read loop or callback) to the one
/// consumer of a response `HTTPBody`, with backpressure for producers that can wait (``send(_:)``):
/// once `limit` bytes wait, the producer is held until the consumer has taken half of them, so a
/// fast network and a slow reader never pile a body up in memory.
///
/// The consumer going away (its body dropped unread, or its task cancelled) calls `onTerminate`, so
/// the transport can stop the transfer. An error from the producer reaches the consumer after the
/// chunks that came before it.
///
/// Everything that changes lives in one ``State`` behind one lock; its methods say which
/// continuations to resume, and they are resumed after the lock is let go, once each.
package final class BodyChannel: Sendable {
    package typealias Chunk = HTTPBody.ByteChunk

    private let state: Locked<State>
    private let watchdog: StallWatchdog?

    /// Creates a channel that holds the producer once `limit` bytes wait; `watchdog` is told of
    /// every chunk the consumer takes, and that a held producer is not a stalled network.
    package init(limit: Int = 1 << 20, watchdog: StallWatchdog? = nil) {
        state = Locked(State(limit: limit, watchdog: watchdog))
        self.watchdog = watchdog
    }

    /// Sets what to call when the consumer goes away before the body ended.
    package func onConsumerTermination(_ action: @escaping @Sendable () -> Void) {
        state.withLock { $0.onTerminate = action }
    }

    // MARK: Producer

    /// Queues `chunk`, suspending while the buffer is full; `false` once the consumer is gone (stop
    /// producing).
    package func send(_ chunk: Chunk) async -> Bool {
        guard !chunk.isEmpty else { return state.withLock { !$0.consumerGone } }
        let (accepted, mustWait) = enqueue(chunk)
        guard accepted else { return false }
        guard mustWait else { return true }
        return await withCheckedContinuation { continuation in
            let answer: Bool? = state.withLock { state in
                if state.consumerGone { return false }
                if state.buffered <= state.limit / 2 || state.ending != nil { return true }
                state.hold(continuation)
                return nil
            }
            if let answer { continuation.resume(returning: answer) }
        }
    }

    /// Queues `chunk` without ever waiting, whatever is buffered (for clients that deliver bytes
    /// through a callback and cannot be paused); `false` once the consumer is gone.
    package func push(_ chunk: Chunk) -> Bool {
        guard !chunk.isEmpty else { return state.withLock { !$0.consumerGone } }
        return enqueue(chunk).accepted
    }

    /// Ends the body: normally (`nil`) or with `error`, which the consumer gets after the chunks
    /// already queued. Only the first ending counts.
    package func finish(throwing error: TransportError? = nil) {
        let (consumer, held) = state.withLock { state -> (State.Consumer?, State.Producer?) in
            guard state.ending == nil else { return (nil, nil) }
            state.ending = error.map(Ending.failed) ?? .finished
            // A consumer waits only when nothing is queued.
            let waiting = state.consumer
            state.consumer = nil
            return (waiting, state.releaseProducer())
        }
        held?.resume(returning: true)
        if let error { consumer?.resume(throwing: error) } else { consumer?.resume(returning: nil) }
    }

    // MARK: Consumer

    /// The next chunk, `nil` at the end, or the producer's error.
    package func next() async throws -> Chunk? {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: State.Consumer) in
                let (ready, held) = state.withLock { state -> (Result<Chunk?, any Error>?, State.Producer?) in
                    if let chunk = state.dequeue() { return (.success(chunk), state.releaseProducerIfRoom()) }
                    switch state.ending {
                    case .finished?: return (.success(nil), nil)
                    case .failed(let error)?: return (.failure(error), nil)
                    case nil:
                        state.consumer = continuation
                        return (nil, nil)
                    }
                }
                held?.resume(returning: true)
                if let ready { continuation.resume(with: ready) }
            }
        } onCancel: {
            self.terminate(with: TransportError(.cancelled, "the task reading the body was cancelled"))
        }
    }

    /// The consumer is gone: drop what waits, release the producer, and stop the transfer unless it
    /// already ended.
    package func consumerTerminated() {
        terminate(with: nil)
    }

    private func terminate(with error: TransportError?) {
        let (consumer, held, action) = state.withLock {
            state -> (State.Consumer?, State.Producer?, (@Sendable () -> Void)?) in
            let endedAlready = state.ending != nil
            state.consumerGone = true
            state.chunks = []
            state.first = 0
            state.buffered = 0
            if state.ending == nil {
                state.ending = .failed(error ?? TransportError(.cancelled, "the body was dropped unread"))
            }
            let waiting = state.consumer
            state.consumer = nil
            let action = endedAlready ? nil : state.onTerminate
            state.onTerminate = nil
            return (waiting, state.releaseProducer(), action)
        }
        held?.resume(returning: false)
        consumer?.resume(throwing: error ?? TransportError(.cancelled, "the body was dropped unread"))
        action?()
    }

    /// Appends `chunk`, or hands it to a waiting consumer: whether it was taken, and whether the
    /// producer must now wait.
    private func enqueue(_ chunk: Chunk) -> (accepted: Bool, mustWait: Bool) {
        let (result, waiting) = state.withLock { state -> ((Bool, Bool), State.Consumer?) in
            if state.consumerGone || state.ending != nil { return ((false, false), nil) }
            if let consumer = state.consumer {
                state.consumer = nil
                return ((true, false), consumer)
            }
            state.chunks.append(chunk)
            state.buffered += chunk.count
            return ((true, state.buffered > state.limit), nil)
        }
        if let waiting {
            watchdog?.touch()
            waiting.resume(returning: chunk)
        }
        return result
    }

    private enum Ending {
        case finished
        case failed(TransportError)
    }

    /// What the lock guards. The watchdog is told of each chunk taken and of the producer held and
    /// let go under the same lock, so it sees them in order.
    private struct State {
        typealias Consumer = CheckedContinuation<Chunk?, any Error>
        typealias Producer = CheckedContinuation<Bool, Never>

        let limit: Int
        let watchdog: StallWatchdog?
        var chunks: [Chunk] = []
        var first = 0
        var buffered = 0
        var ending: Ending?
        var consumerGone = false
        var consumer: Consumer?
        var producer: Producer?
        var onTerminate: (@Sendable () -> Void)?

        init(limit: Int, watchdog: StallWatchdog?) {
            self.limit = limit
            self.watchdog = watchdog
        }

        mutating func dequeue() -> Chunk? {
            guard first < chunks.count else { return nil }
            let chunk = chunks[first]
            chunks[first] = []
            first += 1
            buffered -= chunk.count
            if first == chunks.count {
                chunks.removeAll(keepingCapacity: true)
                first = 0
            } else if first > 64 && first * 2 > chunks.count {
                chunks.removeFirst(first)
                first = 0
            }
            watchdog?.touch()
            return chunk
        }

        /// Keeps the producer waiting for room: the network is not to blame meanwhile.
        mutating func hold(_ waiting: Producer) {
            producer = waiting
            watchdog?.hold(true)
        }

        /// The held producer, once half the buffer is free.
        mutating func releaseProducerIfRoom() -> Producer? {
            buffered <= limit / 2 ? releaseProducer() : nil
        }

        /// The held producer, to resume once the lock is let go.
        mutating func releaseProducer() -> Producer? {
            guard let producer else { return nil }
            self.producer = nil
            watchdog?.hold(false)
            return producer
        }
    }
}

/// The consumer's side of a ``BodyChannel`` as an `AsyncSequence`, for `HTTPBody`. Dropping it (and
/// every iterator made from it) before the end tells the channel that the consumer is gone.
package struct BodyChannelSequence: AsyncSequence, Sendable {
    package typealias Element = HTTPBody.ByteChunk
    private let lifetime: ConsumerLifetime

    package init(_ channel: BodyChannel) { lifetime = ConsumerLifetime(channel) }

    package func makeAsyncIterator() -> Iterator { Iterator(lifetime: lifetime) }

    /// Yields the channel's chunks.
    package struct Iterator: AsyncIteratorProtocol {
        let lifetime: ConsumerLifetime
        package mutating func next() async throws -> HTTPBody.ByteChunk? { try await lifetime.channel.next() }
    }

    /// Tells the channel when the last holder of the sequence or an iterator lets go.
    final class ConsumerLifetime: Sendable {
        let channel: BodyChannel
        init(_ channel: BodyChannel) { self.channel = channel }
        deinit { channel.consumerTerminated() }
    }
}

extension HTTPBody {
    /// A single-pass body fed by `channel`.
    package convenience init(channel: BodyChannel, length: HTTPBody.Length) {
        self.init(BodyChannelSequence(channel), length: length, iterationBehavior: .single)
    }
}
