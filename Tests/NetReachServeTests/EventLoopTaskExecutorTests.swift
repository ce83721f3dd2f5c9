import NIOCore
import NIOPosix
import NetReachServe
import Synchronization
import Testing

/// An event stream's writing loop runs on its connection's event loop: every resumption, whoever
/// woke it, is on that loop's thread, so the write it makes needs no further hop.
@Suite("EventLoopTaskExecutor")
struct EventLoopTaskExecutorTests {
    @Test func aTaskPreferringTheLoopResumesOnItAfterEveryAwaitAndSeesEveryChunkInOrder() async throws {
        // The server's loops are NIO's shared group, never shut down: the executor needs a loop
        // that outlives the task.
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let (chunks, continuation) = AsyncStream.makeStream(of: Int.self)
        let consumer = Task {
            try await withTaskExecutorPreference(EventLoopTaskExecutor(loop)) {
                var seen: [Int] = []
                var offLoop = 0
                if !loop.inEventLoop { offLoop += 1 }
                for await chunk in chunks {
                    if !loop.inEventLoop { offLoop += 1 }
                    seen.append(chunk)
                    // Awaiting the loop's own work (as a write does) comes back to the loop too.
                    _ = try await loop.submit { chunk }.get()
                    if !loop.inEventLoop { offLoop += 1 }
                }
                return (seen, offLoop)
            }
        }
        // Yielded from a thread that is not the loop (this test's), as the hub publishes.
        for value in 0..<200 { continuation.yield(value) }
        continuation.finish()
        let (seen, offLoop) = try await consumer.value
        #expect(seen == Array(0..<200))
        #expect(offLoop == 0, "resumed off the event loop \(offLoop) times")
    }
}
