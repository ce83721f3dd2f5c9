import Foundation

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
/// ```swift
/// BlockingWork.start(named: "netreach-nl") { engine.run() }
/// let addresses = await BlockingWork.run(named: "netreach-dns") { resolve(host) }
/// ```
package enum BlockingWork {
    /// Starts `work` on a new thread named `name` (Linux keeps the first 15 bytes) and returns.
    package static func start(named name: String, _ work: @escaping @Sendable () -> Void) {
        let thread = Thread {
            // Named from inside: Foundation's Thread.name does not reach the kernel on Linux.
            #if os(Linux)
            _ = cnr_set_thread_name(String(name.utf8.prefix(15)) ?? "netreach")
            #endif
            work()
        }
        thread.start()
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
}
