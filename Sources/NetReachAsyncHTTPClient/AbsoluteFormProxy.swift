import AsyncHTTPClient
import NIOCore
import NIOHTTP1

/// Plain `http://` through an http proxy the way curl sends it: the request goes to the proxy
/// with its target in absolute form (`GET http://example.com/path HTTP/1.1`), not through a
/// `CONNECT` tunnel, which stock proxies (tinyproxy's and squid's default configurations) allow
/// only to port 443.
///
/// AsyncHTTPClient tunnels every request through a proxy, so the transport sends such a request
/// to the proxy as if it were the server, with the target's `Host` and the proxy's credentials,
/// and names the target in a header of its own that ``Rewriter`` (installed on each connection)
/// turns into the absolute-form request line.
///
/// ```swift
/// let request = AbsoluteFormProxy.request(clientRequest, scheme: "http", hostPort: "example.com:8080", path: "/path", proxy: proxy)
/// ```
enum AbsoluteFormProxy {
    /// The header that carries the absolute URI from the request to ``Rewriter``; never sent.
    static let targetHeader = "x-netreach-absolute-uri"

    /// `request`, readdressed to `proxy`: the same method, headers and body, the URL's path on the
    /// proxy's authority, `Host` the target's (unless the request sets one), and
    /// `Proxy-Authorization` from the proxy's credentials.
    static func request(
        _ request: HTTPClientRequest, scheme: String, hostPort: String, path: String,
        proxy: HTTPClient.Configuration.Proxy
    ) -> HTTPClientRequest {
        var readdressed = request
        let proxyHost = proxy.host.contains(":") ? "[\(proxy.host)]" : proxy.host
        readdressed.url = "http://\(proxyHost):\(proxy.port)\(path)"
        if !readdressed.headers.contains(name: "host") { readdressed.headers.add(name: "Host", value: hostPort) }
        readdressed.headers.replaceOrAdd(name: targetHeader, value: "\(scheme)://\(hostPort)\(path)")
        if let authorization = proxy.authorization, !readdressed.headers.contains(name: "proxy-authorization") {
            readdressed.headers.add(name: "Proxy-Authorization", value: authorization.headerValue)
        }
        return readdressed
    }

    /// A connection initialiser that puts a ``Rewriter`` between AsyncHTTPClient's request
    /// handler and the HTTP/1 encoder.
    static func connectionSetup() -> @Sendable (Channel) -> EventLoopFuture<Void> {
        { channel in
            channel.eventLoop.submit {
                let encoder = try channel.pipeline.syncOperations.handler(type: HTTPRequestEncoder.self)
                try channel.pipeline.syncOperations.addHandler(Rewriter(), position: .after(encoder))
            }
        }
    }

    /// Writes each request head's URI in absolute form, from ``targetHeader``, and drops the header.
    final class Rewriter: ChannelOutboundHandler, RemovableChannelHandler {
        typealias OutboundIn = HTTPClientRequestPart
        typealias OutboundOut = HTTPClientRequestPart

        func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
            var part = unwrapOutboundIn(data)
            if case .head(var head) = part, let target = head.headers.first(name: AbsoluteFormProxy.targetHeader) {
                head.headers.remove(name: AbsoluteFormProxy.targetHeader)
                head.uri = target
                part = .head(head)
            }
            context.write(wrapOutboundOut(part), promise: promise)
        }
    }
}
