import Foundation
import Testing

/// Where tests do work that blocks a thread: waiting for a process, a blocking socket read,
/// `poll`, or seconds of computation.
///
/// Swift concurrency's pool has as many threads as the machine has cores (two here), and a job on
/// it runs until it suspends. A test that blocks one of those threads for a second takes half the
/// pool from every other test running beside it; two such tests stop them all (seen: a stall of
/// 9 s at the start of a parallel run, every CLI child "not exiting" for 15 s, streamed chunks
/// "late"). On threads of their own, blocked tests cost nothing and busy ones are preempted by
/// the kernel like any other thread, so the tests beside them keep their time.
///
/// A test or suite opts in with the ``Testing/Trait/offPool`` trait; a single blocking call is
/// wrapped in ``offPool(_:)``.
public final class BlockingWorkExecutor: TaskExecutor, @unchecked Sendable {
    // @unchecked: `jobs` and `idle` are only touched while `condition` is locked.

    /// The one executor every test shares: it grows a thread whenever no idle one can take a job
    /// (so a job never waits behind a blocked one), and a thread idle for 10 s ends.
    public static let shared = BlockingWorkExecutor()

    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    private var idle = 0

    private init() {}

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        // Every queued job has a thread waiting for it or one being started for it.
        let needsThread = jobs.count > idle
        if !needsThread { condition.signal() }
        condition.unlock()
        if needsThread {
            let thread = Thread { [self] in work() }
            thread.name = "test blocking work"
            thread.start()
        }
    }

    private func work() {
        let executor = asUnownedTaskExecutor()
        while true {
            condition.lock()
            while jobs.isEmpty {
                idle += 1
                let signalled = condition.wait(until: Date(timeIntervalSinceNow: 10))
                idle -= 1
                if !signalled && jobs.isEmpty {
                    condition.unlock()
                    return
                }
            }
            let job = jobs.removeFirst()
            condition.unlock()
            job.runSynchronously(on: executor)
        }
    }
}

/// Runs `body` (which blocks) on a thread of ``BlockingWorkExecutor``, not on the concurrency
/// pool, and returns its result to the calling task.
public func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withTaskExecutorPreference(BlockingWorkExecutor.shared) { try body() }
}

/// Runs `body` (which blocks and cannot fail) off the concurrency pool.
public func offPool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withTaskExecutorPreference(BlockingWorkExecutor.shared) { body() }
}

/// The trait behind ``Testing/Trait/offPool``.
public struct OffPoolTrait: TestTrait, SuiteTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        try await withTaskExecutorPreference(BlockingWorkExecutor.shared) { try await function() }
    }
}

extension Trait where Self == OffPoolTrait {
    /// Runs the test (or every test of the suite) on ``BlockingWorkExecutor``'s threads: for tests
    /// that wait on processes, read sockets or `poll` blocking, or compute for long.
    ///
    /// ```swift
    /// @Suite(.offPool) struct NginxTests { ... }
    /// ```
    public static var offPool: Self { Self() }
}
