#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// An errno value a system call failed with.
///
/// ```swift
/// do throws(SystemError) { _ = try SystemCall.read(descriptor, into: buffer) }
/// catch { print(error) }   // "No such file or directory (errno 2)"
/// ```
package struct SystemError: Error, Equatable, Sendable, CustomStringConvertible {
    package let code: Int32

    package init(_ code: Int32) { self.code = code }

    /// The current thread's errno.
    package static var current: SystemError { SystemError(errno) }

    package var description: String { "\(String(cString: strerror(code))) (errno \(code))" }
}

/// The package's one layer over the system calls that can be interrupted or refused for now:
/// `EINTR` is retried here, once, and `EAGAIN` on a write waits here, once, for every caller
/// (the path engine, the resolv.conf watcher, output files, the command line).
///
/// Callers keep their own error types: each call throws a ``SystemError`` they wrap with what
/// they know (the path, the operation).
package enum SystemCall {
    /// Calls `body` again for as long as it fails with `EINTR`; its result when not negative,
    /// otherwise the errno it failed with.
    ///
    /// ```swift
    /// let descriptor = try SystemCall.retryingInterrupts { open(path, O_RDONLY | O_CLOEXEC) }
    /// ```
    @discardableResult
    package static func retryingInterrupts<Result: BinaryInteger>(_ body: () -> Result) throws(SystemError) -> Result {
        while true {
            let result = body()
            if result >= 0 { return result }
            let code = errno
            if code != EINTR { throw SystemError(code) }
        }
    }

    /// One read(2) into `buffer`, retried on `EINTR`: the bytes read, 0 at end of file.
    /// A non-blocking descriptor with nothing to read throws `EAGAIN`.
    package static func read(_ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int
    {
        try retryingInterrupts { systemRead(descriptor, buffer.baseAddress, buffer.count) }
    }

    /// Reads a small file whole, at most `limit` bytes of it (procfs, sysfs, resolv.conf: a file
    /// that never ends is cut there); `nil` when it cannot be opened. A read that fails later ends
    /// the file where it failed.
    ///
    /// ```swift
    /// let stat = SystemCall.readFile("/proc/self/stat", limit: 4096).map { String(decoding: $0, as: UTF8.self) }
    /// ```
    package static func readFile(_ path: String, limit: Int) -> [UInt8]? {
        guard let descriptor = try? retryingInterrupts({ open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK) }) else {
            return nil
        }
        defer { close(descriptor) }
        var bytes = [UInt8](repeating: 0, count: limit)
        var total = 0
        while total < limit {
            let count = bytes.withUnsafeMutableBytes { buffer in
                try? read(descriptor, into: UnsafeMutableRawBufferPointer(rebasing: buffer[total...]))
            }
            guard let count, count > 0 else { break }
            total += count
        }
        return Array(bytes.prefix(total))
    }

    /// Why ``readConfigurationText(_:limit:)`` gave no text.
    package enum ConfigurationTextError: Error, Equatable, Sendable {
        /// It cannot be looked at or read, is not a regular file, or is larger than the limit:
        /// the reason, as a phrase.
        case cannotRead(String)
        /// Its bytes are not UTF-8.
        case notText
    }

    /// A configuration file's text: a regular file of at most `limit` bytes, in UTF-8. What
    /// serve's `--config` and `--web.config.file` are both read with.
    ///
    /// ```swift
    /// let text = try SystemCall.readConfigurationText("/etc/netreach/serve.yaml", limit: 1 << 20)
    /// ```
    package static func readConfigurationText(
        _ path: String, limit: Int
    ) throws(ConfigurationTextError) -> String {
        var status = stat()
        guard stat(path, &status) == 0 else { throw .cannotRead(SystemError.current.description) }
        guard status.st_mode & S_IFMT == S_IFREG else { throw .cannotRead("not a regular file") }
        guard let bytes = readFile(path, limit: limit + 1) else { throw .cannotRead(SystemError.current.description) }
        guard bytes.count <= limit else {
            throw .cannotRead("larger than " + (limit % (1 << 20) == 0 ? "\(limit >> 20) MiB" : "\(limit) bytes"))
        }
        guard let text = String(validating: bytes, as: UTF8.self) else { throw .notText }
        return text
    }

    /// What one non-blocking ``receive(_:into:)`` got.
    package enum Received: Equatable, Sendable {
        /// A datagram of this many bytes (0 for an empty one).
        case bytes(Int)
        /// Nothing is queued (`EAGAIN`).
        case wouldBlock
        /// Datagrams were dropped because the receive buffer was full (`ENOBUFS`, which a netlink
        /// socket reports once, on the next receive after an overrun).
        case overrun
    }

    /// One recv(2) of a datagram into `buffer`, retried on `EINTR`. A descriptor with nothing
    /// queued is ``Received/wouldBlock``, a netlink overrun ``Received/overrun``; any other errno
    /// is thrown.
    ///
    /// ```swift
    /// if case .bytes(let count) = try SystemCall.receive(socket, into: buffer) { ... }
    /// ```
    package static func receive(
        _ descriptor: Int32, into buffer: UnsafeMutableRawBufferPointer
    ) throws(SystemError) -> Received {
        while true {
            let count = systemReceive(descriptor, buffer.baseAddress, buffer.count)
            if count >= 0 { return .bytes(count) }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: return .wouldBlock
            case ENOBUFS: return .overrun
            case let code: throw SystemError(code)
            }
        }
    }

    /// Writes all of `bytes`: partial writes are continued, `EINTR` retried, and `EAGAIN` (a
    /// descriptor somebody made non-blocking, such as a shared pipe) waits until it takes more.
    /// `written` grows by each step, so after a failure it says how much got through.
    ///
    /// ```swift
    /// var written = 0
    /// try bytes.withUnsafeBytes { try SystemCall.writeAll(1, $0, written: &written) }
    /// ```
    package static func writeAll(
        _ descriptor: Int32, _ bytes: UnsafeRawBufferPointer,
        written: inout Int
    ) throws(SystemError) {
        guard let base = bytes.baseAddress else { return }
        var offset = 0
        while offset < bytes.count {
            let count = systemWrite(descriptor, base + offset, bytes.count - offset)
            if count > 0 {
                offset += count
                written += count
                continue
            }
            let code = count == 0 ? EIO : errno // 0 for a non-empty write: no progress, ever
            switch code {
            case EINTR:
                continue
            case EAGAIN, EWOULDBLOCK:
                // With the reader gone poll reports POLLERR, and the next write fails (EPIPE).
                _ = try poll(descriptor, events: Int16(POLLOUT), timeout: nil)
            default:
                throw SystemError(code)
            }
        }
    }

    /// `writeAll(_:_:written:)` for callers that do not count.
    package static func writeAll(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer) throws(SystemError) {
        var written = 0
        try writeAll(descriptor, bytes, written: &written)
    }

    /// poll(2) over `descriptors`, waiting at most `timeout` (`nil`: until something happens).
    /// An `EINTR` polls again for the time that is left. Returns how many descriptors have
    /// events (0 when the time ran out); each one's `revents` says which.
    ///
    /// ```swift
    /// var watched = [pollfd(fd: fd, events: Int16(POLLIN), revents: 0)]
    /// if try SystemCall.poll(&watched, timeout: .seconds(1)) > 0 { ... }
    /// ```
    package static func poll(_ descriptors: inout [pollfd], timeout: Duration?) throws(SystemError) -> Int {
        if descriptors.isEmpty {
            // Nothing to watch: poll(2) only waits out the time.
            var none = pollfd()
            return try poll(&none, count: 0, timeout: timeout)
        }
        let count = descriptors.count
        let result = descriptors.withUnsafeMutableBufferPointer { buffer in
            Result { () throws(SystemError) in try poll(buffer.baseAddress!, count: count, timeout: timeout) }
        }
        return try result.get()
    }

    /// poll(2) on one descriptor: the events it has (`revents`, 0 when the time ran out).
    package static func poll(_ descriptor: Int32, events: Int16, timeout: Duration?) throws(SystemError) -> Int16 {
        var watched = pollfd(fd: descriptor, events: events, revents: 0)
        _ = try poll(&watched, count: 1, timeout: timeout)
        return watched.revents
    }

    /// The one poll loop, over `count` descriptors at `descriptors` (no allocation).
    private static func poll(
        _ descriptors: UnsafeMutablePointer<pollfd>, count: Int, timeout: Duration?
    ) throws(SystemError) -> Int {
        let deadline = timeout.map { ContinuousClock.now + max($0, .zero) }
        while true {
            for index in 0..<count { descriptors[index].revents = 0 }
            let milliseconds = deadline.map { Self.milliseconds(until: $0) } ?? -1
            let ready = systemPoll(descriptors, nfds_t(count), milliseconds)
            if ready > 0 { return Int(ready) }
            if ready == 0 {
                // One poll waits a day at most: a longer timeout polls again for the rest.
                if let deadline, ContinuousClock.now < deadline { continue }
                return 0
            }
            let code = errno
            if code != EINTR { throw SystemError(code) }
        }
    }

    /// What is at `path`, following symbolic links: `nil` when nothing is (or it cannot be
    /// looked at), else whether it is a directory and whether this process may read it.
    ///
    /// ```swift
    /// if let file = SystemCall.fileStatus("/etc/ssl/certs"), file.isDirectory, file.isReadable { ... }
    /// ```
    package static func fileStatus(_ path: String) -> (isDirectory: Bool, isReadable: Bool)? {
        var information = stat()
        guard stat(path, &information) == 0 else { return nil }
        return ((information.st_mode & S_IFMT) == S_IFDIR, access(path, R_OK) == 0)
    }

    /// Adds one to an eventfd(2) counter, waking whoever polls it. Cannot fail but for a bad
    /// descriptor (then nobody is polling it), so nothing is thrown.
    package static func signal(eventDescriptor descriptor: Int32) {
        var one: UInt64 = 1
        _ = try? retryingInterrupts { systemWrite(descriptor, &one, MemoryLayout<UInt64>.size) }
    }

    /// Reads an eventfd(2) counter back to zero (non-blocking descriptors: nothing to read is fine);
    /// returns whether it had been signalled.
    @discardableResult
    package static func clear(eventDescriptor descriptor: Int32) -> Bool {
        var count: UInt64 = 0
        let read = try? retryingInterrupts { systemRead(descriptor, &count, MemoryLayout<UInt64>.size) }
        return read == MemoryLayout<UInt64>.size && count > 0
    }

    /// Whole milliseconds from now until `deadline`, rounded up (a wait never ends early), at
    /// least 0 and at most a day (poll takes an Int32).
    static func milliseconds(until deadline: ContinuousClock.Instant) -> Int32 {
        let left = deadline - .now
        guard left > .zero else { return 0 }
        let (seconds, attoseconds) = left.components
        if seconds >= 86_400 { return 86_400_000 }
        return Int32(seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
    }
}

// The system calls under names `SystemCall`'s own methods do not shadow.
private func systemRead(_ descriptor: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    read(descriptor, buffer, count)
}

private func systemReceive(_ descriptor: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    recv(descriptor, buffer, count, 0)
}

private func systemWrite(_ descriptor: Int32, _ bytes: UnsafeRawPointer, _ count: Int) -> Int {
    write(descriptor, bytes, count)
}

private func systemPoll(_ descriptors: UnsafeMutablePointer<pollfd>, _ count: nfds_t, _ timeout: Int32) -> Int32 {
    poll(descriptors, count, timeout)
}
