import CNetReachLinux // eventfd
import Foundation
import Glibc
import NetReachTestSupport
import Synchronization
import Testing

@testable import NetReachSystem

/// How many SIGUSR2 the handler below caught: proof that a call was really interrupted.
private let caughtSignals = Atomic<Int>(0)

/// Catches SIGUSR2 without SA_RESTART, so a blocked system call it lands in fails with EINTR.
private func installInterruptingHandler() {
    var action = sigaction()
    action.__sigaction_handler.sa_handler = { _ in caughtSignals.add(1, ordering: .relaxed) }
    action.sa_flags = 0
    sigemptyset(&action.sa_mask)
    sigaction(SIGUSR2, &action, nil)
}

/// A thread of its own running one test's blocking call, kept alive until ``release()`` so that
/// signals sent to it never reach a thread that has exited (pthread_kill on an exited detached
/// thread is undefined behaviour).
private struct TestThread {
    let id: pthread_t
    /// Signalled when the body returned.
    let done: DispatchSemaphore
    private let released: DispatchSemaphore

    /// Starts `body` on a thread of its own and returns once the thread is running.
    init(_ body: @escaping @Sendable () -> Void) {
        let id = Locked<pthread_t?>(nil)
        let started = DispatchSemaphore(value: 0)
        let done = DispatchSemaphore(value: 0)
        let released = DispatchSemaphore(value: 0)
        BlockingWork.start(named: "nr-test") {
            // Threads may inherit a mask that blocks it (the test runner's); this one must take it.
            var unblocked = sigset_t()
            sigemptyset(&unblocked)
            sigaddset(&unblocked, SIGUSR2)
            pthread_sigmask(SIG_UNBLOCK, &unblocked, nil)
            id.withLock { $0 = pthread_self() }
            started.signal()
            body()
            done.signal()
            released.wait()
        }
        started.wait()
        self.id = id.withLock { $0! }
        self.done = done
        self.released = released
    }

    /// Sends SIGUSR2 every 10 ms until the body returned (at most 10 s); whether it did.
    func interruptUntilDone() -> Bool {
        for _ in 0..<1000 {
            pthread_kill(id, SIGUSR2)
            if done.wait(timeout: .now() + .milliseconds(10)) == .success { return true }
        }
        return false
    }

    /// Lets the thread end; no signal may be sent to it after this.
    func release() { released.signal() }
}

@Suite("One system-call layer: EINTR, EAGAIN and partial writes handled once", .offPool, .serialized)
struct SystemCallTests {
    init() { installInterruptingHandler() }

    @Test("A read that signals keep interrupting still returns the bytes")
    func readRetriesInterrupts() throws {
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        defer {
            close(ends[0])
            close(ends[1])
        }
        let before = caughtSignals.load(ordering: .relaxed)
        let result = Locked<Result<Int, SystemError>?>(nil)
        let reader = ends[0]
        let thread = TestThread {
            var byte: UInt8 = 0
            let outcome = withUnsafeMutableBytes(of: &byte) { buffer in
                Result { () throws(SystemError) in try SystemCall.read(reader, into: buffer) }
            }
            result.withLock { $0 = outcome }
        }
        // Interrupt the blocked read for a while, then give it its byte.
        defer { thread.release() }
        for _ in 0..<10 {
            pthread_kill(thread.id, SIGUSR2)
            usleep(10_000)
        }
        var byte: UInt8 = 42
        #expect(write(ends[1], &byte, 1) == 1)
        #expect(thread.interruptUntilDone())
        #expect(try result.withLock { $0 }?.get() == 1)
        #expect(caughtSignals.load(ordering: .relaxed) > before)
    }

    @Test("An interrupted poll waits out the rest of its time, no less")
    func pollWaitsOutInterrupts() throws {
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        defer {
            close(ends[0])
            close(ends[1])
        }
        let reader = ends[0]
        let before = caughtSignals.load(ordering: .relaxed)
        let outcome = Locked<(ready: Int, waited: Duration)?>(nil)
        let thread = TestThread {
            let start = ContinuousClock.now
            let ready =
                (try? SystemCall.poll(reader, events: Int16(POLLIN), timeout: .milliseconds(300))).map(Int.init) ?? -1
            outcome.withLock { $0 = (ready, ContinuousClock.now - start) }
        }
        defer { thread.release() }
        #expect(thread.interruptUntilDone())
        let (ready, waited) = try #require(outcome.withLock { $0 })
        #expect(ready == 0, "nothing was written: the time ran out")
        #expect(waited >= .milliseconds(300), "ended early after a signal: \(waited)")
        #expect(caughtSignals.load(ordering: .relaxed) > before)
    }

    @Test("A non-blocking pipe that fills up is waited for, and every byte arrives in order")
    func writeAllWaitsOnFullPipe() throws {
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        defer { close(ends[0]) }
        let writer = ends[1]
        #expect(fcntl(writer, F_SETFL, fcntl(writer, F_GETFL) | O_NONBLOCK) == 0)
        // 1 MiB through a 64 KiB pipe: write(2) must say EAGAIN many times.
        let sent = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) }
        let received = Locked<[UInt8]>([])
        let reader = ends[0]
        let thread = TestThread {
            usleep(50_000) // let the writer find the pipe full first
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = buffer.withUnsafeMutableBytes { try? SystemCall.read(reader, into: $0) } ?? 0
                if count == 0 { return }
                received.withLock { $0 += buffer[..<count] }
            }
        }
        var written = 0
        let result = sent.withUnsafeBytes { bytes in
            Result { () throws(SystemError) in try SystemCall.writeAll(writer, bytes, written: &written) }
        }
        try result.get()
        close(writer)
        defer { thread.release() }
        #expect(thread.done.wait(timeout: .now() + .seconds(30)) == .success)
        #expect(written == sent.count)
        #expect(received.withLock { $0 } == sent)
    }

    @Test("A write to a pipe whose reader has gone throws EPIPE, counting nothing")
    func writeAllReportsBrokenPipe() {
        signal(SIGPIPE, SIG_IGN)
        var ends: [Int32] = [0, 0]
        #expect(pipe(&ends) == 0)
        close(ends[0])
        defer { close(ends[1]) }
        var written = 0
        let bytes = [UInt8](repeating: 1, count: 10)
        let result = bytes.withUnsafeBytes { buffer in
            Result { () throws(SystemError) in try SystemCall.writeAll(ends[1], buffer, written: &written) }
        }
        #expect(throws: SystemError(EPIPE)) { try result.get() }
        #expect(written == 0)
        #expect(SystemError(EPIPE).description.contains("errno 32"))
    }

    @Test("A call that fails for another reason than EINTR throws its errno at once")
    func otherErrorsAreThrown() {
        #expect(throws: SystemError(EBADF)) { try SystemCall.retryingInterrupts { close(-1) } }
        var byte: UInt8 = 0
        let result = withUnsafeMutableBytes(of: &byte) { buffer in
            Result { () throws(SystemError) in try SystemCall.read(-1, into: buffer) }
        }
        #expect(throws: SystemError(EBADF)) { try result.get() }
    }

    @Test("Poll's milliseconds round up and saturate, so a wait never ends early or overflows")
    func millisecondsRoundUp() {
        let now = ContinuousClock.now
        #expect(SystemCall.milliseconds(until: now - .seconds(1)) == 0)
        #expect(SystemCall.milliseconds(until: now + .seconds(400_000)) == 86_400_000)
        let soon = SystemCall.milliseconds(until: ContinuousClock.now + .microseconds(1500))
        #expect(soon == 2 || soon == 1, "1.5 ms ahead is 2 ms, or 1 ms if 0.5 ms passed meanwhile: \(soon)")
    }

    @Test("Polling nothing waits out the time and reports nothing ready")
    func pollingNothingWaits() throws {
        var nothing: [pollfd] = []
        let start = ContinuousClock.now
        #expect(try SystemCall.poll(&nothing, timeout: .milliseconds(50)) == 0)
        #expect(ContinuousClock.now - start >= .milliseconds(50))
    }

    @Test("An eventfd signalled twice is read back to zero at once")
    func eventDescriptor() throws {
        let descriptor = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        #expect(descriptor >= 0)
        defer { close(descriptor) }
        SystemCall.signal(eventDescriptor: descriptor)
        SystemCall.signal(eventDescriptor: descriptor)
        #expect(try SystemCall.poll(descriptor, events: Int16(POLLIN), timeout: .zero) & Int16(POLLIN) != 0)
        #expect(SystemCall.clear(eventDescriptor: descriptor), "it had been signalled")
        #expect(try SystemCall.poll(descriptor, events: Int16(POLLIN), timeout: .zero) == 0)
        #expect(!SystemCall.clear(eventDescriptor: descriptor), "nothing since")
    }

    @Test("A datagram is received whole, an empty socket says so, and a closed one's error is thrown")
    func receiveDatagrams() throws {
        var ends: [Int32] = [-1, -1]
        #expect(socketpair(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0, &ends) == 0)
        defer { close(ends[0]) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64, alignment: 8)
        defer { buffer.deallocate() }
        #expect(try SystemCall.receive(ends[0], into: buffer) == .wouldBlock)
        #expect(write(ends[1], "datagram", 8) == 8)
        #expect(write(ends[1], "", 0) == 0)
        #expect(try SystemCall.receive(ends[0], into: buffer) == .bytes(8))
        #expect(String(decoding: UnsafeRawBufferPointer(rebasing: buffer[0..<8]), as: UTF8.self) == "datagram")
        #expect(try SystemCall.receive(ends[0], into: buffer) == .bytes(0), "an empty datagram is one too")
        #expect(try SystemCall.receive(ends[0], into: buffer) == .wouldBlock)
        close(ends[1])
        #expect(throws: SystemError(EBADF)) { try SystemCall.receive(ends[1], into: buffer) }
    }
}

@Suite("One lock, one executor for blocking work", .offPool)
struct LockAndExecutorTests {
    struct Refused: Error, Equatable {}

    @Test("Locked passes a typed error through, and the value stays as it was left")
    func lockedRethrowsTyped() {
        let value = Locked(1)
        #expect(throws: Refused()) {
            try value.withLock { (number) throws(Refused) in
                number = 2
                throw Refused()
            }
        }
        #expect(value.withLock { $0 } == 2)
    }

    @Test("Locked serializes increments from many threads")
    func lockedCounts() async {
        let counter = Locked(0)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<8 {
                group.addTask {
                    await BlockingWork.run(named: "nr-count") { for _ in 0..<10_000 { counter.withLock { $0 += 1 } } }
                }
            }
        }
        #expect(counter.withLock { $0 } == 80_000)
    }

    @Test("A blocking job runs on a thread the kernel knows by its name")
    func threadIsNamed() async throws {
        let comm = await BlockingWork.run(named: "netreach-test-named-thread") { () -> String in
            (try? String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8)) ?? ""
        }
        #expect(comm == "netreach-test-n\n", "Linux keeps 15 bytes of a thread's name")
    }
}

/// The one reader of serve's configuration files (`--config`, `--web.config.file`): each way a
/// path can fail to be a small UTF-8 file is its own error, never a crash or a read without end.
@Suite("Configuration text")
struct ConfigurationTextTests {
    @Test func eachWayAFileCannotBeUsedIsSaid() throws {
        let directory = try TemporaryDirectory("netreach-text")
        defer { directory.remove() }
        let small = directory.path("ok.yml")
        try Data("listen: 127.0.0.1:9817\n".utf8).write(to: URL(fileURLWithPath: small))
        #expect(try SystemCall.readConfigurationText(small, limit: 1 << 20) == "listen: 127.0.0.1:9817\n")
        let exact = directory.path("exact")
        try Data(repeating: 0x61, count: 8).write(to: URL(fileURLWithPath: exact))
        #expect(try SystemCall.readConfigurationText(exact, limit: 8) == "aaaaaaaa")
        #expect(throws: SystemCall.ConfigurationTextError.cannotRead("larger than 7 bytes")) {
            try SystemCall.readConfigurationText(exact, limit: 7)
        }
        #expect(throws: SystemCall.ConfigurationTextError.cannotRead("larger than 1 MiB")) {
            let large = directory.path("large")
            try Data(count: (1 << 20) + 1).write(to: URL(fileURLWithPath: large))
            return try SystemCall.readConfigurationText(large, limit: 1 << 20)
        }
        let binary = directory.path("binary")
        try Data([0xff, 0xfe]).write(to: URL(fileURLWithPath: binary))
        #expect(throws: SystemCall.ConfigurationTextError.notText) {
            try SystemCall.readConfigurationText(binary, limit: 1 << 20)
        }
        for path in [directory.url.path, "/dev/zero"] {
            #expect(throws: SystemCall.ConfigurationTextError.cannotRead("not a regular file")) {
                try SystemCall.readConfigurationText(path, limit: 1 << 20)
            }
        }
        #expect(throws: SystemCall.ConfigurationTextError.cannotRead(SystemError(ENOENT).description)) {
            try SystemCall.readConfigurationText(directory.path("missing"), limit: 1 << 20)
        }
    }
}
