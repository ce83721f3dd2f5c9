import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// The server side: `200 OK`, body `ok`, keep-alive, for every request, on 127.0.0.1. It runs as a
/// process of its own (`HTTPOverhead --serve`), so its CPU is not in the client's process.
enum LoopbackServer {
    /// Binds 127.0.0.1 on an ephemeral port, prints the port on stdout, then serves until stdin
    /// reaches end of file (the client exited, however it exited) or `lifetimeSeconds` have passed.
    static func serve(lifetimeSeconds: Int) async throws -> Never {
        // One event-loop thread: the machine has two cores and the client needs the other.
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelOption(.backlog, value: 256)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(SmallResponder())
                }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        guard let port = channel.localAddress?.port else { fail("server: no local port") }
        FileHandle.standardOutput.write(Data("\(port)\n".utf8))   // unbuffered: the client is waiting for it

        DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(lifetimeSeconds)) {
            fail("server: lifetime of \(lifetimeSeconds) s reached", status: 3)
        }
        // `availableData` blocks until there is input or end of file; the client never writes.
        while !FileHandle.standardInput.availableData.isEmpty {}
        exit(0)
    }
}

/// One per connection, on the server's event loop: answers each complete request.
private final class SmallResponder: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private static let headers: HTTPHeaders = ["content-length": "2", "content-type": "text/plain"]
    private let body = ByteBuffer(string: "ok")
    private var keepAlive = true

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            keepAlive = head.isKeepAlive
        case .body:
            break
        case .end:
            var headers = Self.headers
            if !keepAlive { headers.add(name: "connection", value: "close") }
            context.write(wrapOutboundOut(.head(HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
            let written = context.writeAndFlush(wrapOutboundOut(.end(nil)))
            if !keepAlive {
                written.assumeIsolated().whenComplete { _ in context.close(promise: nil) }
            }
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
