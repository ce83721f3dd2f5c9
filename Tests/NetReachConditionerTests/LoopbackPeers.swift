import Foundation
import NetReachTestSupport

#if canImport(Glibc)
import Glibc
#endif

/// A server on 127.0.0.1 (or an address of a lab's namespace) with a thread per connection: it
/// echoes what it reads, sends a number of bytes and closes, or records what it reads and how the
/// connection ended (the server's end of a fault), also before or after a half-close. Stops
/// within 100 ms of ``stop()``.
final class LoopbackServer: @unchecked Sendable {
    // @unchecked: `stopped`, `finished` and `acceptedCount` are guarded by `lock`; the rest is set in init.
    enum Mode: Sendable {
        case echo
        case send(Int)
        case record
        /// Records what it reads up to the client's FIN, then sends this many bytes and closes (an
        /// HTTP/1.0 server, or the far end of `nc -N`).
        case replyAfterEnd(Int)
        /// Sends this many bytes, half-closes (`shutdown(SHUT_WR)`), then records what it reads
        /// until the client's FIN.
        case sendThenRecord(Int)
    }

    /// What a recording server saw of one connection.
    struct Recording: Sendable {
        /// The client's FIN (a read of 0), a reset, or no end within 15 s.
        enum End: Sendable, Equatable { case closed, reset, timedOut }
        var bytes: [UInt8]
        var end: End
        /// Seconds from accepting the connection to its end.
        var lasted: Double
        /// When it ended.
        var ended: Date
    }

    /// The connections a recording server has seen end, in order.
    var recordings: [Recording] { lock.withLock { finished } }

    /// How many connections it has accepted.
    var accepted: Int { lock.withLock { acceptedCount } }

    /// Waits (at most `timeout`) for `count` recordings.
    func waitForRecordings(_ count: Int, timeout: Double = 10) -> [Recording] {
        let deadline = Date().addingTimeInterval(timeout)
        while recordings.count < count && Date() < deadline { usleep(5_000) }
        return recordings
    }

    private var finished: [Recording] = []
    private var acceptedCount = 0

    let port: Int
    private let listener: Int32
    private let mode: Mode
    private let lock = NSLock()
    private var stopped = false

    /// Listens on `host` (in the `ip netns` namespace `namespace`, or this process's own).
    init(_ mode: Mode, host: String = "127.0.0.1", namespace: String? = nil) throws {
        self.mode = mode
        listener = try LoopbackServer.listen(host: host, namespace: namespace)
        port = LoopbackServer.localPort(listener)
        Thread { [self] in serve() }.start()
    }

    func stop() { lock.withLock { stopped = true } }

    private var isStopped: Bool { lock.withLock { stopped } }

    private func serve() {
        defer { Glibc.close(listener) }
        while !isStopped {
            var ready = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            guard poll(&ready, 1, 100) > 0 else { continue }
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else { continue }
            lock.withLock { acceptedCount += 1 }
            let mode = mode
            Thread { [self] in
                switch mode {
                case .record:
                    let recording = LoopbackServer.record(connection)
                    lock.withLock { finished.append(recording) }
                case .replyAfterEnd(let count):
                    defer { Glibc.close(connection) }
                    let recording = LoopbackServer.record(connection, closing: false)
                    lock.withLock { finished.append(recording) }
                    if recording.end == .closed { sendAll(connection, LoopbackServer.pattern(count)) }
                case .sendThenRecord(let count):
                    sendAll(connection, LoopbackServer.pattern(count))
                    shutdown(connection, Int32(SHUT_WR))
                    let recording = LoopbackServer.record(connection)
                    lock.withLock { finished.append(recording) }
                case .echo, .send:
                    LoopbackServer.handle(connection, mode)
                }
            }.start()
        }
    }

    /// `count` bytes of a pattern that does not repeat within 251 bytes, so a byte lost or
    /// repeated shows.
    static func pattern(_ count: Int) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 % 251) }
    }

    /// Reads to the end (or a reset) and closes the connection, unless `closing` is false.
    private static func record(_ connection: Int32, closing: Bool = true) -> Recording {
        defer { if closing { Glibc.close(connection) } }
        let accepted = Date()
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var timeout = timeval(tv_sec: 15, tv_usec: 0)
        setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
            if count > 0 {
                bytes += buffer[0..<count]
                continue
            }
            let end: Recording.End =
                switch (count, errno) {
                case (0, _): .closed
                case (_, ECONNRESET): .reset
                case (_, EAGAIN), (_, EWOULDBLOCK): .timedOut
                default: .closed
                }
            return Recording(bytes: bytes, end: end, lasted: Date().timeIntervalSince(accepted), ended: Date())
        }
    }

    private static func handle(_ connection: Int32, _ mode: Mode) {
        defer { Glibc.close(connection) }
        switch mode {
        case .record, .replyAfterEnd, .sendThenRecord:
            return
        case .echo:
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = buffer.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
                guard count > 0 else { return }
                guard sendAll(connection, Array(buffer[0..<count])) else { return }
            }
        case .send(let total):
            let chunk = [UInt8](repeating: 0x5a, count: 16_384)
            var sent = 0
            while sent < total {
                let size = min(chunk.count, total - sent)
                guard sendAll(connection, Array(chunk[0..<size])) else { return }
                sent += size
            }
        }
    }

    /// A listening socket on `host`:`port` (0: a free port), in the `ip netns` namespace
    /// `namespace` or this process's own.
    static func listen(host: String = "127.0.0.1", port: Int = 0, namespace: String? = nil) throws -> Int32 {
        let fd = try LoopbackClient.socket(inNamespace: namespace)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        var yes: Int32 = 1 // a port whose earlier connections linger in TIME_WAIT can be listened on again
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        address.sin_addr.s_addr = inet_addr(host)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard fd >= 0, bound == 0, Glibc.listen(fd, 64) == 0 else {
            let failure = errno
            if fd >= 0 { close(fd) }
            throw LoopbackClient.Failure.system(failure)
        }
        return fd
    }

    static func localPort(_ fd: Int32) -> Int {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

@discardableResult
func sendAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
    var sent = 0
    while sent < bytes.count {
        let count = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard count > 0 else { return false }
        sent += count
    }
    return true
}

/// A blocking client of 127.0.0.1, or another loopback address (every read bounded: 10 s).
final class LoopbackClient: @unchecked Sendable {
    // @unchecked: one test drives it from one thread at a time.
    enum Failure: Error, Equatable {
        case system(Int32)
        case reset, timedOut
    }

    private let fd: Int32
    /// The socket, for tests that write to it directly.
    var descriptor: Int32 { fd }

    /// Connects to `host`:`port` from this process's namespace or the `ip netns` namespace `namespace`.
    convenience init(host: String = "127.0.0.1", port: Int, namespace: String? = nil) throws {
        try self.init(connectingTo: host, port: port, namespace: namespace, waiting: true)
    }

    private init(connectingTo host: String, port: Int, namespace: String?, waiting: Bool) throws {
        fd = try Self.socket(inNamespace: namespace)
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        if !waiting { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr(host)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 || (!waiting && errno == EINPROGRESS) else {
            let error = errno
            Glibc.close(fd)
            throw Failure.system(error)
        }
    }

    /// Starts connecting to `host`:`port` without waiting: ``waitUntilConnected(timeout:)`` says
    /// how it went.
    static func startConnecting(
        host: String = "127.0.0.1", port: Int, namespace: String? = nil
    ) throws
        -> LoopbackClient
    {
        try LoopbackClient(connectingTo: host, port: port, namespace: namespace, waiting: false)
    }

    /// How a connect started by ``startConnecting(host:port:namespace:)`` stands.
    enum Connect: Equatable {
        /// It has not completed (no answer to the SYN yet).
        case pending
        case connected
        case failed(Int32)
    }

    /// Waits at most `timeout` for the connect to complete; once connected, the socket blocks
    /// again (reads bounded at 10 s).
    func waitUntilConnected(timeout: Duration) -> Connect {
        var ready = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        let milliseconds = Int32(
            timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        guard poll(&ready, 1, milliseconds) > 0 else { return .pending }
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
        guard error == 0 else { return .failed(error) }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        return .connected
    }

    /// A TCP socket of this process's namespace or the `ip netns` namespace `namespace`.
    static func socket(inNamespace namespace: String?) throws -> Int32 {
        if let namespace { return try NamespaceSocket.tcp(inNamespace: namespace) }
        let fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure.system(errno) }
        return fd
    }

    func close() { Glibc.close(fd) }

    /// Sends the client's FIN (`shutdown(SHUT_WR)`, as `nc -N` does); it can still read.
    func finishSending() { shutdown(fd, Int32(SHUT_WR)) }

    /// Reads until `count` bytes (or the end, with `nil`).
    func read(upTo count: Int?) throws -> [UInt8] {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while count.map({ received.count < $0 }) ?? true {
            let got = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if got == 0 { break }
            if got < 0 {
                if errno == ECONNRESET { throw Failure.reset }
                if errno == EAGAIN || errno == EWOULDBLOCK { throw Failure.timedOut }
                throw Failure.system(errno)
            }
            received += buffer[0..<got]
        }
        return received
    }

    /// Sends one byte string and reads as many back; returns how long it took.
    func roundTrip(_ bytes: [UInt8]) throws -> Duration {
        let started = ContinuousClock.now
        sendAll(fd, bytes)
        let back = try read(upTo: bytes.count)
        guard back == bytes else { throw Failure.system(0) }
        return ContinuousClock.now - started
    }

    /// Connects, sends `send` (from a thread of its own, so a large echo cannot deadlock), reads
    /// `expect` bytes (or to the end), closes.
    static func exchange(host: String = "127.0.0.1", port: Int, send bytes: [UInt8], expect: Int?) throws -> [UInt8] {
        let client = try LoopbackClient(host: host, port: port)
        defer { client.close() }
        if !bytes.isEmpty {
            let fd = client.fd
            Thread { sendAll(fd, bytes) }.start()
        }
        return try client.read(upTo: expect)
    }
}
