import HTTPTypes
import NIOCore
import NIOHTTPTypes
import NetReachSystem

/// The connections of one server: at most ``capacity``, the idlest closed to admit a new one
/// (``ConnectionTable``), and the idle and header timeouts each connection's ``ConnectionGuard``
/// keeps.
package final class ConnectionGate: Sendable {
    package let capacity: Int
    /// A connection with no request under way is closed after this long.
    package let idleTimeout: Duration
    /// A request's header must be complete this long after its first byte.
    package let headerTimeout: Duration
    private let table: Locked<ConnectionTable<any Channel>>

    package init(capacity: Int, idleTimeout: Duration, headerTimeout: Duration) {
        self.capacity = max(1, capacity)
        self.idleTimeout = idleTimeout
        self.headerTimeout = headerTimeout
        table = Locked(ConnectionTable(capacity: capacity))
    }

    /// How many connections are held.
    package var count: Int { table.withLock { $0.count } }

    /// The default capacity for a process allowed `fileLimit` descriptors: 1,000, as many
    /// exporters allow, or fewer when the limit would not leave 128 for everything else
    /// (netlink sockets, namespaces, probes, the listener).
    package static func defaultCapacity(fileLimit: UInt64?) -> Int {
        guard let fileLimit else { return 1_000 }
        return Int(max(16, min(1_000, fileLimit.saturatingSubtract(128))))
    }

    /// Admits `channel`, closing the connection idle longest if the table is full; `nil`: refused.
    func admit(_ channel: any Channel) -> UInt64? {
        switch table.withLock({ $0.admit(channel) }) {
        case .admitted(let id, let evicted):
            evicted?.close(promise: nil)
            return id
        case .refused:
            return nil
        }
    }

    func setIdle(_ id: UInt64, _ idle: Bool) { table.withLock { $0.setIdle(id, idle) } }

    func remove(_ id: UInt64) { table.withLock { $0.remove(id) } }
}

extension UInt64 {
    fileprivate func saturatingSubtract(_ other: UInt64) -> UInt64 { self > other ? self - other : 0 }
}

/// One connection's clock, apart from its I/O: whether a request is under way, whether its
/// response is an event stream, and until when the connection may stay as it is.
///
/// With no request under way the connection is idle until the first byte of the next request
/// arrives (deadline: ``ConnectionGate/idleTimeout`` after the last response), then reading that
/// request's header (deadline: ``ConnectionGate/headerTimeout`` after its first byte, however
/// slowly the rest comes: the slowloris bound). While a request is under way there is no
/// deadline: the responder has its own (a probe's is the scrape's timeout).
package struct ConnectionTimeline {
    package let idleTimeout: TimeAmount
    package let headerTimeout: TimeAmount
    /// Requests whose header was read and whose response has not ended (more than one when
    /// pipelined).
    package private(set) var requestsUnderWay = 0
    /// Whether the response being written is an event stream.
    package private(set) var isStreaming = false
    /// When the connection last became idle.
    private var idleSince: NIODeadline
    /// When the first byte after it became idle arrived.
    private var headerBegan: NIODeadline?

    package init(idleTimeout: TimeAmount, headerTimeout: TimeAmount, now: NIODeadline) {
        self.idleTimeout = idleTimeout
        self.headerTimeout = headerTimeout
        idleSince = now
    }

    /// Whether the connection may be closed to admit another: no request under way.
    package var isIdle: Bool { requestsUnderWay == 0 }

    /// When the connection is to be closed unless something happens first; `nil`: never.
    package var deadline: NIODeadline? {
        guard isIdle else { return nil }
        if let headerBegan { return headerBegan + headerTimeout }
        return idleSince + idleTimeout
    }

    /// Bytes arrived from the client.
    package mutating func bytesArrived(now: NIODeadline) {
        if isIdle, headerBegan == nil { headerBegan = now }
    }

    /// A request's header was read.
    package mutating func requestBegan() {
        requestsUnderWay += 1
        headerBegan = nil
    }

    /// A response's header was written; `eventStream` when it is `text/event-stream`.
    package mutating func responseBegan(eventStream: Bool) {
        isStreaming = eventStream
    }

    /// A response ended.
    package mutating func responseEnded(now: NIODeadline) {
        // Not below 0: an answer to a request that never parsed (400, 431) ends no request.
        requestsUnderWay = max(0, requestsUnderWay - 1)
        isStreaming = false
        if isIdle {
            idleSince = now
            headerBegan = nil
        }
    }

    /// The client closed its side: an event stream is over (a browser's `EventSource` never
    /// half-closes, it goes); anything else is left to the HTTP server, which answers and closes.
    package var closesOnInputClosed: Bool { isStreaming }
}

/// Keeps one connection to ``ConnectionGate``'s rules: admitted or refused (503) as it opens,
/// closed at its idle or header deadline, closed as soon as the client of an event stream goes.
///
/// After Hummingbird's HTTP codec (`additionalChannelHandlers`), where requests and responses are
/// parts; it puts a small handler of its own first in the pipeline to hear of raw bytes, which
/// the header deadline starts from (the codec says nothing until the header is complete).
///
/// Why the event stream needs it: Hummingbird allows half-closure, so a client that goes is only
/// an `inputClosed` event, which nothing in the response's writer hears; the writer learned of it
/// when a write failed, at the next keep-alive comment (15 s), and until then the client stayed
/// in the hub. Closing the channel here ends the stream's subscription (the responder ends it
/// when the channel closes).
final class ConnectionGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let gate: ConnectionGate
    private var timeline: ConnectionTimeline
    private var id: UInt64?
    private var isAdmissionDone = false
    /// Refused: whatever the client sends is dropped while the 503 goes out.
    private var isRefused = false
    /// This handler's context, for the timer and for the bytes ``BytesArrived`` hears of.
    private var context: ChannelHandlerContext?
    private var timer: Scheduled<Void>?
    private var timerDeadline: NIODeadline?

    init(gate: ConnectionGate) {
        self.gate = gate
        timeline = ConnectionTimeline(
            idleTimeout: Self.amount(gate.idleTimeout), headerTimeout: Self.amount(gate.headerTimeout), now: .now())
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        try? context.pipeline.syncOperations.addHandler(BytesArrived(self), position: .first)
        if context.channel.isActive { admit(context: context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        release()
        self.context = nil
    }

    func channelActive(context: ChannelHandlerContext) {
        admit(context: context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        release()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !isRefused else { return }
        if case .head = unwrapInboundIn(data) {
            let wasIdle = timeline.isIdle
            timeline.requestBegan()
            if wasIdle, let id { gate.setIdle(id, false) }
            reschedule(context: context)
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .head(let response):
            timeline.responseBegan(eventStream: response.headerFields[.contentType] == "text/event-stream")
        case .body:
            break
        case .end:
            timeline.responseEnded(now: .now())
            if timeline.isIdle, let id { gate.setIdle(id, true) }
            reschedule(context: context)
        }
        context.write(data, promise: promise)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed, timeline.closesOnInputClosed {
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// Told by ``BytesArrived``, on the same event loop.
    fileprivate func bytesArrived() {
        guard timeline.isIdle, let context else { return }
        timeline.bytesArrived(now: .now())
        reschedule(context: context)
    }

    private func admit(context: ChannelHandlerContext) {
        guard !isAdmissionDone else { return }
        isAdmissionDone = true
        guard let id = gate.admit(context.channel) else {
            isRefused = true
            // Every held connection is under way: this one is told so and closed at once, so the
            // file descriptors and the event loops stay with those within the cap.
            let body = ByteBuffer(string: "serve holds \(gate.capacity) connections, all busy; try again\n")
            let head = HTTPResponse(
                status: .serviceUnavailable,
                headerFields: [
                    .connection: "close", .contentType: "text/plain; charset=utf-8",
                    .contentLength: "\(body.readableBytes)", .retryAfter: "1",
                ])
            context.write(wrapOutboundOut(.head(head)), promise: nil)
            context.write(wrapOutboundOut(.body(body)), promise: nil)
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
            return
        }
        self.id = id
        reschedule(context: context)
    }

    private func release() {
        timer?.cancel()
        timer = nil
        if let id { gate.remove(id) }
        id = nil
    }

    /// One timer at the timeline's deadline; moved only when the deadline moves.
    private func reschedule(context: ChannelHandlerContext) {
        guard id != nil else { return }
        let deadline = timeline.deadline
        guard deadline != timerDeadline else { return }
        timer?.cancel()
        timer = nil
        timerDeadline = deadline
        guard let deadline else { return }
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(deadline: deadline) {
            let (handler, context) = loopBound.value
            handler.timerFired(context: context)
        }
    }

    private func timerFired(context: ChannelHandlerContext) {
        timer = nil
        timerDeadline = nil
        guard let deadline = timeline.deadline else { return }
        if deadline <= .now() {
            context.close(promise: nil)
        } else {
            reschedule(context: context)
        }
    }

    private static func amount(_ duration: Duration) -> TimeAmount {
        let (seconds, attoseconds) = duration.components
        return .nanoseconds(min(seconds, 86_400 * 365) * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}

/// First in the pipeline: tells its ``ConnectionGuard`` that bytes arrived, before the HTTP codec
/// holds them back until a header is complete.
private final class BytesArrived: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    private let owner: ConnectionGuard

    init(_ owner: ConnectionGuard) { self.owner = owner }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        owner.bytesArrived()
        context.fireChannelRead(data)
    }
}
