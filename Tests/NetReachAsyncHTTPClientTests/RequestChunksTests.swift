import Foundation
import NIOCore
import NIOPosix
import NetReachHTTP
import NetReachTestSupport
import OpenAPIRuntime
import Synchronization
import Testing

@testable import NetReachAsyncHTTPClient

/// A request body is pulled at most two ``RequestChunks/barrierBytes`` ahead of what the client's
/// event loops have run: while a loop is busy, the body waits for it instead of filling its queue.
@Suite("Request body pulled no further ahead than the event loop")
struct RequestChunksTests {
    static let chunk = 64 << 10

    /// How many chunks a body handed out.
    final class Pulled: Sendable {
        private let count = Mutex(0)
        func add() { count.withLock { $0 += 1 } }
        var value: Int { count.withLock { $0 } }
    }

    /// A body of `count` chunks that counts how many were pulled.
    static func countedBody(chunks count: Int, pulled: Pulled) -> HTTPBody {
        let chunks = AsyncStream<ArraySlice<UInt8>> { continuation in
            for _ in 0..<count { continuation.yield(ArraySlice(repeating: 7, count: chunk)) }
            continuation.finish()
        }.map { chunk in
            pulled.add()
            return chunk
        }
        return HTTPBody(chunks, length: .known(Int64(count * chunk)), iterationBehavior: .single)
    }

    @Test func aBusyLoopHoldsTheBodyAtTheBarrier() async throws {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let loop = group.next()
        let pulled = Pulled()
        let body = Self.countedBody(chunks: 256, pulled: pulled)
        let watchdog = StallWatchdog(stall: .seconds(3600), deadline: nil) { _ in }
        // The loop is busy until `release` is signalled.
        let release = DispatchSemaphore(value: 0)
        let busy = loop.submit { release.wait() }

        let chunks = RequestChunks(body: body, watchdog: watchdog, eventLoops: [loop])
        let reader = Task {
            var bytes = 0
            for try await buffer in chunks { bytes += buffer.readableBytes }
            return bytes
        }
        // The reader pulls two intervals (the second's marker queued behind the busy task, the
        // first's too) and waits there (bounded: 30 s).
        let perBarrier = 2 * RequestChunks.barrierBytes / Self.chunk
        let deadline = ContinuousClock.now + .seconds(30)
        while pulled.value < perBarrier, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(pulled.value == perBarrier)
        // Still there a while later: it waits for the loop, not for time.
        try await Task.sleep(for: .milliseconds(200))
        #expect(pulled.value == perBarrier, "pulled past the barrier while the loop was busy")

        release.signal()
        try await busy.get()
        #expect(try await reader.value == 256 * Self.chunk)
        #expect(pulled.value == 256)
        try await group.shutdownGracefully()
    }

    @Test func withoutLoopsTheBodyIsPulledWhole() async throws {
        let pulled = Pulled()
        let body = Self.countedBody(chunks: 40, pulled: pulled)
        let watchdog = StallWatchdog(stall: .seconds(3600), deadline: nil) { _ in }
        var bytes = 0
        for try await buffer in RequestChunks(body: body, watchdog: watchdog, eventLoops: []) {
            bytes += buffer.readableBytes
        }
        #expect(bytes == 40 * Self.chunk)
    }
}
