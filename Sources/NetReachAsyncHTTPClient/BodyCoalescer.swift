import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOHTTPCompression

/// Joins the response body parts an HTTP/2 stream delivers in one read into parts of up to
/// ``limit`` bytes, before AsyncHTTPClient's request handler sees them.
///
/// An HTTP/2 stream channel keeps the DATA frames (8 or 16 KiB each) that arrive while the body's
/// reader has no demand, up to AsyncHTTPClient's 8 MiB stream window, and hands them all over when
/// the reader asks again. AsyncHTTPClient 1.37's request state machine appends each part to a
/// buffer that it copies whole on every append, so a read of n frames costs n²/2 part copies
/// (perf of a 1 GiB HTTP/2 download: a quarter of the event loop's time). Hundreds of frames
/// become tens of parts here, and every per-part cost after this handler (the body sequence, the
/// file's writes) shrinks with them.
///
/// Nothing is held past the end of a read (`channelReadComplete`), nor past anything that is not
/// a body part: each byte reaches the reader in the same read as it would have without this
/// handler, in order.
final class BodyCoalescer: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias InboundOut = HTTPClientResponsePart

    /// The largest part made by joining (a single larger part passes as it is).
    static let limit = 256 << 10

    private var pending: ByteBuffer?
    /// Whether `pending` is a buffer of this handler's own (so appending to it copies nothing else).
    private var ownsPending = false

    /// An `http2StreamChannelDebugInitializer` that puts a coalescer right after the stream's
    /// HTTP/2-to-HTTP/1 codec, where the response becomes HTTP/1 parts (after a decompressor
    /// instead, should a client have AsyncHTTPClient's own; this module's clients have none).
    static func streamSetup() -> @Sendable (Channel) -> EventLoopFuture<Void> {
        { channel in
            let pipeline = channel.pipeline.syncOperations
            if let decompressor = try? pipeline.handler(type: NIOHTTPResponseDecompressor.self) {
                try? pipeline.addHandler(BodyCoalescer(), position: .after(decompressor))
            } else if let codec = try? pipeline.handler(type: HTTP2FramePayloadToHTTP1ClientCodec.self) {
                try? pipeline.addHandler(BodyCoalescer(), position: .after(codec))
            }
            return channel.eventLoop.makeSucceededVoidFuture()
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .body(var body) = unwrapInboundIn(data) else {
            flush(context)
            context.fireChannelRead(data)
            return
        }
        guard var joined = pending else {
            pending = body
            ownsPending = false
            return
        }
        guard joined.readableBytes + body.readableBytes <= Self.limit else {
            flush(context)
            pending = body
            return
        }
        pending = nil // `joined` is then the only reference, and appends in place
        if !ownsPending {
            var own = context.channel.allocator.buffer(capacity: Self.limit)
            own.writeBuffer(&joined)
            joined = own
            ownsPending = true
        }
        joined.writeBuffer(&body)
        pending = joined
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        flush(context)
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        flush(context)
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        flush(context)
        context.fireErrorCaught(error)
    }

    func channelInactive(context: ChannelHandlerContext) {
        flush(context)
        context.fireChannelInactive()
    }

    private func flush(_ context: ChannelHandlerContext) {
        guard let joined = pending else { return }
        pending = nil
        ownsPending = false
        context.fireChannelRead(wrapInboundOut(.body(joined)))
    }
}
