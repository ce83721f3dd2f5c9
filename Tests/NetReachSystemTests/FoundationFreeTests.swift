import Dispatch
import Glibc
import Testing

@testable import NetReachSystem

/// What NetReachSystem has in place of full Foundation's `NSCondition`, `Thread`,
/// `trimmingCharacters(in: .whitespaces)` and `FileManager.fileExists(atPath:isDirectory:)`,
/// each against the behaviour it replaces.
@Suite("Foundation-free primitives")
struct FoundationFreeTests {
    @Test("A waiter wakes on a change made by another thread, at once if it was made before")
    func wakeupSeesAChange() {
        let ready = Locked(false)
        let wakeup = Wakeup()
        let waiting = DispatchSemaphore(value: 0)
        let result = Locked<Bool?>(nil)
        BlockingWork.start(named: "test-waiter") {
            waiting.signal()
            let seen = wakeup.wait(until: .now + .seconds(600)) { ready.withLock { $0 } }
            result.withLock { $0 = seen }
        }
        waiting.wait()
        ready.withLock { $0 = true }
        wakeup.broadcast()
        // Bounded: a waiter that missed the change would sleep 600 s, far past this loop.
        for _ in 0..<6_000 where result.withLock({ $0 == nil }) { usleep(5_000) }
        #expect(result.withLock { $0 } == true)
        // Already true: no sleep at all, even with a deadline in the past.
        #expect(wakeup.wait(until: .now - .seconds(1)) { ready.withLock { $0 } })
    }

    @Test("A wait that is never woken ends at its deadline with false")
    func wakeupTimesOut() {
        let wakeup = Wakeup()
        let start = ContinuousClock.now
        #expect(!wakeup.wait(until: start + .milliseconds(50)) { false })
        #expect(ContinuousClock.now - start >= .milliseconds(50))
    }

    @Test("A started thread runs its job under its name")
    func threadIsNamed() {
        let name = Locked<String?>(nil)
        let done = DispatchSemaphore(value: 0)
        BlockingWork.start(named: "netreach-test-name-too-long") {
            // The kernel's name for this thread, as top -H shows it.
            let comm = SystemCall.readFile("/proc/thread-self/comm", limit: 64) ?? []
            name.withLock {
                $0 = String(decoding: comm, as: UTF8.self).trimmingSpaces().split(separator: "\n").first.map(
                    String.init)
            }
            done.signal()
        }
        done.wait()
        #expect(name.withLock { $0 } == "netreach-test-n", "the first 15 bytes, as Linux keeps")
    }

    @Test("Trimming takes spaces and tabs from both ends, as Foundation's .whitespaces does")
    func trimming() {
        #expect(" gzip\t".trimmingSpaces() == "gzip")
        #expect("\u{00A0}a b\u{2003}".trimmingSpaces() == "a b", "Unicode space separators too")
        #expect("\n x \n".trimmingSpaces() == "\n x \n", "not line breaks: .whitespaces leaves them")
        #expect("   ".trimmingSpaces() == "")
        #expect("".trimmingSpaces() == "")
        #expect("é\u{0301} ".trimmingSpaces() == "é\u{0301}")
    }

    @Test("A file's status: missing, a directory, a readable file, an unreadable one")
    func fileStatus() throws {
        #expect(SystemCall.fileStatus("/nonexistent/\(UInt64.random(in: 0...UInt64.max))") == nil)
        let directory = try #require(SystemCall.fileStatus("/"))
        #expect(directory.isDirectory && directory.isReadable)
        let file = try #require(SystemCall.fileStatus("/proc/self/status"))
        #expect(!file.isDirectory && file.isReadable)
        if getuid() != 0 {
            let secret = try #require(SystemCall.fileStatus("/etc/shadow"))
            #expect(!secret.isReadable)
        }
    }
}
