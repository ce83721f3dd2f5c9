import NIOCore
import NIOHTTP1
import NIOPosix

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One control connection: gathers each request's body (up to 64 KiB), answers it from
/// ``ControlRoutes``, one request at a time.
final class ControlHTTPHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let routes: ControlRoutes
    private var head: HTTPRequestHead?
    private var body = Data()
    private var tooLarge = false

    init(routes: ControlRoutes) { self.routes = routes }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body = Data()
            tooLarge = false
        case .body(var chunk):
            if body.count + chunk.readableBytes > ControlRoutes.maximumBody {
                tooLarge = true
            } else if let bytes = chunk.readBytes(length: chunk.readableBytes) {
                body.append(contentsOf: bytes)
            }
        case .end:
            guard let head else { return }
            self.head = nil
            let keepAlive = head.isKeepAlive && !tooLarge
            if tooLarge {
                write(
                    .error(.payloadTooLarge, "a request body is at most 64 KiB"), head: head, keepAlive: false,
                    context: context)
                return
            }
            let routes = routes
            let body = body
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            context.eventLoop.makeFutureWithTask {
                await routes.respond(method: head.method, uri: head.uri, body: body)
            }.whenSuccess { response in
                let (handler, context) = bound.value
                handler.write(response, head: head, keepAlive: keepAlive, context: context)
            }
        }
    }

    /// Bytes that are not HTTP: NIO's error handler before this one has answered 400; the
    /// connection ends here (it would otherwise stay open, waiting for nothing).
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    private func write(
        _ response: ControlResponse, head: HTTPRequestHead, keepAlive: Bool, context: ChannelHandlerContext
    ) {
        var headers = HTTPHeaders()
        if !response.body.isEmpty { headers.add(name: "Content-Type", value: "application/json") }
        headers.add(name: "Content-Length", value: "\(response.body.count)")
        if let allow = response.allow { headers.add(name: "Allow", value: allow) }
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        context.write(
            wrapOutboundOut(.head(HTTPResponseHead(version: head.version, status: response.status, headers: headers))),
            promise: nil)
        if !response.body.isEmpty {
            context.write(
                wrapOutboundOut(.body(.byteBuffer(context.channel.allocator.buffer(bytes: response.body)))),
                promise: nil)
        }
        let done = context.writeAndFlush(wrapOutboundOut(.end(nil)))
        if !keepAlive {
            let channel = context.channel
            done.whenComplete { _ in channel.close(promise: nil) }
        }
    }
}
