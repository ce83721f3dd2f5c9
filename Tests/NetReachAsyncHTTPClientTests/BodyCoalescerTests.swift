import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOHTTPCompression
import Testing

@testable import NetReachAsyncHTTPClient

/// The frames of one HTTP/2 read reach AsyncHTTPClient joined, whole and in order, and nothing
/// waits past the end of the read.
@Suite("BodyCoalescer")
struct BodyCoalescerTests {
    /// `count` parts of `size` bytes, each byte its index in the body (mod 251).
    static func parts(_ count: Int, size: Int, from start: Int = 0) -> [ByteBuffer] {
        (0..<count).map { index in
            ByteBuffer(bytes: (0..<size).map { UInt8((start + index * size + $0) % 251) })
        }
    }

    /// What the next handler got: the parts read so far.
    static func received(_ channel: EmbeddedChannel) throws -> [HTTPClientResponsePart] {
        var parts: [HTTPClientResponsePart] = []
        while let part = try channel.readInbound(as: HTTPClientResponsePart.self) { parts.append(part) }
        return parts
    }

    static func bodies(_ parts: [HTTPClientResponsePart]) -> [ByteBuffer] {
        parts.compactMap { if case .body(let body) = $0 { body } else { nil } }
    }

    @Test func theFramesOfOneReadArriveJoinedWholeAndInOrderAtItsEnd() throws {
        let channel = EmbeddedChannel(handler: BodyCoalescer())
        let head = HTTPResponseHead(version: .http2, status: .ok)
        try channel.writeInbound(HTTPClientResponsePart.head(head))
        // 100 frames of 8 KiB in one read: 800 KiB, in parts of at most 256 KiB.
        let frames = Self.parts(100, size: 8192)
        for frame in frames { channel.pipeline.fireChannelRead(HTTPClientResponsePart.body(frame)) }
        let beforeTheEnd = try Self.received(channel)
        #expect(beforeTheEnd.count == 1 + 3, "the head, then every full part: \(beforeTheEnd.count)")
        channel.pipeline.fireChannelReadComplete()
        let parts = beforeTheEnd + (try Self.received(channel))
        guard case .head = parts.first else {
            Issue.record("the head comes first")
            return
        }
        let bodies = Self.bodies(parts)
        #expect(
            bodies.map(\.readableBytes) == [BodyCoalescer.limit, BodyCoalescer.limit, BodyCoalescer.limit, 32 << 10])
        var joined = ByteBuffer()
        for var body in bodies { joined.writeBuffer(&body) }
        var expected = ByteBuffer()
        for var frame in frames { expected.writeBuffer(&frame) }
        #expect(joined == expected)
        _ = try channel.finish()
    }

    @Test func nothingWaitsPastTheEndOfARead() throws {
        let channel = EmbeddedChannel(handler: BodyCoalescer())
        let frames = Self.parts(2, size: 100)
        channel.pipeline.fireChannelRead(HTTPClientResponsePart.body(frames[0]))
        #expect(try Self.received(channel).isEmpty, "a part may still be joined until the read ends")
        channel.pipeline.fireChannelReadComplete()
        #expect(Self.bodies(try Self.received(channel)) == [frames[0]], "the read ended: the part is out")
        // The next read's part, then the end: the part goes first.
        channel.pipeline.fireChannelRead(HTTPClientResponsePart.body(frames[1]))
        channel.pipeline.fireChannelRead(HTTPClientResponsePart.end(nil))
        let parts = try Self.received(channel)
        #expect(parts.count == 2)
        #expect(Self.bodies(parts) == [frames[1]])
        guard case .end = parts.last else {
            Issue.record("the end comes last: \(parts)")
            return
        }
        _ = try channel.finish()
    }

    @Test func aPartOverTheLimitPassesAsItIsAndAClosedStreamLosesNothing() throws {
        let channel = EmbeddedChannel(handler: BodyCoalescer())
        let small = Self.parts(1, size: 10)[0]
        let large = Self.parts(1, size: BodyCoalescer.limit + 1, from: 10)[0]
        channel.pipeline.fireChannelRead(HTTPClientResponsePart.body(small))
        channel.pipeline.fireChannelRead(HTTPClientResponsePart.body(large))
        #expect(Self.bodies(try Self.received(channel)) == [small], "the large part cannot join the small one")
        // The stream closes before the read ends: the held part still goes, before the close.
        channel.pipeline.fireChannelInactive()
        #expect(Self.bodies(try Self.received(channel)) == [large])
        _ = try? channel.finish()
    }

    @Test func theStreamSetupGoesAfterTheDecompressorBeforeTheClientsHandlerAndOnlyThere() throws {
        let channel = EmbeddedChannel()
        let probe = ProbeHandler()
        try channel.pipeline.syncOperations.addHandler(NIOHTTPResponseDecompressor(limit: .none))
        try channel.pipeline.syncOperations.addHandler(probe)
        try BodyCoalescer.streamSetup()(channel).wait()
        // Two frames of one read reach the client's handler as one part.
        let frames = Self.parts(2, size: 1000)
        channel.pipeline.fireChannelRead(HTTPClientResponsePart.head(HTTPResponseHead(version: .http2, status: .ok)))
        for frame in frames { channel.pipeline.fireChannelRead(HTTPClientResponsePart.body(frame)) }
        channel.pipeline.fireChannelReadComplete()
        #expect(probe.bodySizes == [2000])
        _ = try channel.finish()

        let without = EmbeddedChannel()
        try BodyCoalescer.streamSetup()(without).wait()
        #expect(throws: (any Error).self) {
            try without.pipeline.syncOperations.context(handlerType: BodyCoalescer.self)
        }
        _ = try without.finish()
    }
}

/// Stands for AsyncHTTPClient's request handler, the last in a stream's pipeline.
private final class ProbeHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart
    private(set) var bodySizes: [Int] = []

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .body(let body) = unwrapInboundIn(data) { bodySizes.append(body.readableBytes) }
    }
}
