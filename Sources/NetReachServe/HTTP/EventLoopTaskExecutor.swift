import NIOCore

/// Runs a task's jobs on one NIO event loop: the task executor (`withTaskExecutorPreference`) of
/// an event stream's writing loop, given its connection's event loop.
///
/// An event used to cross three threads after the hub: the client's task woke on the global pool,
/// then its write hopped to the connection's event loop. With this preference the task resumes on
/// the event loop itself, and the write it makes there goes to the socket inline (the channel's
/// writer writes at once when called on its loop), so one wake-up carries the event to the wire.
///
/// ```swift
/// try await withTaskExecutorPreference(EventLoopTaskExecutor(channel.eventLoop)) {
///     for await chunk in subscription.chunks { try await writer.write(ByteBuffer(string: chunk)) }
/// }
/// ```
package final class EventLoopTaskExecutor: TaskExecutor {
    private let eventLoop: any EventLoop

    package init(_ eventLoop: any EventLoop) { self.eventLoop = eventLoop }

    package func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
