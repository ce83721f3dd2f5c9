import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

#if canImport(Glibc)
import Glibc
#endif

/// An in-process HTTP/1.1 server on 127.0.0.1 (or `::1`) that misbehaves on request, so transports and the
/// retry logic can be tested against real sockets: resets, early closes, slow answers, `Retry-After`,
/// garbage instead of HTTP.
///
/// The path picks the behaviour (query parameters in brackets):
///
/// | Path | Answer |
/// |---|---|
/// | `/ok` | 200, body `ok` |
/// | `/echo` | 200, body = request body, `x-echo-method: <method>` |
/// | `/status/NNN` | status NNN (200...599), body `status NNN` (none for 204 and 304) |
/// | `/reset-after-headers` | TCP RST as soon as the request head is read, nothing sent |
/// | `/reset-mid-body` | 200 head with `Content-Length: 1000`, 100 body bytes, then TCP RST |
/// | `/close-before-response` | reads the whole request, then closes cleanly (FIN), no response |
/// | `/slow-headers` [`ms`] | waits `ms` milliseconds (on the event loop), then 200 `ok` |
/// | `/retry-after` [`seconds`, `times`] | 503 with `Retry-After: <seconds>` for the first `times` requests, then 200 `ok` |
/// | `/retry-after-date` [`seconds`, `times`] | as `/retry-after`, with an IMF-fixdate `seconds` from now |
/// | `/too-many` [`times`] | 429 with `Retry-After: 0` for the first `times` requests, then 200 `ok` |
/// | `/fail-then-ok` [`status`, `times`] | `status` (default 500) for the first `times` requests, then 200 `ok` |
/// | `/malformed` | raw bytes `HTTP/1.1 ???\r\nthis is not http\r\n\r\n`, then close |
/// | `/big` [`bytes`] | 200 with `bytes` bytes of ``bigBody(count:)``, sent in 16 KiB chunks |
/// | `/redirect` [`to`, `status`] | `status` (default 302) with `Location: <to>` (raw) and body `redirect` |
/// | `/gzip-bomb` [`bytes`] | 200, `Content-Encoding: gzip`, a gzip stream of ``gzipBomb(decodedBytes:)`` (decodes to `bytes` zeros at about 1:160) |
/// | anything else | 404 |
///
/// `times` counts requests per path *and* query string, so two tests using different queries do
/// not share a counter; without `times` the failure answer never stops. Responses carry
/// `Content-Length` and keep the connection alive unless the client asked to close.
///
/// ```swift
/// let server = try await FaultInjectingServer.start()
/// defer { Task { try await server.shutdown() } }   // or call shutdown() at the end of the test
/// let (_, response) = try await session.data(from: server.url("/retry-after?seconds=1&times=1"))
/// #expect(server.received(path: "/retry-after").count == 1)
/// ```
package final class FaultInjectingServer: Sendable {
    /// The port the server listens on.
    package let port: Int
    /// The address it listens on: `127.0.0.1`, or `::1`.
    package let host: String

    private let group: MultiThreadedEventLoopGroup
    private let serverChannel: any Channel
    private let state: FaultServerState

    private init(
        group: MultiThreadedEventLoopGroup, serverChannel: any Channel, state: FaultServerState, port: Int, host: String
    ) {
        self.group = group
        self.serverChannel = serverChannel
        self.state = state
        self.port = port
        self.host = host
    }

    /// Binds `host` (127.0.0.1 by default; `::1` for IPv6) on an ephemeral port and starts serving.
    package static func start(host: String = "127.0.0.1") async throws -> FaultInjectingServer {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let state = FaultServerState()
        do {
            let channel = try await ServerBootstrap(group: group)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .serverChannelOption(.backlog, value: 64)
                .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
                .childChannelInitializer { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let pipeline = channel.pipeline.syncOperations
                        try pipeline.addHandler(HTTPResponseEncoder(), name: FaultHandler.encoderName)
                        try pipeline.addHandler(
                            ByteToMessageHandler(HTTPRequestDecoder(leftOverBytesStrategy: .dropBytes)))
                        try pipeline.addHandler(FaultHandler(state: state))
                    }
                }
                .bind(host: host, port: 0)
                .get()
            guard let port = channel.localAddress?.port else {
                try? await channel.close()
                throw FaultServerError.noLocalPort
            }
            return FaultInjectingServer(group: group, serverChannel: channel, state: state, port: port, host: host)
        } catch {
            try? await group.shutdownGracefully()
            throw error
        }
    }

    /// `http://127.0.0.1:<port><pathAndQuery>` (or `http://[::1]:...`); `pathAndQuery` starts with `/`.
    package func url(_ pathAndQuery: String) -> URL {
        URL(string: "http://\(authority)\(pathAndQuery)")!
    }

    /// `127.0.0.1:<port>`, or `[::1]:<port>`.
    package var authority: String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    /// Every request whose head was read, in arrival order, fault paths included. A request's body
    /// is filled in once it has been read completely; it stays empty if the fault hit first.
    package var received: [ReceivedRequest] {
        state.received
    }

    /// The requests to `path` (compared without the query string), in arrival order.
    package func received(path: String) -> [ReceivedRequest] {
        state.received.filter { $0.path == path }
    }

    /// Stops listening, closes every open connection and stops the server's thread. Calling it
    /// again does nothing.
    package func shutdown() async throws {
        guard state.beginShutdown() else { return }
        try? await serverChannel.close()
        // Shutting the group down closes the accepted connections and cancels pending delays.
        try await group.shutdownGracefully()
    }

    /// The body `/big?bytes=N` sends: byte `i` is `UInt8(i % 256)`.
    package static func bigBody(count: Int) -> Data {
        var body = Data(capacity: count)
        while body.count < count {
            body.append(contentsOf: bigBodyCycle.prefix(count - body.count))
        }
        return body
    }

    /// A gzip stream that decodes to `decodedBytes` zero bytes (rounded up to a whole number of
    /// 258-byte matches) from about 1/160 of that: one fixed-Huffman deflate block of a literal 0 and
    /// then back-references of 258 bytes at distance 1, 13 bits each. Up to 8 MiB the trailer is
    /// right (CRC-32 and size), so the stream decodes cleanly; past that its CRC is left zero, as
    /// computing it would take seconds: a client with a limit stops long before it.
    package static func gzipBomb(decodedBytes: Int) -> Data {
        let matches = max(0, (decodedBytes - 1 + 257) / 258)
        let decoded = 1 + matches * 258
        // Header bits, the literal and the first 5 bits of the first match fill 2 bytes; from
        // there on 8 matches (104 bits) are exactly the same 13 bytes, repeated. Written bit by
        // bit in a debug build, the millions of matches would take seconds of CPU.
        var start = BitWriter()
        start.write(1, count: 1) // BFINAL
        start.write(1, count: 2) // BTYPE 01: fixed Huffman codes
        start.write(0x0C, count: 8) // literal 0: code 00110000, most significant bit first
        for _ in 0..<9 { start.write(Self.match, count: 13) }
        let periods = max(0, matches - 1) / 8
        var bytes = Array(start.bytes[0..<2])
        bytes.reserveCapacity(2 + periods * 13 + 16)
        let period = start.bytes[2..<15]
        for _ in 0..<periods { bytes.append(contentsOf: period) }
        // The rest: the last 8 bits of the match begun, the remaining matches, end of block.
        var end = BitWriter()
        if matches > 0 {
            end.write(Self.match >> 5, count: 8)
            for _ in 0..<(matches - 1 - periods * 8) { end.write(Self.match, count: 13) }
        } else {
            bytes = Array(start.bytes[0..<1])
            end.write(UInt64(start.bytes[1]) & 0b111, count: 3)
        }
        end.write(0, count: 7) // end of block (symbol 256)
        end.flush()
        bytes.append(contentsOf: end.bytes)
        var data = Data([0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 0, 3])
        data.append(contentsOf: bytes)
        let crc = decoded <= 8 << 20 ? crc32OfZeros(count: decoded) : 0
        let size = UInt32(truncatingIfNeeded: decoded)
        for value in [crc, size] {
            data.append(contentsOf: [
                UInt8(value & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value >> 16 & 0xFF), UInt8(value >> 24),
            ])
        }
        return data
    }

    /// A 258-byte match at distance 1 in fixed Huffman codes, 13 bits, already in stream order:
    /// length code 11000101 (symbol 285) reversed, then distance code 00000.
    private static let match: UInt64 = 0xA3

    /// CRC-32 (gzip's, reflected 0xEDB88320) of `count` zero bytes.
    private static func crc32OfZeros(count: Int) -> UInt32 {
        let table: [UInt32] = (0..<256).map { index in
            var value = UInt32(index)
            for _ in 0..<8 { value = value & 1 == 1 ? 0xEDB8_8320 ^ (value >> 1) : value >> 1 }
            return value
        }
        var crc: UInt32 = 0xFFFF_FFFF
        for _ in 0..<count { crc = table[Int(crc & 0xFF)] ^ (crc >> 8) }
        return ~crc
    }

    /// Deflate's bit order: fields least significant bit first (Huffman codes are written here
    /// already reversed). Bits gather in a word and leave a byte at a time: the bomb has millions.
    private struct BitWriter {
        package var bytes: [UInt8] = []
        private var word: UInt64 = 0
        private var count = 0

        package mutating func write(_ value: UInt64, count bits: Int) {
            word |= value << UInt64(count)
            count += bits
            while count >= 8 {
                bytes.append(UInt8(truncatingIfNeeded: word))
                word >>= 8
                count -= 8
            }
        }

        package mutating func flush() {
            if count > 0 { bytes.append(UInt8(truncatingIfNeeded: word)) }
            word = 0
            count = 0
        }
    }

    /// One period of ``bigBody(count:)``; appended whole, because building a megabyte a byte at a
    /// time took seconds in a debug build.
    package static let bigBodyCycle: [UInt8] = (0..<256).map { UInt8($0) }
}

/// One request as the server read it.
package struct ReceivedRequest: Sendable, Equatable {
    /// "GET", "POST", ...
    package var method: String
    /// The request target's path, without the query.
    package var path: String
    /// The raw query string (after `?`), or `nil` if the target had no `?`.
    package var query: String?
    /// Header fields with lowercased names; when a name repeats, the last value wins.
    package var headers: [String: String]
    /// The whole body read; empty if the fault hit before the body was read.
    package var body: Data
    /// The value of the `Idempotency-Key` header, if any.
    package var idempotencyKey: String?
}

package enum FaultServerError: Error {
    case noLocalPort
}

/// What the connections share: the request log and the per path+query counters. A lock TSan
/// understands (NSLock), because these tests also run under ThreadSanitizer.
private final class FaultServerState: @unchecked Sendable {
    private let lock = NSLock()
    private var requests: [ReceivedRequest] = []
    private var counters: [String: Int] = [:]
    private var isShutDown = false

    package var received: [ReceivedRequest] {
        lock.withLock { requests }
    }

    /// Logs a request whose head was read; returns its index for ``setBody(_:at:)``.
    package func record(_ request: ReceivedRequest) -> Int {
        lock.withLock {
            requests.append(request)
            return requests.count - 1
        }
    }

    package func setBody(_ body: Data, at index: Int) {
        lock.withLock { requests[index].body = body }
    }

    /// Counts one more request for `key` and returns how many came before it.
    package func nextAttempt(for key: String) -> Int {
        lock.withLock {
            let previous = counters[key, default: 0]
            counters[key] = previous + 1
            return previous
        }
    }

    /// `true` the first time only.
    package func beginShutdown() -> Bool {
        lock.withLock {
            defer { isShutDown = true }
            return !isShutDown
        }
    }
}

/// One per connection; runs on the server's event loop only.
private final class FaultHandler: ChannelInboundHandler {
    package typealias InboundIn = HTTPServerRequestPart
    package typealias OutboundOut = HTTPServerResponsePart

    package static let encoderName = "fault-server-encoder"

    private let state: FaultServerState
    private var head: HTTPRequestHead?
    private var recordIndex: Int?
    private var body = ByteBuffer()
    /// Set once a fault has closed (or is about to close) the connection: later parts are ignored.
    private var finished = false

    package init(state: FaultServerState) {
        self.state = state
    }

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !finished else { return }
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body.clear()
            let (path, query) = Self.split(head.uri)
            var headers: [String: String] = [:]
            for (name, value) in head.headers {
                headers[name.lowercased()] = value
            }
            recordIndex = state.record(
                ReceivedRequest(
                    method: head.method.rawValue,
                    path: path,
                    query: query,
                    headers: headers,
                    body: Data(),
                    idempotencyKey: headers["idempotency-key"]
                ))
            if path == "/reset-after-headers" {
                reset(context: context)
                return
            }
            if head.headers[canonicalForm: "expect"].contains(where: { $0.lowercased() == "100-continue" }) {
                context.writeAndFlush(
                    wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: .continue))), promise: nil)
            }
        case .body(var chunk):
            body.writeBuffer(&chunk)
        case .end:
            guard let head else { return }
            self.head = nil
            if let recordIndex {
                state.setBody(Data(body.readableBytesView), at: recordIndex)
            }
            let requestBody = body
            body = ByteBuffer()
            respond(to: head, body: requestBody, context: context)
        }
    }

    package func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A client that breaks the protocol or vanishes just loses its connection.
        finished = true
        context.close(promise: nil)
    }

    // MARK: - Behaviours

    private func respond(to head: HTTPRequestHead, body: ByteBuffer, context: ChannelHandlerContext) {
        let (path, query) = Self.split(head.uri)
        let parameters = Self.parameters(query)
        let attemptKey = head.uri
        func failing() -> Bool {
            let attempt = state.nextAttempt(for: attemptKey)
            guard let times = parameters["times"].flatMap(Int.init) else { return true }
            return attempt < times
        }

        switch path {
        case "/ok":
            send(.ok, body: "ok", to: head, context: context)
        case "/echo":
            send(.ok, body: body, extraHeaders: [("x-echo-method", head.method.rawValue)], to: head, context: context)
        case "/reset-mid-body":
            resetMidBody(head: head, context: context)
        case "/close-before-response":
            finished = true
            context.close(promise: nil)
        case "/slow-headers":
            let delay = parameters["ms"].flatMap(Int64.init) ?? 0
            context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(delay)) {
                self.send(.ok, body: "ok", to: head, context: context)
            }
        case "/retry-after":
            if failing() {
                let seconds = parameters["seconds"] ?? "1"
                send(
                    .serviceUnavailable, body: "retry after \(seconds)", extraHeaders: [("retry-after", seconds)],
                    to: head, context: context)
            } else {
                send(.ok, body: "ok", to: head, context: context)
            }
        case "/retry-after-date":
            if failing() {
                let seconds = parameters["seconds"].flatMap(Int.init) ?? 1
                let date = Self.imfFixdate(secondsFromNow: seconds)
                send(
                    .serviceUnavailable, body: "retry after \(date)", extraHeaders: [("retry-after", date)], to: head,
                    context: context)
            } else {
                send(.ok, body: "ok", to: head, context: context)
            }
        case "/too-many":
            if failing() {
                send(
                    .tooManyRequests, body: "too many requests", extraHeaders: [("retry-after", "0")], to: head,
                    context: context)
            } else {
                send(.ok, body: "ok", to: head, context: context)
            }
        case "/fail-then-ok":
            if failing() {
                let code = parameters["status"].flatMap(Int.init) ?? 500
                send(HTTPResponseStatus(statusCode: code), body: "status \(code)", to: head, context: context)
            } else {
                send(.ok, body: "ok", to: head, context: context)
            }
        case "/malformed":
            sendMalformed(context: context)
        case "/ranged":
            // `bytes` of the big body, honouring `Range: bytes=N-` (unless `ranges=no`) guarded by
            // `If-Range` against `etag` (none when `etag=none`); the first `times` attempts close
            // the connection after `failAt` bytes of the response body.
            sendRanged(head: head, parameters: parameters, failing: failing(), context: context)
        case "/drip":
            // `count` lines, one every `ms`; after `stallAfter` lines, nothing more (the
            // connection stays open), so a client must time the stall itself.
            drip(
                line: 0, count: parameters["count"].flatMap(Int.init) ?? 5,
                every: .milliseconds(parameters["ms"].flatMap(Int64.init) ?? 100),
                stallAfter: parameters["stallAfter"].flatMap(Int.init), to: head, context: context)
        case "/big":
            sendBig(count: parameters["bytes"].flatMap(Int.init) ?? 0, to: head, context: context)
        case "/redirect":
            let code = parameters["status"].flatMap(Int.init) ?? 302
            let location = (parameters["to"] ?? "/ok").removingPercentEncoding ?? "/ok"
            send(
                HTTPResponseStatus(statusCode: code), body: "redirect", extraHeaders: [("location", location)],
                to: head, context: context)
        case "/gzip-bomb":
            let bomb = FaultInjectingServer.gzipBomb(decodedBytes: parameters["bytes"].flatMap(Int.init) ?? (1 << 30))
            send(
                .ok, body: ByteBuffer(bytes: bomb),
                extraHeaders: [("content-encoding", "gzip"), ("content-type", "application/octet-stream")],
                to: head, context: context)
        default:
            if path.hasPrefix("/status/"), let code = Int(path.dropFirst("/status/".count)), (200...599).contains(code)
            {
                let bodiless = code == 204 || code == 304
                send(
                    HTTPResponseStatus(statusCode: code), body: bodiless ? nil : "status \(code)", to: head,
                    context: context)
            } else {
                send(.notFound, body: "not found", to: head, context: context)
            }
        }
    }

    private func send(
        _ status: HTTPResponseStatus,
        body text: String?,
        extraHeaders: [(String, String)] = [],
        to request: HTTPRequestHead,
        context: ChannelHandlerContext
    ) {
        send(
            status, body: text.map { ByteBuffer(string: $0) }, extraHeaders: extraHeaders, to: request, context: context
        )
    }

    private func send(
        _ status: HTTPResponseStatus,
        body: ByteBuffer?,
        extraHeaders: [(String, String)] = [],
        to request: HTTPRequestHead,
        context: ChannelHandlerContext
    ) {
        var headers = HTTPHeaders(extraHeaders)
        if let body {
            headers.add(name: "content-length", value: String(body.readableBytes))
        }
        let keepAlive = request.isKeepAlive
        if !keepAlive {
            headers.add(name: "connection", value: "close")
        }
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: request.version, status: status, headers: headers))),
            promise: nil)
        if let body, body.readableBytes > 0 {
            context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        }
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive {
            finished = true
            done.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        }
    }

    /// Promises 1000 bytes, sends 100, then resets: a response that breaks off mid-body.
    private func resetMidBody(head: HTTPRequestHead, context: ChannelHandlerContext) {
        finished = true
        let headers = HTTPHeaders([("content-length", "1000")])
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: .ok, headers: headers))), promise: nil
        )
        let sent = context.writeAndFlush(
            wrapOutboundOut(.body(.byteBuffer(ByteBuffer(repeating: UInt8(ascii: "x"), count: 100)))))
        sent.assumeIsolated().whenComplete { _ in
            // Give the client a moment to read the 100 bytes, so it sees them before the reset.
            context.eventLoop.assumeIsolated().scheduleTask(in: .milliseconds(20)) {
                self.reset(context: context)
            }
        }
    }

    /// SO_LINGER {on, 0} then close: the kernel sends RST instead of FIN.
    private func reset(context: ChannelHandlerContext) {
        finished = true
        if let provider = context.channel as? any SocketOptionProvider {
            // On the channel's own event loop this sets the option at once.
            _ = provider.setSoLinger(linger(l_onoff: 1, l_linger: 0))
        }
        context.close(promise: nil)
    }

    /// Writes bytes that are not an HTTP response, bypassing the encoder, then closes.
    private func sendMalformed(context: ChannelHandlerContext) {
        finished = true
        let raw = ByteBuffer(string: "HTTP/1.1 ???\r\nthis is not http\r\n\r\n")
        // Writing through the encoder's context sends the bytes to the handlers before it (the
        // socket), skipping the encoder, which only accepts response parts.
        guard let encoderContext = try? context.pipeline.syncOperations.context(name: Self.encoderName) else {
            context.close(promise: nil)
            return
        }
        encoderContext.writeAndFlush(NIOAny(raw)).assumeIsolated().whenComplete { _ in
            context.close(promise: nil)
        }
    }

    private func sendRanged(
        head: HTTPRequestHead, parameters: [String: String], failing: Bool, context: ChannelHandlerContext
    ) {
        let count = parameters["bytes"].flatMap(Int.init) ?? 0
        let etag = parameters["etag"] ?? "\"v1\""
        var start = 0
        if parameters["ranges"] != "no", let range = head.headers.first(name: "range"), range.hasPrefix("bytes="),
            range.hasSuffix("-"),
            let from = Int(range.dropFirst("bytes=".count).dropLast())
        {
            let ifRange = head.headers.first(name: "if-range")
            if ifRange == nil || (etag != "none" && ifRange == etag) { start = from }
        }
        if start >= count && start > 0 {
            let headers = HTTPHeaders([("content-range", "bytes */\(count)"), ("content-length", "0")])
            context.write(
                wrapOutboundOut(
                    .head(HTTPResponseHead(version: head.version, status: .rangeNotSatisfiable, headers: headers))),
                promise: nil)
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            return
        }
        var headers = HTTPHeaders([("content-length", String(count - start)), ("accept-ranges", "bytes")])
        if etag != "none" { headers.add(name: "etag", value: etag) }
        if start > 0 { headers.add(name: "content-range", value: "bytes \(start)-\(count - 1)/\(count)") }
        let status: HTTPResponseStatus = start > 0 ? .partialContent : .ok
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: status, headers: headers))),
            promise: nil)
        let body = FaultInjectingServer.bigBody(count: count)
        let failAt = failing ? parameters["failAt"].flatMap(Int.init) : nil
        let end = failAt.map { min(count, start + $0) } ?? count
        var chunk = context.channel.allocator.buffer(capacity: end - start)
        chunk.writeBytes(body[start..<end])
        let sent = context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(chunk))))
        if failAt != nil {
            // A close (FIN), not a reset: a reset would drop bytes still unread on the client side,
            // and the test needs to know how many arrived.
            sent.assumeIsolated().whenComplete { _ in
                self.finished = true
                context.close(promise: nil)
            }
        } else {
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        }
    }

    /// Sends line `line` of `count` ("line N\n", chunked), the head with the first, then the next
    /// after `every`; stops sending (without closing) after `stallAfter` lines.
    private func drip(
        line: Int, count: Int, every: TimeAmount, stallAfter: Int?, to request: HTTPRequestHead,
        context: ChannelHandlerContext
    ) {
        if line == 0 {
            let head = HTTPResponseHead(
                version: request.version, status: .ok, headers: ["transfer-encoding": "chunked"])
            context.writeAndFlush(wrapOutboundOut(.head(head)), promise: nil)
        }
        if let stallAfter, line >= stallAfter { return }
        guard line < count else {
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            return
        }
        context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: "line \(line)\n")))), promise: nil)
        context.eventLoop.assumeIsolated().scheduleTask(in: every) {
            self.drip(line: line + 1, count: count, every: every, stallAfter: stallAfter, to: request, context: context)
        }
    }

    /// `count` bytes of ``FaultInjectingServer/bigBody(count:)`` in 16 KiB chunks, flushed one by one,
    /// so a client's progress callback fires more than once.
    private func sendBig(count: Int, to request: HTTPRequestHead, context: ChannelHandlerContext) {
        var headers = HTTPHeaders([("content-length", String(count))])
        let keepAlive = request.isKeepAlive
        if !keepAlive {
            headers.add(name: "connection", value: "close")
        }
        context.writeAndFlush(
            wrapOutboundOut(.head(HTTPResponseHead(version: request.version, status: .ok, headers: headers))),
            promise: nil)
        let chunkSize = 16 * 1024
        var offset = 0
        while offset < count {
            let end = min(offset + chunkSize, count)
            // Chunks start at multiples of 256, so each is whole cycles of the pattern.
            var chunk = context.channel.allocator.buffer(capacity: end - offset)
            while chunk.readableBytes < end - offset {
                chunk.writeBytes(FaultInjectingServer.bigBodyCycle.prefix(end - offset - chunk.readableBytes))
            }
            context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(chunk))), promise: nil)
            offset = end
        }
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive {
            finished = true
            done.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
        }
    }

    // MARK: - Parsing

    /// Splits a request target into path and raw query (`nil` when there is no `?`).
    private static func split(_ uri: String) -> (path: String, query: String?) {
        guard let mark = uri.firstIndex(of: "?") else { return (uri, nil) }
        return (String(uri[..<mark]), String(uri[uri.index(after: mark)...]))
    }

    /// `a=1&b=2` → ["a": "1", "b": "2"]; values are used raw (the tests only pass numbers).
    private static func parameters(_ query: String?) -> [String: String] {
        var result: [String: String] = [:]
        for pair in (query ?? "").split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            result[String(parts[0])] = parts.count > 1 ? String(parts[1]) : ""
        }
        return result
    }

    /// An IMF-fixdate (RFC 9110 §5.6.7), e.g. `Sun, 06 Nov 1994 08:49:37 GMT`, `seconds` after now
    /// rounded up to the next whole second, so the delay it names is never shorter than asked.
    package static func imfFixdate(secondsFromNow seconds: Int) -> String {
        let target = (Date().timeIntervalSince1970 + Double(seconds)).rounded(.up)
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter.string(from: Date(timeIntervalSince1970: target))
    }
}
