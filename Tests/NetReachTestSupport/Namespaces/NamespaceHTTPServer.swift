import CNetReachLinux
import Foundation
import NetReach
import NetReachSystem

#if canImport(Glibc)
import Glibc
#endif

/// A minimal HTTP/1.1 server whose listening socket lives in another network namespace: it answers
/// every request with `200 ok` and `Connection: close` (or what `reply` says for its request line),
/// and records when each request arrived.
///
/// The socket is created on a thread of our own that enters the namespace with `setns` and leaves
/// it again (the socket stays bound to the namespace), then that thread serves, one connection at
/// a time, until ``stop()``. No Swift concurrency thread ever changes namespace.
///
/// ```swift
/// let server = try NamespaceHTTPServer(namespace: lab.peerName, address: "10.123.1.1")
/// defer { server.stop() }
/// // http://10.123.1.1:\(server.port)/ from inside the lab
/// ```
package final class NamespaceHTTPServer: Sendable {
    /// A request as the server saw it.
    package struct Arrival: Sendable {
        /// The request line, e.g. `GET /hello HTTP/1.1`.
        package var requestLine: String
        /// When its head was complete.
        package var at: ContinuousClock.Instant
    }

    /// What to do with a request.
    package enum Reply: Sendable {
        /// Send these bytes (a whole response), then close.
        case bytes([UInt8])
        /// Send nothing and hold the connection open until the server stops.
        case hang
        /// Close the connection without a byte.
        case close

        /// A response with `status`, `headers` and `body`, `Connection: close`.
        package static func response(_ status: String, headers: [String] = [], body: String = "") -> Reply {
            let head = (["HTTP/1.1 \(status)", "Content-Length: \(body.utf8.count)", "Connection: close"] + headers)
                .joined(separator: "\r\n")
            return .bytes(Array((head + "\r\n\r\n" + body).utf8))
        }
    }

    package let port: UInt16
    private let listener: Int32
    private let arrivals = Locked([Arrival]())
    private let stopped = Locked(false)
    private let reply: @Sendable (String) -> Reply

    /// Listens on `address` (IPv4) in the `ip netns` namespace `namespace`, on a free port;
    /// `reply` decides each answer from the request line (`200 ok` by default).
    package init(
        namespace: String, address: String,
        reply: @escaping @Sendable (String) -> Reply = { _ in .response("200 OK", body: "ok\n") }
    ) throws {
        self.reply = reply
        let listener = try Self.listen(inNamespace: "/var/run/netns/\(namespace)", address: address)
        var bound = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &bound) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        self.listener = listener
        port = UInt16(bigEndian: bound.sin_port)
        let server = self
        Thread { server.serve() }.start()
    }

    /// Every request received so far, in order.
    package var received: [Arrival] { arrivals.withLock { $0 } }

    /// Stops serving (within 100 ms) and closes the socket.
    package func stop() { stopped.withLock { $0 = true } }

    private var isStopped: Bool { stopped.withLock { $0 } }

    private func serve() {
        defer { close(listener) }
        while !isStopped {
            var ready = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            guard poll(&ready, 1, 100) > 0 else { continue }
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else { continue }
            respond(on: connection)
            close(connection)
        }
    }

    /// Reads one request head (bounded: 64 KiB, 2 s) and answers it.
    private func respond(on connection: Int32) {
        var timeout = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var head = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while head.count < 65536 {
            let count = buffer.withUnsafeMutableBytes { recv(connection, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { return }
            head += buffer[0..<count]
            if let end = head.firstRange(of: Array("\r\n\r\n".utf8)) {
                let text = String(decoding: head[..<end.lowerBound], as: UTF8.self)
                let line = text.split(separator: "\r\n", maxSplits: 1).first.map(String.init) ?? ""
                arrivals.withLock { $0.append(Arrival(requestLine: line, at: .now)) }
                switch reply(line) {
                case .bytes(let bytes):
                    var sent = 0
                    while sent < bytes.count {
                        let count = bytes[sent...].withUnsafeBytes {
                            send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
                        }
                        guard count > 0 else { return }
                        sent += count
                    }
                case .hang:
                    while !isStopped { usleep(20_000) }
                case .close:
                    break
                }
                return
            }
        }
    }

    /// Creates a TCP socket inside the namespace at `path` (``NamespaceSocket``), binds it and
    /// listens on it.
    private static func listen(inNamespace path: String, address: String) throws(LabError) -> Int32 {
        let fd = try NamespaceSocket.tcp(inNamespaceAt: path)
        var socketAddress = sockaddr_in()
        socketAddress.sin_family = sa_family_t(AF_INET)
        socketAddress.sin_port = 0
        guard inet_pton(AF_INET, address, &socketAddress.sin_addr) == 1 else {
            close(fd)
            throw .systemCall("inet_pton \(address)", "not an IPv4 address")
        }
        let bound = withUnsafePointer(to: &socketAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, Glibc.listen(fd, 16) == 0 else {
            let error = String(cString: strerror(errno))
            close(fd)
            throw .systemCall("bind/listen \(address) in \(path)", error)
        }
        return fd
    }
}
