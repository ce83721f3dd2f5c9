import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// One socket of a conditioned connection: hands what it reads to the connection, writes what the
/// connection delivers, and holds the channel's reads while the connection says so (backpressure).
final class RelayHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    private let side: ConditionedConnection.Side
    private let connection: ConditionedConnection
    private var context: ChannelHandlerContext?
    private var readHeld = false
    private var isClosed = false

    init(side: ConditionedConnection.Side, connection: ConditionedConnection) {
        self.side = side
        self.connection = connection
    }

    var isWritable: Bool { context.map { !isClosed && $0.channel.isWritable } ?? false }

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
        if case ChannelEvent.inputClosed = event { context.close(promise: nil) }
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
        guard let context, !isClosed else { return }
        if flush {
            context.writeAndFlush(wrapOutboundOut(buffer), promise: nil)
        } else {
            context.write(wrapOutboundOut(buffer), promise: nil)
        }
    }

    func flush() { context?.flush() }

    func close() {
        guard let context, !isClosed else { return }
        isClosed = true
        context.close(promise: nil)
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
