import Foundation
import NetReachSystem

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

// Opening an output file: what the path names (a regular file, a device or FIFO, an open file
// through /proc), the `NAME.part` beside it created exclusively and locked, and the copy a resumed
// download starts from. What is written is in `OutputFile.swift`, how the file is finished in
// `OutputFile+Finishing.swift`.
extension OutputFile {

    /// Opens `path` for writing a body, as described on ``OutputFile``.
    ///
    /// - Parameters:
    ///   - path: The `--output` path.
    ///   - resume: Keep the bytes already there (`NAME.part`, else `NAME`) and continue after them;
    ///     ``resumeOffset`` says how many. Without it the body starts from nothing.
    /// - Throws: ``OutputFileError`` naming `path` and why: a directory, a socket, a missing
    ///   directory, no permission, a read-only file system, another process writing the same file.
    ///
    /// ```swift
    /// let file = try OutputFile.open("report.json", resume: false)
    /// try file.write(Array("{}".utf8))
    /// try file.commit()
    /// ```
    package static func open(_ path: String, resume: Bool = false) throws(OutputFileError) -> OutputFile {
        // Each turn re-reads the file system: a name that changed between lstat and open (a device
        // replaced by a file, a .part taken by a process that then finished) is looked at again.
        for _ in 0..<8 {
            switch try resolve(path) {
            case .replace(let final):
                if let file = try openPartial(for: final, path: path, resume: resume) { return file }
            case .inPlace(let target, let isOpenFileReference):
                if let file = try openInPlace(target, isOpenFileReference: isOpenFileReference, path: path) {
                    return file
                }
            }
        }
        throw OutputFileError(path: path, reason: .system(.open, file: path, errno: EAGAIN))
    }

    private enum Resolved {
        /// Write `NAME.part` beside this path (a regular file or no file) and rename it over.
        case replace(final: String)
        /// Write this path as it is.
        case inPlace(String, isOpenFileReference: Bool)
    }

    /// Follows symbolic links one at a time (the temporary file must go beside the final target,
    /// not beside the link) until something that is not a link, or nothing, is found.
    private static func resolve(_ path: String) throws(OutputFileError) -> Resolved {
        var current = path
        // 40, as the kernel's own limit (ELOOP).
        for _ in 0..<40 {
            var info = stat()
            guard lstat(current, &info) == 0 else {
                let code = errno
                // Nothing there: a new file (a missing directory shows when it is created).
                if code == ENOENT { return .replace(final: current) }
                throw OutputFileError(path: path, reason: .system(.open, file: current, errno: code))
            }
            switch info.st_mode & S_IFMT {
            case S_IFLNK:
                if isOpenFileReference(current) {
                    return try referencedFile(current, path: path)
                }
                current = try linkTarget(current, path: path)
            case S_IFREG:
                return .replace(final: current)
            case S_IFDIR:
                throw OutputFileError(path: path, reason: .isDirectory)
            case S_IFSOCK:
                throw OutputFileError(path: path, reason: .socket)
            default:
                // A character or block device, or a FIFO.
                return .inPlace(current, isOpenFileReference: false)
            }
        }
        throw OutputFileError(path: path, reason: .system(.open, file: path, errno: ELOOP))
    }

    /// Whether `link` is one of procfs's links to an open file (`/proc/self/fd/1`, which
    /// `/dev/stdout` and `/dev/fd/1` lead to) rather than a name: it lives on the file system
    /// mounted at `/proc`. Following its text would rename over the file that standard output
    /// has open, or fail for a pipe (`pipe:[1234]`).
    private static func isOpenFileReference(_ link: String) -> Bool {
        var directory = stat()
        var proc = stat()
        return stat(directoryName(of: link), &directory) == 0 && stat("/proc", &proc) == 0
            && directory.st_dev == proc.st_dev
    }

    /// What a `/proc` reference leads to, through the kernel (stat follows it as open will).
    private static func referencedFile(_ link: String, path: String) throws(OutputFileError) -> Resolved {
        var info = stat()
        guard stat(link, &info) == 0 else {
            throw OutputFileError(path: path, reason: .system(.open, file: link, errno: errno))
        }
        switch info.st_mode & S_IFMT {
        case S_IFDIR: throw OutputFileError(path: path, reason: .isDirectory)
        case S_IFSOCK: throw OutputFileError(path: path, reason: .socket)
        default: return .inPlace(link, isOpenFileReference: true)
        }
    }

    /// The path `link` points to; a relative target is taken from the link's directory.
    private static func linkTarget(_ link: String, path: String) throws(OutputFileError) -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink(link, &buffer, buffer.count - 1)
        guard length >= 0 else {
            throw OutputFileError(path: path, reason: .system(.open, file: link, errno: errno))
        }
        let target = String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return target.hasPrefix("/") ? target : directoryName(of: link) + "/" + target
    }

    /// Opens a device, a FIFO or a `/proc` reference for writing where it is. Returns nil when
    /// the name turned out to be a regular file after all (replaced since lstat): look again.
    private static func openInPlace(
        _ target: String, isOpenFileReference: Bool,
        path: String
    ) throws(OutputFileError) -> OutputFile? {
        var flags = O_WRONLY | O_CLOEXEC | O_NOCTTY
        // A reference is itself a link; any other name must still not be one.
        if !isOpenFileReference { flags |= O_NOFOLLOW }
        var info = stat()
        if isOpenFileReference, stat(target, &info) == 0, info.st_mode & S_IFMT == S_IFREG {
            // Standard output's file: add to it after what is there, as the shell's own descriptor
            // would, never truncate it.
            flags |= O_APPEND
        }
        let descriptor = try openRetryingInterrupts(target, flags, path: path)
        guard fstat(descriptor, &info) == 0 else {
            let code = errno
            close(descriptor)
            throw OutputFileError(path: path, reason: .system(.open, file: target, errno: code))
        }
        if !isOpenFileReference, info.st_mode & S_IFMT == S_IFREG {
            close(descriptor)
            return nil
        }
        return OutputFile(
            path: path, destination: .inPlace(target), descriptor: descriptor,
            resumeOffset: 0, resume: false)
    }

    /// Opens (creating, adopting or replacing) `final + ".part"` and locks it. Returns nil when
    /// another process changed the `.part` meanwhile: look again.
    private static func openPartial(
        for final: String, path: String,
        resume: Bool
    ) throws(OutputFileError) -> OutputFile? {
        let name = final.split(separator: "/", omittingEmptySubsequences: false).last ?? ""
        // "dir/" (or ".", "..") names a directory even when there is none yet.
        guard !name.isEmpty, name != ".", name != ".." else {
            throw OutputFileError(path: path, reason: .isDirectory)
        }
        // A file this process could not write in place (read-only mode, read-only mount) is not
        // replaced by a rename either: the directory's permission alone must not decide.
        if faccessat(AT_FDCWD, final, W_OK, AT_EACCESS) != 0 {
            let code = errno
            if code != ENOENT { throw OutputFileError(path: path, reason: .system(.open, file: final, errno: code)) }
        }
        let partial = final + ".part"
        let destination = Destination.replacing(final: final, partial: partial)

        var existing = stat()
        if lstat(partial, &existing) != 0 {
            let code = errno
            guard code == ENOENT else {
                throw OutputFileError(path: path, reason: .system(.create, file: partial, errno: code))
            }
            // O_EXCL: if another process creates it first, the next turn finds it (and its lock).
            let descriptor: Int32
            do throws(SystemError) {
                descriptor = try SystemCall.retryingInterrupts {
                    systemOpen(partial, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o666)
                }
            } catch {
                if error.code == EEXIST { return nil }
                throw OutputFileError(path: path, reason: .system(.create, file: partial, errno: error.code))
            }
            guard try lockPartial(descriptor, partial: partial, path: path) else { return nil }
            let file = OutputFile(
                path: path, destination: destination, descriptor: descriptor,
                resumeOffset: 0, resume: false)
            if resume {
                do throws(OutputFileError) {
                    let copied = try copyForResume(from: final, into: descriptor, partial: partial, path: path)
                    file.locked { $0.resumeOffset = copied }
                } catch {
                    file.abandon(keepPartial: false)
                    throw error
                }
            }
            return file
        }

        guard existing.st_mode & S_IFMT == S_IFREG else {
            throw OutputFileError(path: path, reason: .partialInTheWay(partial: partial))
        }
        let descriptor: Int32
        do throws(SystemError) {
            descriptor = try SystemCall.retryingInterrupts { systemOpen(partial, O_WRONLY | O_NOFOLLOW | O_CLOEXEC) }
        } catch {
            if error.code == ENOENT { return nil }
            throw OutputFileError(path: path, reason: .system(.open, file: partial, errno: error.code))
        }
        guard try lockPartial(descriptor, partial: partial, path: path) else { return nil }
        guard resume else {
            // A leftover nobody holds, and the body starts from nothing: a fresh file, with this
            // process's owner and umask rather than whatever the leftover had.
            unlink(partial)
            close(descriptor)
            return nil
        }
        let end = lseek(descriptor, 0, SEEK_END)
        guard end >= 0 else {
            let code = errno
            close(descriptor)
            throw OutputFileError(path: path, reason: .system(.open, file: partial, errno: code))
        }
        return OutputFile(
            path: path, destination: destination, descriptor: descriptor,
            resumeOffset: Int64(end), resume: true)
    }

    /// Takes the `.part`'s flock(2) lock. Throws ``OutputFileError/Reason/busy(partial:)`` when
    /// another process holds it; returns false (descriptor closed) when `partial` no longer names
    /// the locked file, because its holder renamed or removed it before letting go.
    private static func lockPartial(_ descriptor: Int32, partial: String, path: String) throws(OutputFileError) -> Bool
    {
        // A process forked by another thread of this program holds our earlier descriptor of the
        // same `.part` (and so its lock) until it execs: seen in a test that resumes a download
        // right after abandoning it. A writer that really holds the file holds it for the whole
        // download, so a short grace before calling it busy changes nothing for that case.
        var busySince: ContinuousClock.Instant?
        while true {
            let code: Int32
            do throws(SystemError) {
                try SystemCall.retryingInterrupts { flock(descriptor, LOCK_EX | LOCK_NB) }
                break
            } catch {
                code = error.code
            }
            if code == EWOULDBLOCK {
                let now = ContinuousClock.now
                if now - (busySince ?? now) < .milliseconds(200) {
                    busySince = busySince ?? now
                    usleep(2_000)
                    continue
                }
                close(descriptor)
                throw OutputFileError(path: path, reason: .busy(partial: partial))
            }
            // No locks here (some network file systems): the file still works, unguarded.
            break
        }
        guard names(partial, descriptor) else {
            close(descriptor)
            return false
        }
        return true
    }

    /// Copies the regular file at `final` (if any) into the new, empty `.part`; returns the bytes
    /// copied. read/write in 1 MiB steps: copy_file_range(2) is not in Swift's Glibc module.
    private static func copyForResume(
        from final: String, into descriptor: Int32, partial: String,
        path: String
    ) throws(OutputFileError) -> Int64 {
        let source = systemOpen(final, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard source >= 0 else {
            let code = errno
            // Nothing (or no regular file) to resume from: start from nothing.
            if code == ENOENT || code == ELOOP { return 0 }
            throw OutputFileError(path: path, reason: .system(.copy, file: final, errno: code))
        }
        defer { close(source) }
        var info = stat()
        guard fstat(source, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return 0 }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 1)
        defer { buffer.deallocate() }
        var copied: Int64 = 0
        while true {
            let count: Int
            do throws(SystemError) { count = try SystemCall.read(source, into: buffer) } catch {
                throw OutputFileError(path: path, reason: .system(.copy, file: final, errno: error.code))
            }
            if count == 0 { return copied }
            try writeAll(
                descriptor, UnsafeRawBufferPointer(rebasing: buffer[..<count]),
                counting: &copied, operation: .copy, file: partial, path: path)
        }
    }

    /// Whether `path` names the file open as `descriptor` (same device and inode).
    static func names(_ path: String, _ descriptor: Int32) -> Bool {
        var named = stat()
        var open = stat()
        return lstat(path, &named) == 0 && fstat(descriptor, &open) == 0
            && named.st_dev == open.st_dev && named.st_ino == open.st_ino
    }

    /// "dir" for "dir/name", "." for "name", "/" for "/name".
    static func directoryName(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    private static func openRetryingInterrupts(
        _ target: String, _ flags: Int32,
        path: String
    ) throws(OutputFileError) -> Int32 {
        // EINTR: a signal while a FIFO waited for its reader.
        do throws(SystemError) { return try SystemCall.retryingInterrupts { systemOpen(target, flags) } } catch {
            throw OutputFileError(path: path, reason: .system(.open, file: target, errno: error.code))
        }
    }
}

/// open(2), under a name `OutputFile.open` does not shadow.
private func systemOpen(_ path: String, _ flags: Int32, _ mode: mode_t = 0) -> Int32 {
    open(path, flags, mode)
}
