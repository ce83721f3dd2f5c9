import CNetReachZlib
import Foundation
import NIOCore

/// Decodes a `Content-Encoding: gzip` or `deflate` body in pieces of at most ``pieceSize`` bytes,
/// whatever its compression ratio: the body's reader takes each piece before the next is made, so
/// a small body that inflates to gigabytes never exists in memory at once.
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
/// - gzip: one member after another (RFC 1952 allows several); bytes after the last member
///   that do not start another are ignored, as curl ignores them.
/// - deflate: the zlib format RFC 9110 names, or raw deflate, which some servers send instead
///   (told apart by the zlib header's check bits, as curl and browsers do).
/// - ``limit`` bounds the decoded total: past it, ``Failure/tooLarge``.
///
/// ```swift
/// let decoder = ContentDecoder(contentEncoding: "gzip", limit: 1 << 30)!
/// decoder.feed(read)
/// while let piece = try decoder.nextPiece() { await consume(piece) }
/// try decoder.finish()   // at the end of the body
/// ```
final class ContentDecoder {
    /// The most bytes one piece holds.
    static let pieceSize = 64 << 10

    /// Why decoding stopped.
    enum Failure: Error, Equatable {
        /// The decoded body passed `limit` bytes.
        case tooLarge(limit: Int64)
        /// The bytes are not what the coding says; the text is zlib's reason.
        case invalid(String)
        /// The body ended before the compressed stream did.
        case truncated
    }

    private enum Coding {
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
    /// Bytes fed at all: an empty body is whole however it is coded.
    private var fed = false
    /// Decoded so far.
    private(set) var decoded: Int64 = 0

    /// A decoder for `contentEncoding`, or `nil` for a body that is not decoded: no coding,
    /// `identity`, or a coding other than gzip (`x-gzip`) and deflate, which passes as it came,
    /// as with curl.
    init?(contentEncoding: String?, limit: Int64) {
        switch contentEncoding?.trimmingCharacters(in: .whitespaces).lowercased() {
        case "gzip", "x-gzip": coding = .gzip
        case "deflate": coding = .deflate
        default: return nil
        }
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
        guard bytes.readableBytes > 0 else { return }
        fed = true
        if input.readableBytes == 0 {
            input = bytes
        } else {
            var joined = input
            joined.writeImmutableBuffer(bytes)
            input = joined
        }
    }

    /// The next piece of decoded bytes (at most ``pieceSize``), or `nil` once everything fed so
    /// far is decoded.
    func nextPiece() throws(Failure) -> ByteBuffer? {
        var piece = allocator.buffer(capacity: Self.pieceSize)
        while piece.readableBytes < Self.pieceSize, !ended, input.readableBytes > 0 {
            if !initialized { try start() }
            let (consumed, produced, status) = inflateStep(into: &piece)
            decoded += Int64(produced)
            guard decoded <= limit else { throw .tooLarge(limit: limit) }
            switch status {
            case Z_OK:
                continue
            case Z_STREAM_END:
                try streamEnded()
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

    /// At the end of the body: throws ``Failure/truncated`` when the compressed stream had not
    /// ended.
    func finish() throws(Failure) {
        guard fed, !ended else { return }
        // Pieces may still be due from bytes fed last; the caller takes them before finishing.
        throw .truncated
    }

    private func start() throws(Failure) {
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

    /// One call to inflate: from `input` into `piece`'s free space up to ``pieceSize``.
    private func inflateStep(into piece: inout ByteBuffer) -> (consumed: Int, produced: Int, status: Int32) {
        let room = Self.pieceSize - piece.readableBytes
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

    /// After a stream's end: another gzip member starts, or the body is done.
    private func streamEnded() throws(Failure) {
        let magic = input.getInteger(at: input.readerIndex, as: UInt16.self)
        guard coding == .gzip, magic == 0x1F8B else {
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
