import Foundation
import NetReachTestSupport
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
#if canImport(Glibc)
import Glibc
#endif

/// The test server does what its paths promise, seen from real clients on loopback: URLSession for
/// the HTTP answers, a plain socket where the difference between RST, FIN and bytes matters.
@Suite("FaultInjectingServer", .offPool, .timeLimit(.minutes(1)))
struct FaultInjectingServerTests {
    @Test func startsOnAnEphemeralLoopbackPortAndShutsDownTwiceSafely() async throws {
        // The port it frees cannot be taken there by another test's server before the check below.
        let host = otherLoopbackAddress()
        let server = try await FaultInjectingServer.start(host: host)
        let port = server.port
        #expect(port > 0)
        #expect(server.url("/ok?a=1").absoluteString == "http://\(host):\(port)/ok?a=1")
        try await server.shutdown()
        try await server.shutdown()
        // Refused, at once or within a moment: a child another test spawns holds a copy of every
        // descriptor, the closed listener's too, from its fork until it closes them before exec.
        let refused = try await offPool { () throws -> Int32 in
            let deadline = ContinuousClock.now + .seconds(10)
            var outcome = try LoopbackSocket.connectError(host: host, port: port)
            while outcome == 0 && ContinuousClock.now < deadline {
                usleep(20_000)
                outcome = try LoopbackSocket.connectError(host: host, port: port)
            }
            return outcome
        }
        #expect(refused == ECONNREFUSED)
    }

    @Test func okAnswers200WithContentLength() async throws {
        try await withServer { server, session in
            let (body, response) = try await session.httpData(from: server.url("/ok"))
            #expect(response.statusCode == 200)
            #expect(response.value(forHTTPHeaderField: "Content-Length") == "2")
            #expect(String(decoding: body, as: UTF8.self) == "ok")
            let request = try #require(server.received(path: "/ok").first)
            #expect(request.method == "GET")
            #expect(request.query == nil)
            #expect(request.body.isEmpty)
        }
    }

    @Test func echoReturnsTheBodyAndMethodAndRecordsTheIdempotencyKey() async throws {
        try await withServer { server, session in
            var request = URLRequest(url: server.url("/echo?x=1"))
            request.httpMethod = "POST"
            request.httpBody = Data("hello".utf8)
            request.setValue("key-123", forHTTPHeaderField: "Idempotency-Key")
            let (body, response) = try await session.httpData(for: request)
            #expect(response.statusCode == 200)
            #expect(response.value(forHTTPHeaderField: "x-echo-method") == "POST")
            #expect(body == Data("hello".utf8))
            let received = try #require(server.received(path: "/echo").first)
            #expect(received.method == "POST")
            #expect(received.query == "x=1")
            #expect(received.body == Data("hello".utf8))
            #expect(received.idempotencyKey == "key-123")
            #expect(received.headers["idempotency-key"] == "key-123")
        }
    }

    @Test func statusPathAnswersThatStatus() async throws {
        try await withServer { server, session in
            let (body, response) = try await session.httpData(from: server.url("/status/418"))
            #expect(response.statusCode == 418)
            #expect(String(decoding: body, as: UTF8.self) == "status 418")
            let (empty, noContent) = try await session.httpData(from: server.url("/status/204"))
            #expect(noContent.statusCode == 204)
            #expect(empty.isEmpty)
        }
    }

    @Test func unknownPathIs404() async throws {
        try await withServer { server, session in
            let (_, response) = try await session.httpData(from: server.url("/nope"))
            #expect(response.statusCode == 404)
            #expect(server.received(path: "/nope").count == 1)
        }
    }

    @Test func keepAliveServesSeveralRequestsOnOneConnection() async throws {
        try await withServer { server, _ in
            let port = server.port
            let bodies = try await offPool {
                let socket = try LoopbackSocket(port: port)
                defer { socket.close() }
                var bodies: [String] = []
                for path in ["/ok", "/status/201", "/ok"] {
                    try socket.send("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                    bodies.append(try socket.readResponse().body)
                }
                return bodies
            }
            #expect(bodies == ["ok", "status 201", "ok"])
            #expect(server.received.map(\.path) == ["/ok", "/status/201", "/ok"])
        }
    }

    @Test func resetAfterHeadersSendsRSTBeforeAnyByteAndCountsTheRequest() async throws {
        try await withServer { server, session in
            let port = server.port
            let (bytes, end) = try await offPool {
                let socket = try LoopbackSocket(port: port)
                defer { socket.close() }
                try socket.send("GET /reset-after-headers HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                return socket.readUntilClosed()
            }
            #expect(bytes.isEmpty)
            #expect(end == .reset)

            await #expect(throws: (any Error).self) {
                _ = try await session.httpData(from: server.url("/reset-after-headers"))
            }
            #expect(server.received(path: "/reset-after-headers").count == 2)
        }
    }

    @Test func resetMidBodySendsAHeadAnd100BytesThenRST() async throws {
        try await withServer { server, session in
            let port = server.port
            let (bytes, end) = try await offPool {
                let socket = try LoopbackSocket(port: port)
                defer { socket.close() }
                try socket.send("GET /reset-mid-body HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                return socket.readUntilClosed()
            }
            let text = String(decoding: bytes, as: UTF8.self)
            let parts = text.components(separatedBy: "\r\n\r\n")
            #expect(parts.first?.hasPrefix("HTTP/1.1 200 OK") == true)
            #expect(parts.first?.lowercased().contains("content-length: 1000") == true)
            #expect(parts.dropFirst().joined(separator: "\r\n\r\n").utf8.count == 100)
            #expect(end == .reset)

            await #expect(throws: (any Error).self) {
                _ = try await session.httpData(from: server.url("/reset-mid-body"))
            }
            #expect(server.received(path: "/reset-mid-body").count == 2)
        }
    }

    @Test func closeBeforeResponseReadsTheBodyThenClosesWithFIN() async throws {
        try await withServer { server, _ in
            let port = server.port
            let (bytes, end) = try await offPool {
                let socket = try LoopbackSocket(port: port)
                defer { socket.close() }
                try socket.send(
                    "POST /close-before-response HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\n\r\nhello")
                return socket.readUntilClosed()
            }
            #expect(bytes.isEmpty)
            #expect(end == .eof)
            let received = try #require(server.received(path: "/close-before-response").first)
            #expect(received.body == Data("hello".utf8))
        }
    }

    @Test func closeBeforeResponseFailsAURLSessionRequest() async throws {
        try await withServer { server, session in
            await #expect(throws: (any Error).self) {
                _ = try await session.httpData(from: server.url("/close-before-response"))
            }
            #expect(server.received(path: "/close-before-response").count >= 1)
        }
    }

    @Test func slowHeadersDelaysOnlyItsOwnResponse() async throws {
        try await withServer { server, session in
            let clock = ContinuousClock()
            let start = clock.now
            async let slow = session.httpData(from: server.url("/slow-headers?ms=20000"))
            // Wait until the slow request is in, then check the loop still answers others at once.
            while server.received(path: "/slow-headers").isEmpty, clock.now - start < .seconds(20) {
                try await Task.sleep(for: .milliseconds(10))
            }
            let okStart = clock.now
            let (okBody, _) = try await session.httpData(from: server.url("/ok"))
            let okDone = clock.now - start
            let okTook = clock.now - okStart
            let (slowBody, slowResponse) = try await slow
            let slowDone = clock.now - start
            #expect(String(decoding: okBody, as: UTF8.self) == "ok")
            // Not queued behind the slow answer: finished before it, in under half its delay.
            #expect(okTook < .seconds(10), "/ok took \(okTook)")
            #expect(okDone < slowDone, "/ok finished at \(okDone), the slow answer at \(slowDone)")
            #expect(slowResponse.statusCode == 200)
            #expect(String(decoding: slowBody, as: UTF8.self) == "ok")
            #expect(slowDone >= .milliseconds(5000))
        }
    }

    @Test func retryAfterAnswers503ForTheFirstTimesThen200() async throws {
        try await withServer { server, session in
            var answers: [(Int, String?)] = []
            for _ in 0..<3 {
                let (_, response) = try await session.httpData(from: server.url("/retry-after?seconds=3&times=2"))
                answers.append((response.statusCode, response.value(forHTTPHeaderField: "Retry-After")))
            }
            #expect(answers.map(\.0) == [503, 503, 200])
            #expect(answers.map(\.1) == ["3", "3", nil])
            // Another query string has its own counter.
            let (_, other) = try await session.httpData(from: server.url("/retry-after?seconds=3&times=1"))
            #expect(other.statusCode == 503)
            #expect(server.received(path: "/retry-after").count == 4)
        }
    }

    @Test func retryAfterWithoutTimesNeverStops() async throws {
        try await withServer { server, session in
            for _ in 0..<3 {
                let (_, response) = try await session.httpData(from: server.url("/retry-after?seconds=1"))
                #expect(response.statusCode == 503)
            }
        }
    }

    @Test func retryAfterDateIsAnIMFFixdateSecondsInTheFuture() async throws {
        try await withServer { server, session in
            let before = Date()
            let (_, response) = try await session.httpData(from: server.url("/retry-after-date?seconds=5&times=1"))
            #expect(response.statusCode == 503)
            let value = try #require(response.value(forHTTPHeaderField: "Retry-After"))
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "GMT")
            formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
            let date = try #require(formatter.date(from: value))
            #expect(formatter.string(from: date) == value)
            let ahead = date.timeIntervalSince(before)
            #expect(ahead >= 5 && ahead <= 7)
            let (_, second) = try await session.httpData(from: server.url("/retry-after-date?seconds=5&times=1"))
            #expect(second.statusCode == 200)
        }
    }

    @Test func tooManyAnswers429WithRetryAfterZeroThen200() async throws {
        try await withServer { server, session in
            let (_, first) = try await session.httpData(from: server.url("/too-many?times=1"))
            #expect(first.statusCode == 429)
            #expect(first.value(forHTTPHeaderField: "Retry-After") == "0")
            let (_, second) = try await session.httpData(from: server.url("/too-many?times=1"))
            #expect(second.statusCode == 200)
        }
    }

    @Test func failThenOkAnswersTheStatusForTheFirstTimesThen200() async throws {
        try await withServer { server, session in
            var codes: [Int] = []
            for _ in 0..<3 {
                codes.append(
                    try await session.httpData(from: server.url("/fail-then-ok?status=502&times=2")).1.statusCode)
            }
            #expect(codes == [502, 502, 200])
            let (_, defaulted) = try await session.httpData(from: server.url("/fail-then-ok?times=1"))
            #expect(defaulted.statusCode == 500)
        }
    }

    @Test func malformedSendsBytesThatAreNotHTTPThenCloses() async throws {
        try await withServer { server, session in
            let port = server.port
            let (bytes, end) = try await offPool {
                let socket = try LoopbackSocket(port: port)
                defer { socket.close() }
                try socket.send("GET /malformed HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                return socket.readUntilClosed()
            }
            #expect(String(decoding: bytes, as: UTF8.self) == "HTTP/1.1 ???\r\nthis is not http\r\n\r\n")
            #expect(end == .eof)

            await #expect(throws: (any Error).self) {
                _ = try await session.httpData(from: server.url("/malformed"))
            }
        }
    }

    @Test func bigSendsTheRequestedBytesInThePattern() async throws {
        try await withServer { server, session in
            let (body, response) = try await session.httpData(from: server.url("/big?bytes=100000"))
            #expect(response.statusCode == 200)
            #expect(response.value(forHTTPHeaderField: "Content-Length") == "100000")
            #expect(byteDifference(body, FaultInjectingServer.bigBody(count: 100_000)) == nil)
        }
    }

    @Test func receivedListsEveryRequestInOrderWithItsQuery() async throws {
        try await withServer { server, session in
            _ = try await session.httpData(from: server.url("/ok?first"))
            _ = try await session.httpData(from: server.url("/status/500?x=1&y=2"))
            _ = try await session.httpData(from: server.url("/ok"))
            #expect(server.received.map(\.path) == ["/ok", "/status/500", "/ok"])
            #expect(server.received.map(\.query) == ["first", "x=1&y=2", nil])
            #expect(server.received(path: "/ok").count == 2)
        }
    }
}

// MARK: - Fixtures

/// Starts a server and an ephemeral URLSession with short timeouts, runs `body`, and tears both
/// down whether it threw or not.
private func withServer(
    _ body: (FaultInjectingServer, URLSession) async throws -> Void
) async throws {
    let server = try await FaultInjectingServer.start()
    let configuration = URLSessionConfiguration.ephemeral
    configuration.timeoutIntervalForRequest = 45 // past /slow-headers?ms=20000, inside the time limit
    configuration.timeoutIntervalForResource = 55
    let session = URLSession(configuration: configuration)
    do {
        try await body(server, session)
    } catch {
        session.invalidateAndCancel()
        try await server.shutdown()
        throw error
    }
    session.invalidateAndCancel()
    try await server.shutdown()
}

extension URLSession {
    fileprivate func httpData(from url: URL) async throws -> (Data, HTTPURLResponse) {
        try await httpData(for: URLRequest(url: url))
    }

    fileprivate func httpData(for request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let (data, response) = try await self.data(for: request, delegate: nil)
        return (data, try #require(response as? HTTPURLResponse))
    }
}

/// How a connection ended, as a blocking reader sees it.
private enum ConnectionEnd: Equatable {
    case eof
    case reset
    case timedOut
    case failed(Int32)
}

private struct SocketFailure: Error {
    var operation: String
    var errno: Int32
}

/// A blocking TCP client to 127.0.0.1 with 5-second send and receive timeouts.
private final class LoopbackSocket {
    private let fd: Int32

    init(port: Int) throws {
        fd = try Self.connected(port: port)
    }

    /// The errno of a connect to `port`, or 0 if it succeeded.
    static func connectError(host: String = "127.0.0.1", port: Int) throws -> Int32 {
        do {
            let fd = try connected(host: host, port: port)
            Glibc.close(fd)
            return 0
        } catch let failure as SocketFailure where failure.operation == "connect" {
            return failure.errno
        }
    }

    private static func connected(host: String = "127.0.0.1", port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw SocketFailure(operation: "socket", errno: errno) }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr(host)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard result == 0 else {
            let failure = SocketFailure(operation: "connect", errno: errno)
            Glibc.close(fd)
            throw failure
        }
        return fd
    }

    func send(_ text: String) throws {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let sent = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { throw SocketFailure(operation: "send", errno: errno) }
            bytes = bytes.dropFirst(sent)
        }
    }

    /// Reads whatever arrives until the peer closes, resets, or 5 s pass without a byte.
    func readUntilClosed() -> ([UInt8], ConnectionEnd) {
        var bytes: [UInt8] = []
        while true {
            switch readSome() {
            case .success(let chunk): bytes += chunk
            case .failure(let end): return (bytes, end)
            }
        }
    }

    /// Reads one response framed by Content-Length (enough for the server's keep-alive answers).
    func readResponse() throws -> (head: String, body: String) {
        var bytes: [UInt8] = []
        let separator = Array("\r\n\r\n".utf8)
        var headEnd: Int?
        while headEnd == nil {
            bytes += try readSome().get()
            headEnd = bytes.indices.first { bytes[$0...].starts(with: separator) }
        }
        let head = String(decoding: bytes[..<headEnd!], as: UTF8.self)
        let length =
            head.split(separator: "\r\n")
            .first { $0.lowercased().hasPrefix("content-length:") }
            .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
        let bodyStart = headEnd! + separator.count
        while bytes.count < bodyStart + length {
            bytes += try readSome().get()
        }
        return (head, String(decoding: bytes[bodyStart..<(bodyStart + length)], as: UTF8.self))
    }

    private func readSome() -> Result<[UInt8], ConnectionEnd> {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if count > 0 { return .success(Array(buffer[..<count])) }
        if count == 0 { return .failure(.eof) }
        switch errno {
        case ECONNRESET: return .failure(.reset)
        case EAGAIN, EWOULDBLOCK: return .failure(.timedOut)
        case let code: return .failure(.failed(code))
        }
    }

    func close() {
        Glibc.close(fd)
    }
}

extension ConnectionEnd: Error {}
