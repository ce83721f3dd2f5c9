import Foundation
import NIOCore
import NetReachTestSupport
import Testing

@testable import NetReachAsyncHTTPClient

/// gzip and deflate decoded in pieces of at most 64 KiB whatever the ratio, against Python's zlib
/// (gzip, zlib and raw deflate of the same text) and a gzip bomb.
@Suite("ContentDecoder", .offPool)
struct ContentDecoderTests {
    /// 300 KB of text that compresses like text, not like zeros.
    static let text: [UInt8] = {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        let words = ["path", "route", "satisfied", "veth0", "gateway", "ipv6", "dns", "expensive", "\n"]
        var bytes: [UInt8] = []
        while bytes.count < 300_000 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            bytes += Array(words[Int(state >> 33) % words.count].utf8) + [UInt8(ascii: " ")]
        }
        return bytes
    }()

    /// `data` (`text` by default) encoded by Python's zlib as `format` says: gzip, zlib, raw, or
    /// two gzip members.
    static func encoded(_ format: String, of data: [UInt8] = text) throws -> [UInt8] {
        let directory = try TemporaryDirectory("netreach-decoder")
        defer { directory.remove() }
        let input = directory.path("text")
        try Data(data).write(to: URL(fileURLWithPath: input))
        let script = """
            import sys, zlib, gzip
            data = open(sys.argv[1], "rb").read()
            fmt = sys.argv[2]
            def deflate(wbits):
                c = zlib.compressobj(6, zlib.DEFLATED, wbits)
                return c.compress(data) + c.flush()
            out = {"gzip": lambda: gzip.compress(data),
                   "zlib": lambda: deflate(15),
                   "raw": lambda: deflate(-15),
                   "members": lambda: gzip.compress(data[:1000]) + gzip.compress(data[1000:])}[fmt]()
            sys.stdout.buffer.write(out)
            """
        let python = try ChildProcess.runBlocking("/usr/bin/python3", ["-c", script, input, format])
        try #require(python.status == 0, "\(python.standardError)")
        return Array(python.output)
    }

    /// Feeds `encoded` in reads of `readSize` and collects the pieces.
    static func decode(
        _ encoded: [UInt8], coding: String, readSize: Int = 16 << 10, limit: Int64 = 1 << 30
    ) throws -> (bytes: [UInt8], largestPiece: Int) {
        let decoder = try #require(try ContentDecoder.make(contentEncoding: coding, limit: limit))
        var bytes: [UInt8] = []
        var largest = 0
        var offset = 0
        while offset < encoded.count {
            let read = encoded[offset..<min(offset + readSize, encoded.count)]
            decoder.feed(ByteBuffer(bytes: read))
            offset += read.count
            while let piece = try decoder.nextPiece() {
                largest = max(largest, piece.readableBytes)
                bytes += piece.readableBytesView
            }
        }
        try decoder.finish()
        return (bytes, largest)
    }

    @Test(arguments: [
        ("gzip", "gzip"), ("x-gzip", "gzip"), ("deflate", "zlib"), ("deflate", "raw"), ("gzip", "members"),
    ])
    func decodesWhatZlibEncoded(coding: String, format: String) throws {
        let (bytes, _) = try Self.decode(try Self.encoded(format), coding: coding)
        #expect(bytes == Self.text)
    }

    @Test func oneByteAtATimeGivesTheSameBytes() throws {
        let (bytes, _) = try Self.decode(try Self.encoded("gzip"), coding: "gzip", readSize: 1)
        #expect(bytes == Self.text)
    }

    @Test func aBombIsDecodedInBoundedPieces() throws {
        // 4 MiB of zeros in about 26 KB, fed as one read: AsyncHTTPClient's decompressor made one
        // 4 MiB buffer of it. (Up to 8 MiB the bomb's trailer is right, so it decodes cleanly.)
        let bomb = Array(FaultInjectingServer.gzipBomb(decodedBytes: 4 << 20))
        let (bytes, largest) = try Self.decode(bomb, coding: "gzip", readSize: bomb.count)
        #expect(bytes.count >= 4 << 20 && bytes.allSatisfy { $0 == 0 })
        #expect(largest == ContentDecoder.pieceSize)
    }

    @Test func pastTheLimitItStopsWithinAPiece() throws {
        let bomb = Array(FaultInjectingServer.gzipBomb(decodedBytes: 64 << 20))
        let decoder = try #require(try ContentDecoder.make(contentEncoding: "gzip", limit: 1 << 20))
        decoder.feed(ByteBuffer(bytes: bomb))
        var handed = 0
        #expect(throws: ContentDecoder.Failure.tooLarge(limit: 1 << 20)) {
            while let piece = try decoder.nextPiece() { handed += piece.readableBytes }
        }
        #expect(handed <= 1 << 20)
        #expect(decoder.decoded <= (1 << 20) + Int64(ContentDecoder.pieceSize))
    }

    @Test func aStreamCutShortIsTruncated() throws {
        let encoded = try Self.encoded("gzip")
        let decoder = try #require(try ContentDecoder.make(contentEncoding: "gzip", limit: 1 << 30))
        decoder.feed(ByteBuffer(bytes: encoded.prefix(encoded.count / 2)))
        while try decoder.nextPiece() != nil {}
        #expect(throws: ContentDecoder.Failure.truncated) { try decoder.finish() }
    }

    @Test func garbageIsInvalid() throws {
        let decoder = try #require(try ContentDecoder.make(contentEncoding: "gzip", limit: 1 << 30))
        decoder.feed(ByteBuffer(bytes: Array("<html>not gzip at all</html>".utf8)))
        #expect {
            while try decoder.nextPiece() != nil {}
        } throws: { error in
            guard case .invalid(let reason) = error as? ContentDecoder.Failure else { return false }
            return !reason.isEmpty
        }
    }

    @Test func aCorruptChecksumIsInvalid() throws {
        var encoded = try Self.encoded("gzip")
        encoded[encoded.count - 6] ^= 0xFF // inside the CRC-32 of the trailer
        #expect(throws: ContentDecoder.Failure.self) { _ = try Self.decode(encoded, coding: "gzip") }
    }

    @Test func anEmptyBodyIsWholeHoweverItIsCoded() throws {
        let decoder = try #require(try ContentDecoder.make(contentEncoding: "gzip", limit: 1 << 30))
        #expect(try decoder.nextPiece() == nil)
        try decoder.finish()
    }

    @Test(arguments: [nil, "identity", "", " identity , "])
    func noCodingPassesAsItCame(coding: String?) throws {
        #expect(try ContentDecoder.make(contentEncoding: coding, limit: 1 << 30) == nil)
    }

    @Test(arguments: [
        ("br", "br"), ("zstd", "zstd"), ("gzip, br", "br"), ("compress", "compress"), ("x-snappy", "x-snappy"),
    ])
    func anotherCodingIsRefusedNotPassedOn(coding: String, named: String) {
        #expect(throws: ContentDecoder.Failure.unsupported(named)) {
            _ = try ContentDecoder.make(contentEncoding: coding, limit: 1 << 30)
        }
    }

    @Test func moreThanFiveCodingsAreRefusedAsCurlRefusesThem() throws {
        #expect(try ContentDecoder.make(contentEncoding: "gzip, gzip, gzip, gzip, gzip", limit: 1 << 30) != nil)
        #expect(throws: ContentDecoder.Failure.tooManyCodings(6)) {
            _ = try ContentDecoder.make(contentEncoding: "gzip, gzip, gzip, gzip, gzip, deflate", limit: 1 << 30)
        }
    }

    @Test(arguments: ["gzip, gzip", "gzip,gzip", "deflate, gzip", "gzip, identity, gzip"])
    func stackedCodingsAreUndoneLastFirst(coding: String) throws {
        // Encoded in the order listed (identity does nothing), by Python's zlib.
        var encoded = Self.text
        for name in coding.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) {
            if name == "identity" { continue }
            encoded = try Self.encoded(name == "gzip" ? "gzip" : "zlib", of: encoded)
        }
        for readSize in [1, 7, 16 << 10] {
            let (bytes, largest) = try Self.decode(encoded, coding: coding, readSize: readSize)
            #expect(bytes == Self.text, "\(coding) in reads of \(readSize)")
            #expect(largest <= ContentDecoder.pieceSize)
        }
    }

    @Test func aMemberBoundaryAtAReadBoundaryLosesNoMember() throws {
        let first = try Self.encoded("gzip", of: Array(Self.text[..<1000]))
        let second = try Self.encoded("gzip", of: Array(Self.text[1000...]))
        let decoder = try #require(try ContentDecoder.make(contentEncoding: "gzip", limit: 1 << 30))
        var bytes: [UInt8] = []
        // The first member alone, then one byte of the second, then the rest.
        for read in [first[...], second[..<1], second[1...]] {
            decoder.feed(ByteBuffer(bytes: read))
            while let piece = try decoder.nextPiece() { bytes += piece.readableBytesView }
        }
        try decoder.finish()
        #expect(bytes == Self.text)
    }

    @Test func rawDeflateOneByteAtATimeIsToldFromZlib() throws {
        for format in ["raw", "zlib"] {
            let (bytes, _) = try Self.decode(try Self.encoded(format), coding: "deflate", readSize: 1)
            #expect(bytes == Self.text, "\(format)")
        }
    }

    @Test func bytesAfterTheLastMemberAreIgnored() throws {
        let encoded = try Self.encoded("gzip") + Array("this is no gzip member".utf8)
        let (bytes, _) = try Self.decode(encoded, coding: "gzip", readSize: 1000)
        #expect(bytes == Self.text)
    }
}
