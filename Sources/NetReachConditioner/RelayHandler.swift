import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// One socket of a conditioned connection: hands what it reads (and its end: a FIN, or the socket
/// gone) to the connection, writes what the connection delivers, and holds the channel's reads
/// while the connection says so (backpressure). The channel allows half-closure: a FIN read
/// closes its input only, and the connection decides when the other side gets it.
final class RelayHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let side: ConditionedConnection.Side
    private let connection: ConditionedConnection
    private var context: ChannelHandlerContext?
    private var readHeld = false
    private var isClosed = false
    /// Its output is closed, or closing once what was written has left (a FIN passed on).
    private var outputClosed = false

    init(side: ConditionedConnection.Side, connection: ConditionedConnection) {
        self.side = side
        self.connection = connection
    }

    var isWritable: Bool { context.map { !isClosed && !outputClosed && $0.channel.isWritable } ?? false }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        connection.received(unwrapInboundIn(data), from: side)
    }

    func channelActive(context: ChannelHandlerContext) {
        // The upstream is connected only now: until then the client's bytes stay unread.
        if side == .server { connection.attach(server: self) }
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        isClosed = true
        connection.closed(side)
        context.fireChannelInactive()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        connection.writabilityChanged()
        context.fireChannelWritabilityChanged()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A reset or a failed write: the socket is done; channelInactive follows.
        context.close(promise: nil)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // The peer's FIN: its input is closed, its output stays open (allowRemoteHalfClosure).
        if case ChannelEvent.inputClosed = event { connection.inputClosed(side) }
        context.fireUserInboundEventTriggered(event)
    }

    func read(context: ChannelHandlerContext) {
        if connection.mayRead(side) {
            readHeld = false
            context.read()
        } else {
            readHeld = true
        }
    }

    /// Reads again if a read was held and the connection now allows it.
    func resumeReading() {
        guard readHeld, let context, connection.mayRead(side) else { return }
        readHeld = false
        context.read()
    }

    func write(_ buffer: ByteBuffer, flush: Bool = true) {
        guard let context, !isClosed, !outputClosed else { return }
        if flush {
            context.writeAndFlush(wrapOutboundOut(buffer), promise: nil)
        } else {
            context.write(wrapOutboundOut(buffer), promise: nil)
        }
    }

    func flush() { context?.flush() }

    /// Closes the socket once everything written to it has left, as a socket's close(2) sends what
    /// is in its buffer before the FIN (NIO's close fails the writes still pending).
    func close() {
        guard let context, !isClosed else { return }
        isClosed = true
        afterWrites(context) { context.close(promise: nil) }
    }

    /// Closes the socket at once: writes NIO still holds are dropped (a cut link, not a close).
    func closeNow() {
        guard let context, !isClosed else { return }
        isClosed = true
        context.close(promise: nil)
    }

    /// Closes the socket's output (a FIN) once everything written to it has left; its input stays
    /// open. NIO closes the whole channel if its input was closed already.
    func closeOutput() {
        guard let context, !isClosed, !outputClosed else { return }
        outputClosed = true
        afterWrites(context) { context.close(mode: .output, promise: nil) }
    }

    /// Runs `body` when the writes made so far have completed: an empty write queued behind them
    /// completes after them, in order.
    private func afterWrites(_ context: ChannelHandlerContext, _ body: @escaping () -> Void) {
        let written = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(wrapOutboundOut(ByteBuffer()), promise: written)
        written.futureResult.assumeIsolated().whenComplete { _ in body() }
    }

    /// Closes with a TCP RST (SO_LINGER 0), as toxiproxy's reset_peer does.
    func reset() {
        guard let context, !isClosed else { return }
        isClosed = true
        guard let options = context.channel as? any SocketOptionProvider else {
            context.close(promise: nil)
            return
        }
        options.setSoLinger(linger(l_onoff: 1, l_linger: 0)).assumeIsolated().whenComplete { _ in
            context.close(promise: nil)
        }
    }
}
