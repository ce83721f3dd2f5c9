import Dispatch

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
#if os(Linux)
import CNetReachLinux
#endif

/// The package's one executor for work that blocks in the kernel or the C library: the path
/// engine's poll loop, getaddrinfo, reading the system's state for a waiting request.
///
/// Each job gets a thread of its own, named so `top -H` and `/proc/PID/task/*/comm` show what
/// it is. Not the Swift concurrency pool, whose few threads (one per core) a blocked job would
/// take from every task; not a bounded pool either, because getaddrinfo cannot be cancelled and
/// one stuck lookup must not hold up the next. The jobs are few: one engine thread per source,
/// and one short job per network change or per request that has to wait.
///
/// Work that strangers can ask for (serve's `/probe` names any host) goes to a ``Pool`` instead:
/// there the number of threads matters more than one stuck job holding up the next, and a job
/// that waits too long for a thread is given up, never started.
///
/// ```swift
/// BlockingWork.start(named: "netreach-nl") { engine.run() }
/// let addresses = await BlockingWork.run(named: "netreach-dns") { resolve(host) }
/// let lookups = BlockingWork.Pool(named: "netreach-lookup", width: 4)
/// let answer = await lookups.run(until: .now + .seconds(5)) { resolve(host) }   // nil: too late
/// ```
package enum BlockingWork {
    /// Starts `work` on a new thread named `name` (Linux keeps the first 15 bytes) and returns.
    ///
    /// A detached pthread with the system's default stack, as Foundation's `Thread` makes. When
    /// the system refuses a thread (`EAGAIN`: the process or user is at its limit), `work` runs
    /// on Dispatch's global queue instead: late and on a shared thread, but it runs, so nothing
    /// waiting for it hangs.
    package static func start(named name: String, _ work: @escaping @Sendable () -> Void) {
        let job = Unmanaged.passRetained(ThreadJob(name: name, work: work))
        var thread = pthread_t()
        var attributes = pthread_attr_t()
        pthread_attr_init(&attributes)
        pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
        let status = pthread_create(&thread, &attributes, runThreadJob, job.toOpaque())
        pthread_attr_destroy(&attributes)
        if status != 0 {
            job.release()
            DispatchQueue.global().async(execute: work)
        }
    }

    /// Runs `work` on a thread of its own and returns its result, without holding a thread of
    /// the concurrency pool while it blocks.
    package static func run<Result: Sendable>(
        named name: String,
        _ work: @escaping @Sendable () -> Result
    ) async -> Result {
        await withCheckedContinuation { continuation in
            start(named: name) { continuation.resume(returning: work()) }
        }
    }

    /// At most `width` threads, started as jobs need them and kept: for blocking work that
    /// anyone may ask for, where a thread per job would let a stuck resolver pile up threads
    /// (500 under 16 scrapers asking for names, each lookup stuck for glibc's 10 s).
    ///
    /// A job waits in line for a thread; one whose deadline passes before it starts is dropped,
    /// never run. A job still running at its deadline keeps its thread until it returns (a
    /// blocking call cannot be cancelled), and its result is thrown away: so a stuck resolver
    /// takes at most `width` threads, and later jobs fail at their deadlines instead of adding
    /// threads.
    package final class Pool: Sendable {
        private struct Job {
            var id: UInt64
            var work: @Sendable () -> Void
        }

        private struct State {
            var line: [Job] = []
            var threads = 0
            var idle = 0
            var nextID: UInt64 = 0
        }

        package let name: String
        package let width: Int
        private let state = Locked(State())
        /// One signal per job put in line; a thread that finds the line empty (its job was given
        /// up) waits again.
        private let ready = DispatchSemaphore(value: 0)

        package init(named name: String, width: Int) {
            self.name = name
            self.width = max(1, width)
        }

        /// Threads started so far (never more than ``width``).
        package var threadCount: Int { state.withLock { $0.threads } }

        /// Runs `work` on one of the pool's threads; its result, or `nil` when `deadline` passed
        /// first (waiting for a thread, or running).
        package func run<Result: Sendable>(
            until deadline: ContinuousClock.Instant, _ work: @escaping @Sendable () -> Result
        ) async -> Result? {
            let answered = Locked<CheckedContinuation<Result?, Never>?>(nil)
            let finish: @Sendable (Result?) -> Void = { result in
                answered.withLock { continuation in
                    continuation?.resume(returning: result)
                    continuation = nil
                }
            }
            return await withCheckedContinuation { continuation in
                answered.withLock { $0 = continuation }
                let id = enqueue { finish(work()) }
                // Saturated at a day: DispatchTime arithmetic on a huge duration would trap.
                let wait = max(.zero, min(deadline - ContinuousClock.now, .seconds(86_400))).components
                let milliseconds = Int(wait.seconds * 1000 + wait.attoseconds / 1_000_000_000_000_000)
                DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(milliseconds)) { [self] in
                    // Not started yet: it never will be.
                    state.withLock { $0.line.removeAll { $0.id == id } }
                    finish(nil)
                }
            }
        }

        private func enqueue(_ work: @escaping @Sendable () -> Void) -> UInt64 {
            let (id, startsThread) = state.withLock { state -> (UInt64, Bool) in
                defer { state.nextID += 1 }
                state.line.append(Job(id: state.nextID, work: work))
                guard state.idle < state.line.count, state.threads < width else { return (state.nextID, false) }
                state.threads += 1
                state.idle += 1
                return (state.nextID, true)
            }
            if startsThread { BlockingWork.start(named: name) { [self] in serve() } }
            ready.signal()
            return id
        }

        /// A thread's life: the next job in line, for ever.
        private func serve() {
            while true {
                ready.wait()
                let job = state.withLock { state -> Job? in
                    guard !state.line.isEmpty else { return nil }
                    state.idle -= 1
                    return state.line.removeFirst()
                }
                guard let job else { continue }
                job.work()
                state.withLock { $0.idle += 1 }
            }
        }
    }
}

/// What a thread started by ``BlockingWork/start(named:_:)`` runs, handed over retained.
private final class ThreadJob {
    let name: String
    let work: @Sendable () -> Void

    init(name: String, work: @escaping @Sendable () -> Void) {
        self.name = name
        self.work = work
    }
}

/// A new thread's entry point: names the thread (from inside: the kernel names the caller), then
/// runs the job it was given.
private func runThreadJob(_ argument: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    guard let argument else { return nil }
    let job = Unmanaged<ThreadJob>.fromOpaque(argument).takeRetainedValue()
    #if os(Linux)
    _ = cnr_set_thread_name(String(job.name.utf8.prefix(15)) ?? "netreach")
    #endif
    job.work()
    return nil
}
