import CNetReachLinux
import Foundation
import Testing

@testable import NetReach

#if canImport(Glibc)
import Glibc
import NetReachSystem
import NetReachTestSupport
#endif

/// The concurrency contract (PathMonitor's guarantees): `currentPath` may be read from any thread at any time. CI runs
/// this suite again under ThreadSanitizer:
/// `swift test --sanitize=thread --filter ConcurrencyStressTests`.
@Suite("Concurrency stress against a network namespace", .needsNamespaceRoot)
struct ConcurrencyStressTests {
    static let readerCount = 8
    static let flapCount = 1_000

    @Test func currentPathReadFromEightThreadsDuringAThousandRouteFlaps() async throws {
        try await NetnsLab.withLab { lab in
            let handlerLog = PathLog()
            let monitor = PathMonitor.started(in: lab, handler: handlerLog.append)
            defer { monitor.cancel() }
            let streamLog = PathLog.consuming(monitor.paths)

            struct Tally { var invalid: [String] = [], readingThreads = 0, finishedThreads = 0 }
            let tally = Locked(Tally())
            let stop = Locked(false)
            for index in 0..<Self.readerCount {
                let thread = Thread {
                    // Lowest priority: the readers spin flat out, and at normal priority 8 of them
                    // starved every other suite running in parallel on 2 cores for about a second.
                    // They still read whenever a core is free, racing the engine thread. Not under
                    // ThreadSanitizer, which runs this suite alone: a nice-19 reader preempted
                    // inside TSan's own locks stalls every thread (measured with two CPU hogs:
                    // 10-33 s to read the flaps, against 0.3-1.8 s at normal priority).
                    if !Sanitizer.threadSanitizerIsOn {
                        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), id_t(cnr_gettid()), 19)
                    }
                    var invalid: [String] = []
                    var reading = false
                    repeat {
                        let path = monitor.currentPath
                        if !Self.isExpected(path), invalid.count < 5 {
                            invalid.append("\(path)")
                        }
                        if !reading {
                            reading = true
                            tally.withLock { $0.readingThreads += 1 }
                        }
                    } while !stop.current
                    tally.withLock { tally in
                        tally.invalid += invalid
                        tally.finishedThreads += 1
                    }
                }
                thread.name = "currentPath reader \(index)"
                thread.start()
            }

            // The flaps start once every reader is reading (the wait fails the test if one never
            // does). A nice-19 thread may wait long for a core on a busy machine: on CI's, all eight
            // first ran after the flaps had settled and read nothing, racing nothing.
            await LabPoll.until("every reader thread reads", timeout: .seconds(60)) {
                tally.current.readingThreads == Self.readerCount
            }

            // One `ip -batch` process for all the flaps. It ends with the route moved to another
            // gateway, a state the flaps never rest in: the monitor reaches it only once it has read
            // every notification before it. (Ending where it started, the wait below held before the
            // engine read the first flap, and the checks after it raced the engine catching up.)
            try await lab.batch(
                (0..<Self.flapCount).flatMap { _ in
                    [
                        "route del default via \(NetnsLab.ipv4Gateway) dev \(NetnsLab.interface)",
                        "route add default via \(NetnsLab.ipv4Gateway) dev \(NetnsLab.interface)",
                    ]
                } + ["route replace default via \(NetnsLab.otherIPv4Gateway) dev \(NetnsLab.interface)"])
            let fresh = PathMonitor.freshPath(in: lab)
            #expect(fresh.isLabIPv4Satisfied(via: NetnsLab.otherIPv4Gateway), "\(fresh)")
            await LabPoll.until("the monitor settles on the final path", timeout: .seconds(20)) {
                monitor.currentPath == fresh && streamLog.last == fresh && handlerLog.last == fresh
            }
            stop.withLock { $0 = true }
            await LabPoll.until("every reader thread stops") { tally.current.finishedThreads == Self.readerCount }

            let result = tally.current
            #expect(result.invalid.isEmpty, "invalid reads: \(result.invalid)")
            #expect(monitor.currentPath == fresh)
            for log in [handlerLog, streamLog] {
                let paths = log.paths
                #expect(paths.first?.isLabIPv4Satisfied == true && paths.last == fresh)
                #expect(zip(paths, paths.dropFirst()).allSatisfy { $0 != $1 }, "a path was delivered twice in a row")
                #expect(paths.allSatisfy(Self.isExpected))
            }
            #expect(handlerLog.paths == streamLog.paths)
        }
    }

    /// A path the lab passes through: satisfied via either gateway, or no default route at all.
    private static func isExpected(_ path: NetworkPath) -> Bool {
        path.isLabIPv4Satisfied || path.isLabIPv4Satisfied(via: NetnsLab.otherIPv4Gateway)
            || path == .unsatisfied(.noDefaultRoute)
    }
}
