import Foundation
import HTTPTypes
import NetReachAsyncHTTPClient
import NetReachHTTP
import NetReachTestSupport
import NetReachURLSession
import OpenAPIRuntime
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The transports NetReach ships; every conformance test runs against each.
enum TransportKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case urlSession
    case asyncHTTPClient

    func make() -> any HTTPTransport {
        switch self {
        case .urlSession: URLSessionTransport()
        case .asyncHTTPClient: AsyncHTTPClientTransport()
        }
    }

    var testDescription: String { rawValue }
}

/// What `HTTPTransport` promises, checked against real sockets on 127.0.0.1: requests arrive
/// intact, statuses are not judged, and every failure is classified on the safe side (a request
/// that may have reached the server is never reported as provably unsent).
@Suite("Transport conformance", .offPool, .timeLimit(.minutes(1)))
struct TransportConformanceTests {
    // MARK: Requests and responses

    @Test("GET returns the status and the whole body", arguments: TransportKind.allCases)
    func getReturnsStatusAndBody(kind: TransportKind) async throws {
        try await withServer { server in
            let (response, body) = try await send(kind, .get, server, "/ok")
            #expect(response.status.code == 200)
            #expect(String(decoding: body, as: UTF8.self) == "ok")
            #expect(server.received(path: "/ok").count == 1)
        }
    }

    @Test("POST delivers method, headers, query and body intact", arguments: TransportKind.allCases)
    func postDeliversRequestIntact(kind: TransportKind) async throws {
        try await withServer { server in
            let payload = Data(#"{"name":"ünïcode","n":1}"#.utf8)
            let (response, body) = try await send(
                kind, .post, server, "/echo?a=1&b=two",
                headers: [
                    .contentType: "application/json",
                    HTTPField.Name("Idempotency-Key")!: "key-123",
                    HTTPField.Name("X-Custom")!: "value",
                ],
                body: payload
            )
            #expect(response.status.code == 200)
            #expect(response.headerFields[HTTPField.Name("x-echo-method")!] == "POST")
            #expect(body == payload)
            let received = try #require(server.received(path: "/echo").first)
            #expect(received.method == "POST")
            #expect(received.query == "a=1&b=two")
            #expect(received.headers["content-type"] == "application/json")
            #expect(received.headers["x-custom"] == "value")
            #expect(received.idempotencyKey == "key-123")
            #expect(received.body == payload)
            #expect(server.received(path: "/echo").count == 1)
        }
    }

    @Test("A 503 is a response, not an error", arguments: TransportKind.allCases)
    func errorStatusesAreResponses(kind: TransportKind) async throws {
        try await withServer { server in
            let (response, body) = try await send(kind, .get, server, "/status/503")
            #expect(response.status.code == 503)
            #expect(String(decoding: body, as: UTF8.self) == "status 503")
        }
    }

    @Test("A large body arrives whole, in several chunks", arguments: TransportKind.allCases)
    func bigBodyStreams(kind: TransportKind) async throws {
        try await withServer { server in
            let transport = kind.make()
            let request = makeRequest(.get, authority: "127.0.0.1:\(server.port)", path: "/big?bytes=1000000")
            let (response, body) = try await transport.send(
                request, body: nil, options: TransportOptions(stallTimeout: .seconds(10)))
            #expect(response.status.code == 200)
            #expect(body.length == .known(1_000_000))
            var data = Data()
            var chunks = 0
            for try await chunk in body {
                data.append(contentsOf: chunk)
                chunks += 1
            }
            #expect(byteDifference(data, FaultInjectingServer.bigBody(count: 1_000_000)) == nil)
            #expect(chunks > 1, "a 1 MB body sent in 16 KiB flushes arrived as one chunk")
        }
    }

    // MARK: Streaming and timing

    @Test("Each chunk is handed over as it arrives, not at the end", arguments: TransportKind.allCases)
    func chunksArriveAsSent(kind: TransportKind) async throws {
        try await withServer { server in
            let transport = kind.make()
            try await warmUp(kind, server)
            // The server sends the head and one line, then nothing more with the connection open:
            // that line can only reach us if the transport hands over what has arrived. (A
            // transport that waits for the end gets there only by its stall timeout, an error.)
            // No clock decides: a slow machine delays the line, it cannot fail the test.
            let request = makeRequest(
                .get, authority: "127.0.0.1:\(server.port)", path: "/drip?count=3&ms=10&stallAfter=1")
            let (_, body) = try await transport.send(
                request, body: nil, options: TransportOptions(stallTimeout: .seconds(60)))
            var iterator = body.makeAsyncIterator()
            let first = try await iterator.next()
            #expect(first.map { String(decoding: $0, as: UTF8.self) } == "line 0\n")
        }
    }

    @Test("A body that keeps flowing is never cut by the stall timeout", arguments: TransportKind.allCases)
    func flowingBodyOutlivesStallTimeout(kind: TransportKind) async throws {
        try await withServer { server in
            try await warmUp(kind, server)
            // 30 lines 200 ms apart take 6 s, twice the stall timeout; every gap is a fifteenth of it.
            let request = makeRequest(.get, authority: "127.0.0.1:\(server.port)", path: "/drip?count=30&ms=200")
            let clock = ContinuousClock()
            let start = clock.now
            let (_, body) = try await kind.make().send(
                request, body: nil, options: TransportOptions(stallTimeout: .seconds(3)))
            let data = try await Data(collecting: body, upTo: 1 << 20)
            #expect(String(decoding: data, as: UTF8.self).hasSuffix("line 29\n"))
            #expect(clock.now - start >= .milliseconds(5800))
        }
    }

    @Test("A body that stops flowing times out, after the bytes that came", arguments: TransportKind.allCases)
    func stalledBodyTimesOut(kind: TransportKind) async throws {
        try await withServer { server in
            try await warmUp(kind, server)
            let request = makeRequest(
                .get, authority: "127.0.0.1:\(server.port)", path: "/drip?count=10&ms=50&stallAfter=2")
            let (_, body) = try await kind.make().send(
                request, body: nil, options: TransportOptions(stallTimeout: .seconds(5)))
            var text = ""
            do {
                for try await chunk in body { text += String(decoding: chunk, as: UTF8.self) }
                Issue.record("the body ended although the server stalled: \(text)")
                return
            } catch let error as TransportError {
                #expect(error.kind == .timedOut, "\(error)")
                #expect(!error.requestWasProvablyNotSent)
            }
            #expect(text == "line 0\nline 1\n")
        }
    }

    @Test("The deadline bounds a body that keeps flowing", arguments: TransportKind.allCases)
    func deadlineBoundsFlowingBody(kind: TransportKind) async throws {
        try await withServer { server in
            try await warmUp(kind, server)
            // 1,000 lines 100 ms apart would flow for 100 s; the deadline is 1.5 s in.
            let request = makeRequest(.get, authority: "127.0.0.1:\(server.port)", path: "/drip?count=1000&ms=100")
            let clock = ContinuousClock()
            let start = clock.now
            let options = TransportOptions(stallTimeout: .seconds(60), deadline: start + .milliseconds(1500))
            // From `send` on a loaded machine, or (normally) from the body: timed out either way.
            let error = await #expect(throws: TransportError.self) {
                let (_, body) = try await kind.make().send(request, body: nil, options: options)
                _ = try await Data(collecting: body, upTo: 1 << 20)
            }
            #expect(error?.kind == .timedOut, "\(String(describing: error))")
            let elapsed = clock.now - start
            #expect(elapsed >= .milliseconds(1400) && elapsed < .seconds(30), "stopped after \(elapsed)")
        }
    }

    @Test("A slow reader is not a stalled network", arguments: TransportKind.allCases)
    func slowReaderIsBackpressure(kind: TransportKind) async throws {
        try await withServer { server in
            // 64 MB offered; the reader takes one chunk, then waits 10 s, twice the stall timeout:
            // a transfer held for its reader (AsyncHTTPClient) or buffered for it (URLSession) is not
            // a stalled network, and the rest still arrives whole. (A 2 s timeout failed once on a
            // loaded CI run after the reader resumed: 5 s leaves room for a busy machine.)
            let request = makeRequest(.get, authority: "127.0.0.1:\(server.port)", path: "/big?bytes=\(64 << 20)")
            let (_, body) = try await kind.make().send(
                request, body: nil, options: TransportOptions(stallTimeout: .seconds(5)))
            var iterator = body.makeAsyncIterator()
            var total = try #require(try await iterator.next()).count
            try await Task.sleep(for: .seconds(10))
            while let chunk = try await iterator.next() { total += chunk.count }
            #expect(total == 64 << 20)
        }
    }

    // MARK: Failures the request may have survived on the server

    @Test("A reset after the request head is connection lost, and was sent once", arguments: TransportKind.allCases)
    func resetAfterHeaders(kind: TransportKind) async throws {
        try await withServer { server in
            let error = try await expectTransportError(kind, .get, server, "/reset-after-headers")
            #expect(!error.requestWasProvablyNotSent, "\(error)")
            #expect([.connectionLost, .invalidResponse].contains(error.kind), "\(error)")
            #expect(server.received(path: "/reset-after-headers").count == 1)
        }
    }

    @Test("A reset in the middle of the body is connection lost", arguments: TransportKind.allCases)
    func resetMidBody(kind: TransportKind) async throws {
        try await withServer { server in
            let error = try await expectTransportError(kind, .get, server, "/reset-mid-body")
            #expect(error.kind == .connectionLost, "\(error)")
            #expect(server.received(path: "/reset-mid-body").count == 1)
        }
    }

    @Test("A close without a reply is not provably unsent", arguments: TransportKind.allCases)
    func closeBeforeResponse(kind: TransportKind) async throws {
        try await withServer { server in
            let error = try await expectTransportError(
                kind, .post, server, "/close-before-response", body: Data("x".utf8))
            #expect(!error.requestWasProvablyNotSent, "\(error)")
            #expect([.connectionLost, .invalidResponse].contains(error.kind), "\(error)")
            #expect(server.received(path: "/close-before-response").count == 1)
        }
    }

    @Test("Garbage instead of HTTP is an invalid response or a lost connection", arguments: TransportKind.allCases)
    func malformedResponse(kind: TransportKind) async throws {
        try await withServer { server in
            let error = try await expectTransportError(kind, .get, server, "/malformed")
            #expect(!error.requestWasProvablyNotSent, "\(error)")
            #expect([.invalidResponse, .connectionLost].contains(error.kind), "\(error)")
        }
    }

    @Test("Slow headers time out at the requested timeout", arguments: TransportKind.allCases)
    func slowHeadersTimeOut(kind: TransportKind) async throws {
        // The server answers after 30 s, so a timed-out error at all proves the 300 ms timeout
        // fired; the upper bound is a fraction of that, wide enough for a loaded TSan run.
        try await withServer { server in
            let clock = ContinuousClock()
            let start = clock.now
            let error = try await expectTransportError(
                kind, .get, server, "/slow-headers?ms=30000",
                options: TransportOptions(stallTimeout: .milliseconds(300)))
            let elapsed = clock.now - start
            #expect(error.kind == .timedOut, "\(error)")
            #expect(!error.requestWasProvablyNotSent)
            #expect(elapsed >= .milliseconds(250), "gave up before the timeout: \(elapsed)")
            #expect(elapsed < .seconds(10), "took \(elapsed) with a 300 ms timeout")
        }
    }

    // MARK: Failures that provably left nothing on the server

    @Test("Nothing listening is cannot connect, provably unsent", arguments: TransportKind.allCases)
    func nothingListening(kind: TransportKind) async throws {
        let closed = try ClosedLoopbackPort()
        let port = closed.port
        defer { withExtendedLifetime(closed) {} }
        // Fails on the refusal, not by the timeout: the error's kind tells (a timeout would be
        // timedOut), so no clock is needed, and the timeout is far beyond the suite's time limit.
        let options = TransportOptions(stallTimeout: .seconds(3600))
        let error = try await expectTransportError(kind, authority: "127.0.0.1:\(port)", options: options)
        #expect(error.kind == .cannotConnect, "\(error)")
        #expect(error.requestWasProvablyNotSent)
    }

    @Test("Nothing listening behind a host name is cannot connect too", arguments: TransportKind.allCases)
    func nothingListeningByName(kind: TransportKind) async throws {
        // "localhost" goes through name resolution (and NIO's Happy Eyeballs), not an IP literal.
        let closed = try ClosedLoopbackPort()
        let port = closed.port
        defer { withExtendedLifetime(closed) {} }
        let error = try await expectTransportError(kind, authority: "localhost:\(port)")
        #expect(error.kind == .cannotConnect, "\(error)")
        #expect(error.requestWasProvablyNotSent)
    }

    @Test("A scheme the transport cannot send is an invalid request", arguments: TransportKind.allCases)
    func unsupportedScheme(kind: TransportKind) async throws {
        let error = try await expectTransportError(kind, scheme: "gopher", authority: "127.0.0.1:1")
        #expect(error.kind == .invalidRequest, "\(error)")
        #expect(error.requestWasProvablyNotSent)
    }

    // MARK: Cancellation

    @Test("Cancelling the task stops the request promptly", arguments: TransportKind.allCases)
    func cancellation(kind: TransportKind) async throws {
        try await withServer { server in
            let transport = kind.make()
            // The answer would come after 600 s and the timeout after an hour: stopping well
            // before either can only be the cancellation.
            let request = makeRequest(.get, authority: "127.0.0.1:\(server.port)", path: "/slow-headers?ms=600000")
            let clock = ContinuousClock()
            let start = clock.now
            let task = Task {
                try await transport.send(request, body: nil, options: TransportOptions(stallTimeout: .seconds(3600)))
            }
            try await Task.sleep(for: .milliseconds(100))
            task.cancel()
            let result = await bounded(.seconds(45)) { await task.result }
            let elapsed = clock.now - start
            guard case .failure(let error as TransportError) = result else {
                Issue.record("expected a TransportError, got \(String(describing: result))")
                return
            }
            #expect(error.kind == .cancelled, "\(error)")
            #expect(elapsed < .seconds(30), "cancellation took \(elapsed)")
        }
    }
}

// MARK: - Helpers

private func makeRequest(
    _ method: HTTPRequest.Method,
    scheme: String = "http",
    authority: String,
    path: String,
    headers: HTTPFields = [:]
) -> HTTPRequest {
    HTTPRequest(method: method, scheme: scheme, authority: authority, path: path, headerFields: headers)
}

private func send(
    _ kind: TransportKind,
    _ method: HTTPRequest.Method,
    _ server: FaultInjectingServer,
    _ path: String,
    headers: HTTPFields = [:],
    body: Data? = nil,
    options: TransportOptions = TransportOptions(stallTimeout: .seconds(10))
) async throws -> (HTTPResponse, Data) {
    let transport = kind.make()
    let request = makeRequest(method, authority: "127.0.0.1:\(server.port)", path: path, headers: headers)
    let result = await bounded(.seconds(20)) {
        await sendCapturingResult(transport, request, body: body, options: options)
    }
    return try #require(result).get()
}

/// One request first, so a timing test does not count what a transport's first use costs (a
/// client, TLS trust roots, threads), which on a loaded CI machine took over a second.
private func warmUp(_ kind: TransportKind, _ server: FaultInjectingServer) async throws {
    _ = try await send(kind, .get, server, "/ok")
}

/// Sends and expects a ``TransportError``; records an issue (and throws) on a response.
private func expectTransportError(
    _ kind: TransportKind,
    _ method: HTTPRequest.Method = .get,
    _ server: FaultInjectingServer? = nil,
    _ path: String = "/",
    scheme: String = "http",
    authority: String? = nil,
    body: Data? = nil,
    options: TransportOptions = TransportOptions(stallTimeout: .seconds(10))
) async throws -> TransportError {
    let transport = kind.make()
    let authority = try #require(authority ?? server.map { "127.0.0.1:\($0.port)" })
    let request = makeRequest(method, scheme: scheme, authority: authority, path: path)
    let result = await bounded(.seconds(20)) {
        await sendCapturingResult(transport, request, body: body, options: options)
    }
    switch try #require(result, "the transport did not finish within 20 s") {
    case .success(let (response, _)):
        Issue.record("expected a TransportError, got \(response.status)")
        throw UnexpectedResponse()
    case .failure(let error):
        return error
    }
}

private struct UnexpectedResponse: Error {}

private func sendCapturingResult(
    _ transport: any HTTPTransport,
    _ request: HTTPRequest,
    body: Data?,
    options: TransportOptions
) async -> Result<(HTTPResponse, Data), TransportError> {
    do {
        let (response, responseBody) = try await transport.send(
            request, body: body.map { HTTPBody($0) }, options: options)
        return .success((response, try await Data(collecting: responseBody, upTo: 64 << 20)))
    } catch let error as TransportError {
        return .failure(error)
    } catch {
        return .failure(TransportError(.other, "not a TransportError: \(error)"))
    }
}

/// Runs `operation`, returning `nil` if it has not finished after `limit` (it is then cancelled).
private func bounded<T: Sendable>(_ limit: Duration, _ operation: @escaping @Sendable () async -> T) async -> T? {
    await withTaskGroup(of: T?.self) { group in
        group.addTask { await operation() }
        group.addTask {
            try? await Task.sleep(for: limit)
            return nil
        }
        let first = await group.next() ?? nil
        group.cancelAll()
        return first
    }
}

/// Starts a server, runs `body`, and shuts the server down whatever happens.
func withServer(_ body: (FaultInjectingServer) async throws -> Void) async throws {
    let server = try await FaultInjectingServer.start()
    do {
        try await body(server)
    } catch {
        try await server.shutdown()
        throw error
    }
    try await server.shutdown()
}

/// A port on 127.0.0.1 (and ::1, where `localhost` also leads) that refuses connections for as
/// long as this value lives: sockets are bound to it and never listen. (Closing the probe socket
/// at once, as this used to, freed the port for the next server another test started, and the
/// "refused" request got that server's answer.)
final class ClosedLoopbackPort: Sendable {
    let port: Int
    private let descriptors: [Int32]

    init() throws {
        for _ in 0..<100 {
            let v4 = try Self.bind(AF_INET, port: 0)
            // The same port on ::1, unless IPv6 is off here; taken there already: try another.
            guard let v6 = try? Self.bind(AF_INET6, port: v4.port) else {
                if Self.hasIPv6Loopback {
                    close(v4.fd)
                    continue
                }
                descriptors = [v4.fd]
                port = v4.port
                return
            }
            descriptors = [v4.fd, v6.fd]
            port = v4.port
            return
        }
        throw SocketSetupFailure(call: "bind")
    }

    deinit { descriptors.forEach { close($0) } }

    private static var hasIPv6Loopback: Bool {
        (try? String(contentsOfFile: "/proc/net/if_inet6", encoding: .utf8))?.contains(
            "00000000000000000000000000000001") == true
    }

    private static func bind(_ family: Int32, port: Int) throws -> (fd: Int32, port: Int) {
        let fd = socket(family, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw SocketSetupFailure(call: "socket") }
        var storage = sockaddr_storage()
        var length: socklen_t
        if family == AF_INET {
            length = socklen_t(MemoryLayout<sockaddr_in>.size)
            withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                    $0.pointee.sin_family = sa_family_t(AF_INET)
                    $0.pointee.sin_port = in_port_t(UInt16(port).bigEndian)
                    $0.pointee.sin_addr.s_addr = inet_addr("127.0.0.1")
                }
            }
        } else {
            length = socklen_t(MemoryLayout<sockaddr_in6>.size)
            withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                    $0.pointee.sin6_family = sa_family_t(AF_INET6)
                    $0.pointee.sin6_port = in_port_t(UInt16(port).bigEndian)
                    $0.pointee.sin6_addr = in6addr_loopback
                }
            }
        }
        let bound = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, length) }
        }
        let named =
            bound == 0
            ? withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
            } : -1
        guard named == 0 else {
            close(fd)
            throw SocketSetupFailure(call: bound == 0 ? "getsockname" : "bind")
        }
        let boundPort = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
        }
        return (fd, boundPort)
    }
}

struct SocketSetupFailure: Error {
    var call: String
}
