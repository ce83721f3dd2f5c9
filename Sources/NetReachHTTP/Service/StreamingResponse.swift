import HTTPTypes
import NetReach
import OpenAPIRuntime
import Synchronization

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A response whose body is still arriving: what ``NetworkService/bytes(_:)`` returns.
///
/// ```swift
/// let stream = try await service.bytes(.get("/exports/today.csv"))
/// var lines = 0
/// for try await chunk in stream.body { lines += chunk.filter { $0 == 10 }.count }
/// print(stream.status, lines)
/// ```
public struct StreamingResponse: Sendable {
    /// The status (one the policy accepts).
    public var status: HTTPResponse.Status
    /// The header fields.
    public var headerFields: HTTPFields
    /// The body, read once, as fast as you read it.
    public var body: ResponseBody
    /// The URL the final attempt went to.
    public var url: URL
    /// How many attempts were made before this response (1 when the first one succeeded).
    public var attempts: Int
    /// How long the request waited for connectivity before its attempts.
    public var waitedForConnectivity: Duration
}

/// A response body as it arrives: chunks of bytes, once. A failure while reading is a
/// ``NetworkError`` (the connection was lost, the transfer stalled past the request timeout, the
/// task was cancelled); dropping the sequence before its end stops the transfer.
///
/// ```swift
/// let stream = try await service.bytes(.get("/big.bin"))
/// var total = 0
/// do {
///     for try await chunk in stream.body { total += chunk.count }
/// } catch let error as NetworkError {
///     print("stopped after \(total) bytes: \(error)")
/// }
/// ```
public struct ResponseBody: AsyncSequence, Sendable {
    public typealias Element = ArraySlice<UInt8>
    /// The length the server announced, if it did.
    public var expectedLength: Int64? {
        if case .known(let length) = base.length { return length }
        return nil
    }
    let base: HTTPBody
    let monitor: PathMonitor?
    /// The attempts the response took, for the failures the body throws.
    let attempts: Int

    init(_ base: HTTPBody, path monitor: PathMonitor?, attempts: Int) {
        self.base = base
        self.monitor = monitor
        self.attempts = attempts
    }

    public func makeAsyncIterator() -> Iterator {
        Iterator(base: base.makeAsyncIterator(), monitor: monitor, attempts: attempts)
    }

    /// Yields the body's chunks; throws ``NetworkError``.
    public struct Iterator: AsyncIteratorProtocol {
        var base: HTTPBody.Iterator
        let monitor: PathMonitor?
        let attempts: Int

        public mutating func next() async throws -> ArraySlice<UInt8>? {
            do {
                return try await base.next()
            } catch let error as TransportError {
                // The path from a monitor that looked (one given unstarted is started now).
                let path = await NetworkService.observedPath(monitor)
                throw NetworkError(readingBody: error, path: path).after(attempts: attempts)
            } catch {
                let path = await NetworkService.observedPath(monitor)
                throw NetworkError.transport(TransportError(.other, String(describing: error)), path: path)
                    .after(attempts: attempts)
            }
        }
    }
}

extension NetworkError {
    /// A failure while a body was being read, in the service's terms.
    init(readingBody error: TransportError, path: NetworkPath?) {
        switch error.kind {
        case .cancelled: self = .cancelled
        case .timedOut: self = .timedOut(path: path)
        case .connectionLost: self = .connectionLost(error.detail, path: path)
        case .invalidResponse: self = .invalidResponse(error.detail)
        default: self = .transport(error, path: path)
        }
    }
}

/// A request body that knows whether it can be sent again: bytes can, a single-pass stream that an
/// attempt started reading cannot.
final class ReplayTracker: Sendable {
    private let base: HTTPBody
    private let started = Atomic<Bool>(false)

    init(_ base: HTTPBody) { self.base = base }

    /// Whether another attempt may send the body.
    var canReplay: Bool { base.iterationBehavior == .multiple || !started.load(ordering: .relaxed) }

    /// The body for one attempt.
    func body() -> HTTPBody {
        guard base.iterationBehavior == .single else { return base }
        let tracked = Tracked(base: base, started: self)
        return HTTPBody(tracked, length: base.length, iterationBehavior: .single)
    }

    fileprivate func markStarted() { started.store(true, ordering: .relaxed) }

    private struct Tracked: AsyncSequence, Sendable {
        typealias Element = HTTPBody.ByteChunk
        let base: HTTPBody
        let started: ReplayTracker

        func makeAsyncIterator() -> HTTPBody.Iterator {
            started.markStarted()
            return base.makeAsyncIterator()
        }
    }
}
