import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes

/// Answers a request whose header block is larger than SwiftNIO's parser takes (80 KiB) with
/// `431 Request Header Fields Too Large` and closes the connection; Hummingbird would say only
/// `400`, which does not tell the client what to shorten.
///
/// A handler after Hummingbird's HTTP/1 codec (`HTTP1Channel.Configuration.additionalChannelHandlers`):
/// the parser's error reaches it before the server's own answer.
final class HeaderLimit: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundOut = HTTPResponsePart

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard let error = error as? HTTPParserError, error == .headerOverflow else {
            context.fireErrorCaught(error)
            return
        }
        let body = ByteBuffer(string: "the request's header fields are too large\n")
        let head = HTTPResponse(
            status: .init(code: 431, reasonPhrase: "Request Header Fields Too Large"),
            headerFields: [
                .connection: "close", .contentType: "text/plain; charset=utf-8",
                .contentLength: "\(body.readableBytes)",
            ])
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(body)), promise: nil)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
    }
}
