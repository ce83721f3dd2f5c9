import CNetReachZlib
import NIOCore
import NetReachSystem

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Decodes a body whose `Content-Encoding` lists gzip and deflate codings, in pieces of at most
/// ``pieceSize`` bytes, whatever its compression ratio: the body's reader takes each piece before
/// the next is made, so a small body that inflates to gigabytes never exists in memory at once.
///
/// SwiftNIO's own decompressor (which AsyncHTTPClient installs when asked to decompress) inflates
/// each network read whole before handing it on: a 64 KiB read of a bomb became some 64 MiB at
/// once, and a 1 MB gzip of 1 GiB took ~300 MB of memory to a file. Here the transport asks
/// AsyncHTTPClient for the body as it was sent and decodes it itself.
///
/// A value that only computes: the caller feeds what it read and takes pieces until there are no
/// more, then feeds the next read; ``finish()`` at the body's end says whether the stream was
/// whole.
///
/// - gzip (`x-gzip`): one member after another (RFC 1952 allows several); bytes after the last
///   member that do not start another are ignored, as browsers ignore them (curl 7.88 fails
///   with its status 23 there).
/// - deflate: the zlib format RFC 9110 names, or raw deflate, which some servers send instead
///   (told apart by the zlib header's check bits, as curl and browsers do).
/// - Several codings (`gzip, gzip`) are undone in turn, the last one listed first, up to five
///   as curl allows; `identity` in the list is no coding. Any other coding (`br`, `zstd`,
///   `compress`, a name nobody knows) is ``Failure/unsupported(_:)``: a body is never handed
///   on as if it were decoded when it was not.
/// - The `limit` given to ``make(contentEncoding:limit:)`` bounds the decoded total: past it,
///   ``Failure/tooLarge``.
///
/// ```swift
/// let decoder = try ContentDecoder.make(contentEncoding: "gzip", limit: 1 << 30)!
/// decoder.feed(read)
/// while let piece = try decoder.nextPiece() { await consume(piece) }
/// try decoder.finish()   // at the end of the body
/// ```
final class ContentDecoder {
    /// The most bytes one piece holds.
    static let pieceSize = 64 << 10
    /// The most codings one body may list, as curl 7.88 allows (its CVE-2022-32206 fix).
    static let maximumCodings = 5

    /// Why decoding stopped.
    enum Failure: Error, Equatable {
        /// The decoded body passed `limit` bytes.
        case tooLarge(limit: Int64)
        /// The bytes are not what the coding says; the text is zlib's reason.
        case invalid(String)
        /// The body ended before the compressed stream did.
        case truncated
        /// The body is coded in a way not decoded here: the text names the coding.
        case unsupported(String)
        /// The body lists more codings than ``ContentDecoder/maximumCodings``.
        case tooManyCodings(Int)
    }

    /// One coding undone, in the order they are undone: the last coding applied first.
    private let layers: [Inflater]
    /// Decoded so far (what the last layer made).
    var decoded: Int64 { layers.last?.decoded ?? 0 }

    /// A decoder for a body whose `Content-Encoding` is `contentEncoding`, or `nil` when the body
    /// passes as it came: no field, or only `identity`.
    ///
    /// - Throws: ``Failure/unsupported(_:)`` for a coding other than gzip, `x-gzip` and deflate,
    ///   ``Failure/tooManyCodings(_:)`` for more than ``maximumCodings`` of them.
    static func make(contentEncoding: String?, limit: Int64) throws(Failure) -> ContentDecoder? {
        let names = (contentEncoding ?? "").split(separator: ",").map {
            $0.trimmingSpaces().lowercased()
        }.filter { !$0.isEmpty && $0 != "identity" }
        guard !names.isEmpty else { return nil }
        guard names.count <= maximumCodings else {
            throw .tooManyCodings(names.count)
        }
        var codings: [Inflater.Coding] = []
        for name in names {
            switch name {
            case "gzip", "x-gzip": codings.append(.gzip)
            case "deflate": codings.append(.deflate)
            default: throw .unsupported(name)
            }
        }
        return ContentDecoder(codings: codings.reversed(), limit: limit)
    }

    /// `codings` in the order they are undone.
    private init(codings: [Inflater.Coding], limit: Int64) {
        // A layer in the middle makes the next layer's compressed bytes, which are never much
        // longer than what that layer decodes to: the same limit, with room for headers.
        let inner = limit > Int64.max / 2 ? limit : limit + limit / 64 + Int64(Self.pieceSize)
        layers = codings.enumerated().map { index, coding in
            Inflater(coding: coding, limit: index == codings.count - 1 ? limit : inner)
        }
    }

    /// Adds bytes read from the network; take the pieces they make with ``nextPiece()``.
    func feed(_ bytes: ByteBuffer) { layers[0].feed(bytes) }

    /// The next piece of decoded bytes (at most ``pieceSize``), or `nil` once everything fed so
    /// far is decoded.
    func nextPiece() throws(Failure) -> ByteBuffer? { try piece(from: layers.count - 1) }

    /// At the end of the body: throws ``Failure/truncated`` when a compressed stream had not
    /// ended. The caller has taken every piece first.
    func finish() throws(Failure) {
        for layer in layers { try layer.finish() }
    }

    /// The next piece layer `index` makes, feeding it from the layer before as it runs dry.
    private func piece(from index: Int) throws(Failure) -> ByteBuffer? {
        let layer = layers[index]
        while true {
            if let piece = try layer.nextPiece() { return piece }
            guard index > 0, let upstream = try piece(from: index - 1) else { return nil }
            layer.feed(upstream)
        }
    }
}

/// One gzip or deflate stream undone with zlib, in pieces of at most ``ContentDecoder/pieceSize``.
private final class Inflater {
    enum Coding {
        case gzip, deflate
    }

    private let coding: Coding
    private let limit: Int64
    private let allocator = ByteBufferAllocator()
    /// zlib keeps a pointer back to its stream: it must not move, so it lives in memory of its own.
    private let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
    private var initialized = false
    /// The compressed bytes fed and not yet consumed (zlib reads them through `next_in`).
    private var input: ByteBuffer
    /// The compressed stream has ended (`Z_STREAM_END`), and no other member follows.
    private var ended = false
    /// A gzip member has ended; whether another follows is not known yet.
    private var betweenMembers = false
    /// Bytes fed at all: an empty body is whole however it is coded.
    private var fed = false
    /// Decoded so far.
    private(set) var decoded: Int64 = 0

    init(coding: Coding, limit: Int64) {
        self.coding = coding
        self.limit = limit
        input = allocator.buffer(capacity: 0)
        stream.initialize(to: z_stream())
    }

    deinit {
        if initialized { inflateEnd(stream) }
        stream.deinitialize(count: 1)
        stream.deallocate()
    }

    /// Adds bytes read from the network; take the pieces they make with ``nextPiece()``.
    func feed(_ bytes: ByteBuffer) {
        // After the stream's end, bytes are trailing garbage: dropped, never kept.
        guard bytes.readableBytes > 0, !ended else { return }
        fed = true
        if input.readableBytes == 0 {
            input = bytes
        } else {
            var joined = input
            joined.writeImmutableBuffer(bytes)
            input = joined
        }
    }

    /// The next piece of decoded bytes, or `nil` once everything fed so far is decoded.
    func nextPiece() throws(ContentDecoder.Failure) -> ByteBuffer? {
        var piece = allocator.buffer(capacity: ContentDecoder.pieceSize)
        while piece.readableBytes < ContentDecoder.pieceSize, !ended, input.readableBytes > 0 {
            if betweenMembers {
                // Another member, or the end: decided once two bytes are here (a read may end
                // between a member's trailer and the next one's magic).
                guard input.readableBytes >= 2 else { break }
                try startNextMember()
                continue
            }
            if !initialized {
                // deflate is told zlib from raw by two bytes: wait until both are here.
                guard coding == .gzip || input.readableBytes >= 2 else { break }
                try start()
            }
            let (consumed, produced, status) = inflateStep(into: &piece)
            decoded += Int64(produced)
            guard decoded <= limit else { throw .tooLarge(limit: limit) }
            switch status {
            case Z_OK:
                continue
            case Z_STREAM_END:
                streamEnded()
            case Z_BUF_ERROR where consumed == 0 && produced == 0:
                // zlib wants bytes not fed yet.
                return piece.readableBytes > 0 ? piece : nil
            case Z_BUF_ERROR:
                continue
            default:
                throw .invalid(message(status))
            }
        }
        return piece.readableBytes > 0 ? piece : nil
    }

    /// At the end of the body: throws `truncated` when the compressed stream had not ended.
    func finish() throws(ContentDecoder.Failure) {
        // Between members a stream has ended: one trailing byte is garbage, not a member cut short.
        guard fed, !ended, !betweenMembers else { return }
        // Pieces may still be due from bytes fed last; the caller takes them before finishing.
        throw .truncated
    }

    private func start() throws(ContentDecoder.Failure) {
        let bits: Int32
        switch coding {
        case .gzip:
            bits = 15 + 16
        case .deflate:
            // A zlib header: compression method 8 and a first two bytes that are a multiple of 31.
            let first = input.getInteger(at: input.readerIndex, as: UInt16.self) ?? 0
            bits = (first >> 8) & 0x0F == 8 && first % 31 == 0 ? 15 : -15
        }
        stream.pointee = z_stream()
        let status = cnr_inflate_init2(stream, bits)
        guard status == Z_OK else { throw .invalid(message(status)) }
        initialized = true
    }

    /// One call to inflate: from `input` into `piece`'s free space up to a piece's size.
    private func inflateStep(into piece: inout ByteBuffer) -> (consumed: Int, produced: Int, status: Int32) {
        let room = ContentDecoder.pieceSize - piece.readableBytes
        var consumed = 0
        var status: Int32 = Z_OK
        let produced = piece.writeWithUnsafeMutableBytes(minimumWritableBytes: room) { output in
            input.withUnsafeReadableBytes { compressed in
                stream.pointee.next_in = UnsafeMutablePointer(
                    mutating: compressed.baseAddress?.assumingMemoryBound(to: Bytef.self))
                stream.pointee.avail_in = uInt(compressed.count)
                stream.pointee.next_out = output.baseAddress?.assumingMemoryBound(to: Bytef.self)
                stream.pointee.avail_out = uInt(room)
                status = inflate(stream, Z_NO_FLUSH)
                consumed = compressed.count - Int(stream.pointee.avail_in)
                let produced = room - Int(stream.pointee.avail_out)
                stream.pointee.next_in = nil
                stream.pointee.next_out = nil
                return produced
            }
        }
        input.moveReaderIndex(forwardBy: consumed)
        return (consumed, produced, status)
    }

    /// After a stream's end: a gzip body may go on with another member; a deflate body is done.
    private func streamEnded() {
        guard coding == .gzip else {
            ended = true
            input.moveReaderIndex(to: input.writerIndex)
            return
        }
        betweenMembers = true
    }

    /// Between gzip members, with two bytes to look at: another member starts (its magic), or
    /// what follows is trailing garbage and the body is done.
    private func startNextMember() throws(ContentDecoder.Failure) {
        betweenMembers = false
        guard input.getInteger(at: input.readerIndex, as: UInt16.self) == 0x1F8B else {
            ended = true
            input.moveReaderIndex(to: input.writerIndex)
            return
        }
        let status = inflateReset(stream)
        guard status == Z_OK else { throw .invalid(message(status)) }
    }

    private func message(_ status: Int32) -> String {
        if let text = stream.pointee.msg { return String(cString: text) }
        return "zlib status \(status)"
    }
}
