import NetReachSystem
import OpenAPIRuntime

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Why a file cannot be a request body: its path and the reason, as a person reads it.
package struct FileBodyError: Error, Sendable, CustomStringConvertible {
    var path: String
    var reason: String
    package var description: String { "'\(path)': \(reason)" }
}

/// A request body read from a file in 64 KiB chunks as the transport pulls them, so a file of any
/// size is sent in constant memory. Each iteration opens the file again, so a retry (or a 307
/// redirect) sends it again; the length is the file's size when the body was made.
package enum FileBody {
    static let chunkSize = 64 << 10

    /// A body for the regular file at `path`; `progress` hears bytes handed to the transport.
    package static func make(
        path: String, progress: (@Sendable (Int64, Int64?) -> Void)? = nil
    ) throws(FileBodyError) -> HTTPBody {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw FileBodyError(path: path, reason: String(cString: strerror(errno))) }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else {
            throw FileBodyError(path: path, reason: String(cString: strerror(errno)))
        }
        switch status.st_mode & S_IFMT {
        case S_IFREG:
            let size = Int64(status.st_size)
            let body = HTTPBody(
                Chunks(path: path, size: size, progress: progress), length: .known(size), iterationBehavior: .multiple)
            registry.withLock { entries in
                entries = entries.filter { $0.value.body != nil }
                entries[ObjectIdentifier(body)] = Registration(body: body, path: path)
            }
            return body

        case S_IFDIR:
            throw FileBodyError(path: path, reason: "is a directory")
        default:
            throw FileBodyError(path: path, reason: "is not a regular file (a pipe or device is read with @- instead)")
        }
    }

    /// The file a body made by ``make(path:progress:)`` reads, for a transport that can send a
    /// file itself better than it can pull chunks (FoundationNetworking, which cannot pull an
    /// asynchronous body, streams a file from an `InputStream` in constant memory).
    package static func path(of body: HTTPBody) -> String? {
        registry.withLock { entries in
            guard let entry = entries[ObjectIdentifier(body)], entry.body === body else { return nil }
            return entry.path
        }
    }

    /// A body made here and its file; the body is held weakly, so an identifier reused by a later
    /// object never finds a stale path.
    private final class Registration: @unchecked Sendable {
        // @unchecked: `body` is a weak reference read and written only under `registry`'s lock.
        weak var body: HTTPBody?
        let path: String
        init(body: HTTPBody, path: String) {
            self.body = body
            self.path = path
        }
    }

    private static let registry = Locked<[ObjectIdentifier: Registration]>([:])

    /// A single-pass body read from `descriptor` (standard input) until end of file; its length
    /// is unknown, and it cannot be sent twice.
    package static func stream(descriptor: Int32) -> HTTPBody {
        HTTPBody(DescriptorChunks(descriptor: descriptor), length: .unknown, iterationBehavior: .single)
    }

    /// The file's bytes, read afresh by each iterator.
    struct Chunks: AsyncSequence, Sendable {
        typealias Element = HTTPBody.ByteChunk
        let path: String
        let size: Int64
        let progress: (@Sendable (Int64, Int64?) -> Void)?

        func makeAsyncIterator() -> Iterator { Iterator(path: path, size: size, progress: progress) }

        /// Reads the next chunk with `read(2)`; a file that shrank or grew since is an error, not
        /// a body of another length than announced.
        final class Iterator: AsyncIteratorProtocol {
            private let path: String
            private let size: Int64
            private let progress: (@Sendable (Int64, Int64?) -> Void)?
            private var descriptor: Int32 = -1
            private var sent: Int64 = 0

            init(path: String, size: Int64, progress: (@Sendable (Int64, Int64?) -> Void)?) {
                self.path = path
                self.size = size
                self.progress = progress
            }

            deinit { if descriptor >= 0 { close(descriptor) } }

            func next() async throws -> HTTPBody.ByteChunk? {
                if descriptor < 0 {
                    descriptor = open(path, O_RDONLY | O_CLOEXEC)
                    guard descriptor >= 0 else {
                        throw FileBodyError(path: path, reason: String(cString: strerror(errno)))
                    }
                    progress?(0, size)
                }
                var chunk = [UInt8](repeating: 0, count: FileBody.chunkSize)
                let count = try readSome(descriptor, into: &chunk, path: path)
                if count == 0 {
                    guard sent == size else {
                        throw FileBodyError(
                            path: path, reason: "the file shrank to \(sent) bytes while it was sent (\(size) announced)"
                        )
                    }
                    return nil
                }
                sent += Int64(count)
                guard sent <= size else {
                    throw FileBodyError(path: path, reason: "the file grew while it was sent (\(size) bytes announced)")
                }
                progress?(sent, size)
                return chunk[..<count]
            }
        }
    }

    /// Chunks read from an open descriptor until end of file.
    struct DescriptorChunks: AsyncSequence, Sendable {
        typealias Element = HTTPBody.ByteChunk
        let descriptor: Int32

        func makeAsyncIterator() -> Iterator { Iterator(descriptor: descriptor) }

        struct Iterator: AsyncIteratorProtocol {
            let descriptor: Int32

            func next() async throws -> HTTPBody.ByteChunk? {
                var chunk = [UInt8](repeating: 0, count: FileBody.chunkSize)
                let count = try readSome(descriptor, into: &chunk, path: "standard input")
                return count == 0 ? nil : chunk[..<count]
            }
        }
    }
}

/// One `read(2)`; 0 at end of file.
private func readSome(_ descriptor: Int32, into buffer: inout [UInt8], path: String) throws(FileBodyError) -> Int {
    let result = buffer.withUnsafeMutableBytes { raw in
        Result { () throws(SystemError) in try SystemCall.read(descriptor, into: raw) }
    }
    do throws(SystemError) { return try result.get() } catch {
        throw FileBodyError(path: path, reason: String(cString: strerror(error.code)))
    }
}
