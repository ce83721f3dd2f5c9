import Foundation
@testable import NetReach
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Runs an executable with its standard output wired the ways that break naive programs: `/dev/full`,
/// closed, a pipe nobody reads, or a pipe the test reads and then closes.
///
/// posix_spawn rather than Foundation's Process: Process cannot start a child with a closed
/// descriptor 1, and its children inherit the test process's ignored signals; here SIGPIPE is
/// reset to its default in the child, as a shell started from a terminal has it, so a program
/// that forgets to handle it dies with 128 + 13 and the test sees that.
final class CLISpawn: @unchecked Sendable {
    // @unchecked: `pid` and the descriptors are set in init and read after; `state` is locked.

    /// Where the child's standard output goes.
    enum Output {
        /// `/dev/full`: every write fails with ENOSPC.
        case devFull
        /// Closed, as `>&-` in a shell.
        case closed
        /// A pipe whose read end is closed before the child starts: every write fails with EPIPE.
        case pipeWithoutReader
        /// A pipe the test reads (``readLine(timeout:)``) and can close (``closeOutput()``).
        case pipe
        /// Like ``pipe``, but non-blocking for the writer (as a descriptor shared with a program that
        /// set `O_NONBLOCK`) and full when the child starts (newlines): writes fail with EAGAIN
        /// until the test reads.
        case fullNonBlockingPipe
    }

    let pid: pid_t
    private var outputReader: Int32 = -1
    /// Held from creating a pipe to spawning: a child of a concurrent test spawned between pipe(2)
    /// and FD_CLOEXEC would keep this test's pipe end open (and its reader never gone).
    /// (Foundation's Process closes every other descriptor in its children by itself.)
    private static let spawning = NSLock()
    private let errors = Locked(Data())
    private let exited = Locked<Int32?>(nil)

    /// Starts `executable arguments...` with standard input `/dev/null`, standard output as
    /// `output` and standard error collected.
    init(_ executable: String, _ arguments: [String], output: Output) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }

        var defaults = sigset_t()
        sigemptyset(&defaults)
        sigaddset(&defaults, SIGPIPE)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var mask = sigset_t()
        sigemptyset(&mask)
        posix_spawnattr_setsigmask(&attributes, &mask)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        Self.spawning.lock()
        defer { Self.spawning.unlock() }
        var outputPipe: [Int32] = [-1, -1]
        switch output {
        case .devFull:
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/full", O_WRONLY, 0)
        case .closed:
            posix_spawn_file_actions_addclose(&actions, 1)
        case .pipeWithoutReader, .pipe, .fullNonBlockingPipe:
            try Self.makePipe(&outputPipe)
            posix_spawn_file_actions_adddup2(&actions, outputPipe[1], 1)
        }
        if output == .fullNonBlockingPipe {
            // dup2 shares the open file description, and so O_NONBLOCK, with the child.
            _ = fcntl(outputPipe[1], F_SETFL, fcntl(outputPipe[1], F_GETFL) | O_NONBLOCK)
            let newlines = [UInt8](repeating: UInt8(ascii: "\n"), count: 4096)
            while write(outputPipe[1], newlines, newlines.count) > 0 {}
        }
        var errorPipe: [Int32] = [-1, -1]
        try Self.makePipe(&errorPipe)
        posix_spawn_file_actions_adddup2(&actions, errorPipe[1], 2)
        if output == .pipeWithoutReader {
            close(outputPipe[0])   // before the child exists: nobody will ever read
            outputPipe[0] = -1
        }

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var child: pid_t = 0
        let spawned = posix_spawn(&child, executable, &actions, &attributes, argv, environ)
        if outputPipe[1] >= 0 { close(outputPipe[1]) }
        close(errorPipe[1])
        guard spawned == 0 else {
            if outputPipe[0] >= 0 { close(outputPipe[0]) }
            close(errorPipe[0])
            throw CLISpawnError("posix_spawn \(executable): \(String(cString: strerror(spawned)))")
        }
        pid = child
        outputReader = outputPipe[0]

        // Standard error, read to its end on a thread of its own so the child never blocks on it.
        let errors = self.errors
        let errorReader = errorPipe[0]
        Thread {
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = read(errorReader, &buffer, buffer.count)
                if count > 0 {
                    errors.withLock { $0.append(contentsOf: buffer[..<count]) }
                } else if count == 0 || errno != EINTR {
                    break
                }
            }
            close(errorReader)
        }.start()
    }

    deinit {
        if exited.current == nil { kill(pid, SIGKILL); _ = reap(blocking: true) }
        if outputReader >= 0 { close(outputReader) }
    }

    /// What the child wrote on standard error so far.
    var standardError: String { String(decoding: errors.current, as: UTF8.self) }

    /// The next line of standard output (``Output/pipe`` only), waiting at most `timeout`;
    /// `nil` at end of file or on time-out.
    func readLine(timeout: Duration = .seconds(15)) -> String? {
        let deadline = ContinuousClock.now + timeout
        var line: [UInt8] = []
        while ContinuousClock.now < deadline {
            var watched = pollfd(fd: outputReader, events: Int16(POLLIN), revents: 0)
            guard poll(&watched, 1, 10) > 0 else { continue }
            var byte: UInt8 = 0
            let count = read(outputReader, &byte, 1)
            if count == 0 { return nil }
            if count < 0 { if errno == EINTR { continue } else { return nil } }
            if byte == UInt8(ascii: "\n") { return String(decoding: line, as: UTF8.self) }
            line.append(byte)
        }
        return nil
    }

    /// Closes the test's read end of standard output (``Output/pipe``): the child's reader is gone.
    func closeOutput() {
        if outputReader >= 0 { close(outputReader) }
        outputReader = -1
    }

    /// Waits (bounded, polling) for the child to exit; its exit status, or 128 + the signal that
    /// killed it, or `nil` with an issue recorded if it did not exit within `timeout` (it is then
    /// killed).
    func exitStatus(timeout: Duration = .seconds(15), sourceLocation: SourceLocation = #_sourceLocation) async -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let status = reap(blocking: false) { return status }
            try? await Task.sleep(for: .milliseconds(10))
        }
        Issue.record("the child did not exit within \(timeout); standard error: \(standardError)",
                     sourceLocation: sourceLocation)
        kill(pid, SIGKILL)
        _ = reap(blocking: true)
        return nil
    }

    /// Whether the child still runs (without reaping it if it has exited: the status is kept).
    var isRunning: Bool { reap(blocking: false) == nil }

    private func reap(blocking: Bool) -> Int32? {
        if let status = exited.current { return status }
        var status: Int32 = 0
        let result = waitpid(pid, &status, blocking ? 0 : WNOHANG)
        guard result == pid else { return nil }
        // WIFEXITED / WEXITSTATUS / WTERMSIG, which Swift does not import (macros).
        let code = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        exited.withLock { $0 = code }
        return code
    }

    /// A pipe whose ends close on exec (the child gets only the copies dup2 makes), so children
    /// that other tests start meanwhile keep no end open. (Glibc does not export pipe2 to Swift.)
    private static func makePipe(_ ends: inout [Int32]) throws {
        guard pipe(&ends) == 0 else { throw CLISpawnError("pipe: \(String(cString: strerror(errno)))") }
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
    }
}

struct CLISpawnError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
