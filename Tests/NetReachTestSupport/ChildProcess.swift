import CNetReachTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A program a test runs: started with `posix_spawn`, watched by threads of its own, never by the
/// concurrency pool.
///
/// Why not Foundation's `Process`:
/// - Its children inherit every descriptor the test process has open that is not close-on-exec
///   (Foundation's own pipes and socket pairs are not), so one test's child kept another test's
///   pipe open and its reader waiting. Here the child closes every descriptor above 2.
/// - It finds the descriptors to close by reading `/proc/self/fd` into a fixed-size name copy that
///   reads past the end of the directory buffer: with some 1,300 descriptors open in a parallel run
///   it crashed the whole test process (SIGSEGV in `Process.run()`, seen here).
/// - It cannot start a child with standard output closed, and its children keep the test
///   process's ignored signals (SIGPIPE); here the child gets default dispositions, as from a shell.
///
/// The child is reaped by a thread blocked in `waitpid` at once, so its exit is known when it
/// happens, however busy the concurrency pool is, and a zombie never lingers (Swift Testing's exit
/// test monitor spins in `waitid(P_ALL, WNOWAIT)` while any child of the process is a zombie).
/// A child that does not exit in time is reported with what `waitpid` and `/proc` say about it.
///
/// ```swift
/// let finished = try await ChildProcess.run("/usr/sbin/ip", ["-j", "route", "show"])
/// #expect(finished.status == 0, "\(finished.standardError)")
/// ```
public final class ChildProcess: @unchecked Sendable {
    // @unchecked: `pid`, `description` and `state` are set in init and never change; `state`
    // guards its own contents.

    /// What the child reads on standard input.
    public enum Input: Sendable {
        /// `/dev/null`.
        case null
        /// These bytes, then end of file.
        case data(Data)
    }

    /// Where the child's standard output (or error) goes.
    public enum Output: Sendable, Equatable {
        /// A pipe read to its end by a thread of ours: ``standardOutput``, ``nextLine(timeout:)``.
        case collected
        /// `/dev/null`.
        case null
        /// A file, appended to (created if missing): output and error may share one.
        case file(String)
        /// `/dev/full`: every write fails with ENOSPC.
        case devFull
        /// Closed, as `>&-` in a shell.
        case closed
        /// A pipe whose read end is closed before the child starts: every write fails with EPIPE.
        case pipeWithoutReader
        /// Like ``collected``, but full and non-blocking for the writer when the child starts (the
        /// test process filled it with newlines and shares the O_NONBLOCK flag, as a descriptor
        /// shared with a program that set it): writes fail with EAGAIN until the first
        /// ``nextLine(timeout:)`` starts reading.
        case fullNonBlockingPipe
    }

    /// Everything a run to its end left behind (``run(_:_:input:environment:directory:timeout:)``).
    public struct Finished: Sendable {
        /// The exit status, or 128 + the signal that killed the child.
        public var status: Int32
        public var output: Data
        public var error: Data
        public var standardOutput: String { String(decoding: output, as: UTF8.self) }
        public var standardError: String { String(decoding: error, as: UTF8.self) }
    }

    /// The child's process ID (and process group: it leads a group of its own).
    public let pid: pid_t
    /// `executable arguments...`, for messages.
    public let description: String
    private let state: ChildState

    /// Starts `executable arguments...`.
    ///
    /// - Parameters:
    ///   - environment: the whole environment; `nil` passes the test process's own.
    ///   - directory: where the child starts; `nil` keeps the current directory.
    public init(
        _ executable: String, _ arguments: [String],
        input: Input = .null, output: Output = .collected, error: Output = .collected,
        environment: [String: String]? = nil, directory: String? = nil
    ) throws {
        description = ([executable] + arguments).joined(separator: " ")
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }

        // Default dispositions and an empty mask, as a shell gives its commands: the test process
        // ignores SIGPIPE, and ignored signals survive exec.
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGCHLD, SIGUSR1, SIGUSR2, SIGALRM] {
            sigaddset(&defaults, signal)
        }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var mask = sigset_t()
        sigemptyset(&mask)
        posix_spawnattr_setsigmask(&attributes, &mask)
        // A process group of its own, so cleanup reaches what it starts (a shell's pipeline).
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(
            &attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP))

        var parentEnds: [Int32] = [] // closed in the parent once the child has its copies
        defer { parentEnds.forEach { close($0) } }
        var inputWriter: Int32 = -1
        switch input {
        case .null:
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        case .data:
            let ends = try Self.pipe()
            posix_spawn_file_actions_adddup2(&actions, ends.read, 0)
            parentEnds.append(ends.read)
            inputWriter = ends.write
        }
        var readers: [(fd: Int32, stream: ChildState.Stream, startsLater: Bool)] = []
        for (descriptor, target, stream) in [(Int32(1), output, ChildState.Stream.output), (2, error, .error)] {
            switch target {
            case .null:
                posix_spawn_file_actions_addopen(&actions, descriptor, "/dev/null", O_WRONLY, 0)
            case .file(let path):
                posix_spawn_file_actions_addopen(&actions, descriptor, path, O_WRONLY | O_CREAT | O_APPEND, 0o644)
            case .devFull:
                posix_spawn_file_actions_addopen(&actions, descriptor, "/dev/full", O_WRONLY, 0)
            case .closed:
                posix_spawn_file_actions_addclose(&actions, descriptor)
            case .pipeWithoutReader:
                let ends = try Self.pipe()
                close(ends.read) // before the child exists: nobody will ever read
                posix_spawn_file_actions_adddup2(&actions, ends.write, descriptor)
                parentEnds.append(ends.write)
            case .collected, .fullNonBlockingPipe:
                let ends = try Self.pipe()
                posix_spawn_file_actions_adddup2(&actions, ends.write, descriptor)
                parentEnds.append(ends.write)
                if target == .fullNonBlockingPipe {
                    // dup2 shares the open file description, and so O_NONBLOCK, with the child.
                    _ = fcntl(ends.write, F_SETFL, fcntl(ends.write, F_GETFL) | O_NONBLOCK)
                    let newlines = [UInt8](repeating: UInt8(ascii: "\n"), count: 4096)
                    while Glibc.write(ends.write, newlines, newlines.count) > 0 {}
                }
                readers.append((ends.read, stream, target == .fullNonBlockingPipe))
            }
        }
        // Nothing else crosses into the child: not the test process's sockets, nor other tests' pipes.
        nrts_spawn_file_actions_addclosefrom(&actions, 3)
        if let directory { nrts_spawn_file_actions_addchdir(&actions, directory) }

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let environmentStrings: [UnsafeMutablePointer<CChar>?]? = environment.map { variables in
            variables.map { strdup("\($0.key)=\($0.value)") } + [nil]
        }
        defer { environmentStrings?.forEach { free($0) } }

        var child: pid_t = 0
        let spawned: Int32
        if let environmentStrings {
            spawned = environmentStrings.withUnsafeBufferPointer {
                posix_spawn(&child, executable, &actions, &attributes, argv, $0.baseAddress)
            }
        } else {
            spawned = posix_spawn(&child, executable, &actions, &attributes, argv, environ)
        }
        guard spawned == 0 else {
            readers.forEach { close($0.fd) }
            if inputWriter >= 0 { close(inputWriter) }
            throw ChildProcessError.spawn(description, errno: spawned)
        }
        pid = child
        state = ChildState()

        let state = self.state
        let pid = child
        Self.thread("wait \(pid)") {
            var status: Int32 = 0
            var result: pid_t
            repeat { result = waitpid(pid, &status, 0) } while result == -1 && errno == EINTR
            let failure = result == pid ? nil : errno
            // WIFEXITED / WEXITSTATUS / WTERMSIG, which Swift does not import (macros).
            let code = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
            state.update { $0.exit = failure == nil ? .exited(code) : .waitFailed(failure!) }
        }
        for reader in readers {
            state.update { $0.open.insert(reader.stream) }
            if reader.startsLater {
                state.update { $0.deferredReader = reader.fd }
            } else {
                Self.startReader(reader.fd, reader.stream, state)
            }
        }
        if case .data(let bytes) = input {
            let writer = inputWriter
            Self.thread("input \(pid)") {
                bytes.withUnsafeBytes { buffer in
                    var offset = 0
                    while offset < buffer.count {
                        let written = Glibc.write(writer, buffer.baseAddress! + offset, buffer.count - offset)
                        if written > 0 {
                            offset += written
                        } else if written < 0 && errno == EINTR {
                            continue
                        } else {
                            break
                        }
                    }
                }
                close(writer)
            }
        }
    }

    deinit {
        // A child still running when its test is over is stopped, with what it started; the waiter
        // thread reaps it.
        if state.current.exit == nil { Glibc.kill(-pid, SIGKILL) }
    }

    // MARK: Running to the end

    /// Runs `executable arguments...` to its end off the concurrency pool and returns its status
    /// and output; kills it (and throws) if it has not ended within `timeout`.
    public static func run(
        _ executable: String, _ arguments: [String], input: Input = .null,
        environment: [String: String]? = nil, directory: String? = nil, timeout: Duration = .seconds(120)
    ) async throws -> Finished {
        try await offPool {
            try runBlocking(
                executable, arguments, input: input, environment: environment,
                directory: directory, timeout: timeout)
        }
    }

    /// ``run(_:_:input:environment:directory:timeout:)`` on the calling thread (which blocks).
    public static func runBlocking(
        _ executable: String, _ arguments: [String], input: Input = .null,
        environment: [String: String]? = nil, directory: String? = nil, timeout: Duration = .seconds(120)
    ) throws -> Finished {
        let child = try ChildProcess(
            executable, arguments, input: input, environment: environment, directory: directory)
        guard let status = child.waitBlocking(timeout: timeout) else {
            let diagnosis = child.diagnosis()
            child.kill()
            _ = child.waitBlocking(timeout: .seconds(10))
            throw ChildProcessError.timedOut(child.description, timeout, diagnosis)
        }
        return child.state.read { Finished(status: status, output: $0.output, error: $0.error) }
    }

    // MARK: Exit

    /// Waits (at most `timeout`) for the child to exit and for its collected output to end; its
    /// exit status (or 128 + the signal that killed it). `nil` with an issue recorded if it did
    /// not exit in time (it is then killed) or could not be waited for; the issue says what
    /// `waitpid` and `/proc` saw.
    public func exitStatus(
        timeout: Duration = .seconds(30), sourceLocation: SourceLocation = #_sourceLocation
    ) async -> Int32? {
        let outcome: (status: Int32?, problem: String?) = await offPool { [self] in
            if let status = waitBlocking(timeout: timeout) { return (status, nil) }
            let problem: String
            if case .waitFailed(let error) = state.current.exit {
                problem = "waitpid(\(pid)) failed: \(String(cString: strerror(error))) (errno \(error))"
            } else {
                problem = "\(description) did not exit within \(timeout): \(diagnosis())"
                kill()
                _ = waitBlocking(timeout: .seconds(10))
            }
            return (nil, problem)
        }
        if let problem = outcome.problem {
            Issue.record("\(problem); standard error: \(standardError)", sourceLocation: sourceLocation)
        }
        return outcome.status
    }

    /// Waits on the calling thread (which blocks) for the exit and, bounded, for the collected
    /// output to end (a program it started may hold the pipe open); `nil` if it did not exit in time.
    public func waitBlocking(timeout: Duration) -> Int32? {
        let deadline = Date(timeIntervalSinceNow: timeout.seconds)
        guard case .exited(let status)? = state.wait(until: deadline, for: { $0.exit != nil })?.exit else {
            return nil
        }
        _ = state.wait(until: min(deadline, Date(timeIntervalSinceNow: 2)), for: { $0.open.isEmpty })
        return status
    }

    /// Whether the child still runs (has not been reaped).
    public var isRunning: Bool { state.current.exit == nil }

    /// The exit status if the child has exited, without waiting.
    public var status: Int32? {
        if case .exited(let status)? = state.current.exit { return status }
        return nil
    }

    /// Sends `signal` to the child alone.
    public func signal(_ signal: Int32) {
        if isRunning { Glibc.kill(pid, signal) }
    }

    /// SIGTERM to the child.
    public func terminate() { signal(SIGTERM) }

    /// SIGKILL to the child and everything in its process group.
    public func kill() {
        if isRunning { Glibc.kill(-pid, SIGKILL) }
    }

    /// What `waitpid` and `/proc` say about the child now: its state (R, S, D, Z...), what it
    /// waits in, its threads, its parent.
    public func diagnosis() -> String {
        var parts: [String] = []
        switch state.current.exit {
        case nil: parts.append("not reaped by our waiter")
        case .exited(let status)?: parts.append("exited with \(status)")
        case .waitFailed(let error)?: parts.append("waitpid failed: errno \(error)")
        }
        let proc = "/proc/\(pid)"
        if let status = try? String(contentsOfFile: proc + "/status", encoding: .utf8) {
            let wanted = ["State", "PPid", "Threads", "SigBlk", "SigIgn", "SigCgt"]
            parts += status.split(separator: "\n").filter { line in wanted.contains { line.hasPrefix($0 + ":") } }
                .map { $0.replacingOccurrences(of: "\t", with: " ") }
        } else {
            parts.append("no \(proc)")
        }
        if let wchan = try? String(contentsOfFile: proc + "/wchan", encoding: .utf8), !wchan.isEmpty {
            parts.append("waiting in \(wchan)")
        }
        if let stack = try? String(contentsOfFile: proc + "/stack", encoding: .utf8), !stack.isEmpty {
            parts.append("kernel stack: " + stack.split(separator: "\n").prefix(6).joined(separator: " < "))
        }
        return parts.joined(separator: "; ")
    }

    // MARK: Output

    /// Everything the child wrote on standard output so far (``Output/collected``).
    public var output: Data { state.current.output }
    public var standardOutput: String { String(decoding: output, as: UTF8.self) }
    /// Complete lines written on standard output so far.
    public var outputLines: [String] {
        standardOutput.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init)
    }
    /// Everything the child wrote on standard error so far (``Output/collected``).
    public var standardError: String { String(decoding: state.current.error, as: UTF8.self) }

    /// The next line of standard output not yet returned by this method, waiting at most `timeout`
    /// for it; `nil` at the end of the output or on time-out.
    public func nextLine(timeout: Duration = .seconds(30)) async -> String? {
        if let deferred = state.update({ state -> Int32? in
            defer { state.deferredReader = nil }
            return state.deferredReader
        }) {
            Self.startReader(deferred, .output, state)
        }
        return await offPool { [state] in
            let deadline = Date(timeIntervalSinceNow: timeout.seconds)
            let ready = state.wait(until: deadline) {
                $0.output[$0.lineCursor...].contains(UInt8(ascii: "\n")) || !$0.open.contains(.output)
            }
            return ready.flatMap { _ in
                state.update { state -> String? in
                    guard let end = state.output[state.lineCursor...].firstIndex(of: UInt8(ascii: "\n")) else {
                        return nil
                    }
                    defer { state.lineCursor = end + 1 }
                    return String(decoding: state.output[state.lineCursor..<end], as: UTF8.self)
                }
            }
        }
    }

    /// Waits (at most `timeout`) until standard output or error satisfies `condition`; whether it did.
    public func waitForOutput(
        timeout: Duration = .seconds(30), _ condition: @escaping @Sendable (_ output: String, _ error: String) -> Bool
    ) async -> Bool {
        await offPool { [state] in
            state.wait(until: Date(timeIntervalSinceNow: timeout.seconds)) {
                condition(String(decoding: $0.output, as: UTF8.self), String(decoding: $0.error, as: UTF8.self))
            } != nil
        }
    }

    /// Closes our end of standard output (``Output/collected``): for the child, its reader has gone.
    public func closeOutput() {
        state.update { $0.closeRequested.insert(.output) }
        _ = state.wait(until: Date(timeIntervalSinceNow: 5)) { !$0.open.contains(.output) }
    }

    // MARK: Plumbing

    /// A pipe whose ends close on exec (only the copies dup2 makes reach the child).
    private static func pipe() throws -> (read: Int32, write: Int32) {
        var ends: [Int32] = [-1, -1]
        guard Glibc.pipe(&ends) == 0 else { throw ChildProcessError.spawn("pipe", errno: errno) }
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        return (ends[0], ends[1])
    }

    private static func thread(_ name: String, _ body: @escaping @Sendable () -> Void) {
        let thread = Thread(block: body)
        thread.name = name
        thread.start()
    }

    /// Reads `fd` to its end into `state` (polling every 50 ms for a request to close it first).
    private static func startReader(_ fd: Int32, _ stream: ChildState.Stream, _ state: ChildState) {
        thread("read \(stream)") {
            var buffer = [UInt8](repeating: 0, count: 65536)
            reading: while true {
                if state.current.closeRequested.contains(stream) { break }
                var watched = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                let ready = poll(&watched, 1, 50)
                if ready == 0 || (ready < 0 && errno == EINTR) { continue }
                let count = read(fd, &buffer, buffer.count)
                if count > 0 {
                    state.update {
                        stream == .output
                            ? $0.output.append(contentsOf: buffer[..<count])
                            : $0.error.append(contentsOf: buffer[..<count])
                    }
                } else if count == 0 || (errno != EINTR && errno != EAGAIN) {
                    break reading
                }
            }
            close(fd)
            state.update { $0.open.remove(stream) }
        }
    }
}

/// What the threads watching one child know, behind one condition variable.
private final class ChildState: @unchecked Sendable {
    // @unchecked: `value` is only touched while `condition` is locked.
    enum Stream: Hashable, CustomStringConvertible {
        case output, error
        var description: String { self == .output ? "standard output" : "standard error" }
    }
    enum Exit {
        case exited(Int32)
        case waitFailed(Int32)
    }
    struct Value {
        var exit: Exit?
        var output = Data()
        var error = Data()
        var open: Set<Stream> = []
        var closeRequested: Set<Stream> = []
        var deferredReader: Int32?
        var lineCursor = 0
    }

    private let condition = NSCondition()
    private var value = Value()

    var current: Value { read { $0 } }

    func read<T>(_ body: (Value) -> T) -> T {
        condition.lock()
        defer { condition.unlock() }
        return body(value)
    }

    @discardableResult
    func update<T>(_ body: (inout Value) -> T) -> T {
        condition.lock()
        defer {
            condition.broadcast()
            condition.unlock()
        }
        return body(&value)
    }

    /// Blocks until `satisfied` holds (the value then) or `deadline` passes (`nil`).
    func wait(until deadline: Date, for satisfied: (Value) -> Bool) -> Value? {
        condition.lock()
        defer { condition.unlock() }
        while !satisfied(value) {
            if !condition.wait(until: deadline) && !satisfied(value) { return nil }
        }
        return value
    }
}

public enum ChildProcessError: Error, CustomStringConvertible {
    /// `posix_spawn` (or a pipe for it) failed with this `errno`, such as ETXTBSY for a program
    /// another process still has open for writing.
    case spawn(String, errno: Int32)
    case timedOut(String, Duration, String)

    public var description: String {
        switch self {
        case .spawn(let command, let code): "cannot start \(command): \(String(cString: strerror(code)))"
        case .timedOut(let command, let timeout, let diagnosis):
            "\(command) did not exit within \(timeout): \(diagnosis)"
        }
    }
}

extension Duration {
    /// The duration in seconds, as `TimeInterval`.
    var seconds: TimeInterval {
        let (seconds, attoseconds) = components
        return TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18
    }
}
