import Foundation
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
/// `@unchecked Sendable`: every stored property is read and written only while `condition` (an
/// `NSCondition`, which TSan understands) is held; continuations are resumed outside it, once each.
package final class BodyChannel: @unchecked Sendable {
    package typealias Chunk = HTTPBody.ByteChunk

    private let condition = NSCondition()
    private var chunks: [Chunk] = []
    private var first = 0
    private var buffered = 0
    private var ending: Ending?
    private var consumerGone = false
    private var consumer: CheckedContinuation<Chunk?, any Error>?
    private var producer: CheckedContinuation<Bool, Never>?
    private var producerHeld = false
    private var onTerminate: (@Sendable () -> Void)?
    private let limit: Int
    private let watchdog: StallWatchdog?

    private enum Ending {
        case finished
        case failed(TransportError)
    }

    /// Creates a channel that holds the producer once `limit` bytes wait; `watchdog` is told of
    /// every chunk the consumer takes, and that a held producer is not a stalled network.
    package init(limit: Int = 1 << 20, watchdog: StallWatchdog? = nil) {
        self.limit = limit
        self.watchdog = watchdog
    }

    /// Sets what to call when the consumer goes away before the body ended.
    package func onConsumerTermination(_ action: @escaping @Sendable () -> Void) {
        condition.withLock { onTerminate = action }
    }

    // MARK: Producer

    /// Queues `chunk`, suspending while the buffer is full; `false` once the consumer is gone (stop
    /// producing).
    package func send(_ chunk: Chunk) async -> Bool {
        guard !chunk.isEmpty else { return condition.withLock { !consumerGone } }
        let (accepted, mustWait) = enqueue(chunk)
        guard accepted else { return false }
        guard mustWait else { return true }
        return await withCheckedContinuation { continuation in
            let answer: Bool? = condition.withLock {
                if consumerGone { return false }
                if buffered <= limit / 2 || ending != nil { return true }
                producer = continuation
                producerHeld = true
                watchdog?.hold(true)
                return nil
            }
            if let answer { continuation.resume(returning: answer) }
        }
    }

    /// Queues `chunk` without ever waiting, whatever is buffered (for clients that deliver bytes
    /// through a callback and cannot be paused); `false` once the consumer is gone.
    package func push(_ chunk: Chunk) -> Bool {
        guard !chunk.isEmpty else { return condition.withLock { !consumerGone } }
        return enqueue(chunk).0
    }

    /// Ends the body: normally (`nil`) or with `error`, which the consumer gets after the chunks
    /// already queued. Only the first ending counts.
    package func finish(throwing error: TransportError? = nil) {
        let (consumer, held): (CheckedContinuation<Chunk?, any Error>?, CheckedContinuation<Bool, Never>?) =
            condition.withLock {
                guard ending == nil else { return (nil, nil) }
                ending = error.map(Ending.failed) ?? .finished
                condition.broadcast()
                // A consumer waits only when nothing is queued.
                let waiting = self.consumer
                self.consumer = nil
                return (waiting, releaseProducer())
            }
        held?.resume(returning: true)
        if let error { consumer?.resume(throwing: error) } else { consumer?.resume(returning: nil) }
    }

    // MARK: Consumer

    /// The next chunk, `nil` at the end, or the producer's error.
    package func next() async throws -> Chunk? {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Chunk?, any Error>) in
                let ready: Result<Chunk?, any Error>?
                let held: CheckedContinuation<Bool, Never>?
                (ready, held) = condition.withLock {
                    () -> (Result<Chunk?, any Error>?, CheckedContinuation<Bool, Never>?) in
                    if let chunk = dequeue() { return (.success(chunk), wakeProducerIfRoom()) }
                    switch ending {
                    case .finished?: return (.success(nil), nil)
                    case .failed(let error)?: return (.failure(error), nil)
                    case nil:
                        consumer = continuation
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
        let (consumer, held, action):
            (CheckedContinuation<Chunk?, any Error>?, CheckedContinuation<Bool, Never>?, (@Sendable () -> Void)?) =
                condition.withLock {
                    let endedAlready = ending != nil
                    consumerGone = true
                    chunks = []
                    first = 0
                    buffered = 0
                    if ending == nil {
                        ending = .failed(error ?? TransportError(.cancelled, "the body was dropped unread"))
                    }
                    condition.broadcast()
                    let waiting = self.consumer
                    self.consumer = nil
                    let action = endedAlready ? nil : onTerminate
                    onTerminate = nil
                    return (waiting, releaseProducer(), action)
                }
        held?.resume(returning: false)
        consumer?.resume(throwing: error ?? TransportError(.cancelled, "the body was dropped unread"))
        action?()
    }

    // MARK: Under the lock

    /// Appends `chunk` (or hands it to a waiting consumer): (accepted, must the producer wait).
    private func enqueue(_ chunk: Chunk) -> (Bool, Bool) {
        let waiting: CheckedContinuation<Chunk?, any Error>?
        let result: (Bool, Bool)
        condition.lock()
        if consumerGone || ending != nil {
            condition.unlock()
            return (false, false)
        }
        if let consumer {
            self.consumer = nil
            waiting = consumer
            result = (true, false)
        } else {
            chunks.append(chunk)
            buffered += chunk.count
            waiting = nil
            result = (true, buffered > limit)
        }
        condition.unlock()
        if let waiting {
            watchdog?.touch()
            waiting.resume(returning: chunk)
        }
        return result
    }

    private func dequeue() -> Chunk? {
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

    private func wakeProducerIfRoom() -> CheckedContinuation<Bool, Never>? {
        guard buffered <= limit / 2 else { return nil }
        condition.broadcast()
        return releaseProducer()
    }

    private func releaseProducer() -> CheckedContinuation<Bool, Never>? {
        guard let producer else { return nil }
        self.producer = nil
        if producerHeld {
            producerHeld = false
            watchdog?.hold(false)
        }
        return producer
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
