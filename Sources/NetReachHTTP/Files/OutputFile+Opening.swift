import NetReachSystem

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

#if os(Linux)
import CNetReachLinux
#endif

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

    /// What `path` names. A symbolic link is followed by the kernel, never by reading it here: the
    /// kernel applies its own rules on the way (`fs.protected_symlinks`, permissions on every
    /// directory, its limit of 40 links), and says which file it reached.
    private static func resolve(_ path: String) throws(OutputFileError) -> Resolved {
        var info = stat()
        guard lstat(path, &info) == 0 else {
            let code = errno
            // Nothing there: a new file (a missing directory shows when it is created).
            if code == ENOENT { return .replace(final: path) }
            throw OutputFileError(path: path, reason: .system(.open, file: path, errno: code))
        }
        guard info.st_mode & S_IFMT == S_IFLNK else { return try classify(path, info, path: path) }
        if isOpenFileReference(path) { return try referencedFile(path, path: path) }
        try refuseUntrusted(path, info, path: path)
        return try linkedFile(path)
    }

    /// What to do with `name`, which is not a link (`info` is its stat).
    private static func classify(_ name: String, _ info: stat, path: String) throws(OutputFileError) -> Resolved {
        switch info.st_mode & S_IFMT {
        case S_IFREG:
            try refuseUntrusted(name, info, path: path)
            return .replace(final: name)
        case S_IFDIR:
            throw OutputFileError(path: path, reason: .isDirectory)
        case S_IFSOCK:
            throw OutputFileError(path: path, reason: .socket)
        default:
            // A character or block device, or a FIFO.
            if info.st_mode & S_IFMT == S_IFIFO { try refuseUntrusted(name, info, path: path) }
            return .inPlace(name, isOpenFileReference: false)
        }
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

    /// What the link at `path` leads to, as the kernel resolves it. A link that leads nowhere has
    /// its target created by the kernel (so its rules decide whether that is allowed), named, and
    /// removed again: `NAME.part` then goes beside that name, and nothing is left there if the
    /// download fails.
    private static func linkedFile(_ path: String) throws(OutputFileError) -> Resolved {
        var created = false
        var descriptor = openFollowingLinks(path)
        if descriptor < 0, errno == ENOENT {
            // O_NONBLOCK: a FIFO that appeared meanwhile must not wait here for a reader.
            descriptor = systemOpen(path, O_WRONLY | O_CREAT | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0o666)
            created = descriptor >= 0
        }
        guard descriptor >= 0 else {
            throw OutputFileError(path: path, reason: .system(.open, file: path, errno: errno))
        }
        defer { close(descriptor) }
        let final = try openedName(descriptor, path: path)
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            throw OutputFileError(path: path, reason: .system(.open, file: final, errno: errno))
        }
        if created, info.st_mode & S_IFMT == S_IFREG {
            // Only the empty file made just now, and only while the name is still it.
            if names(final, descriptor) { unlink(final) }
            return .replace(final: final)
        }
        return try classify(final, info, path: path)
    }

    /// The name the kernel gives the file open as `descriptor` (`/proc/self/fd/N`'s text).
    private static func openedName(_ descriptor: Int32, path: String) throws(OutputFileError) -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let reference = "/proc/self/fd/\(descriptor)"
        let length = readlink(reference, &buffer, buffer.count - 1)
        guard length > 0 else {
            throw OutputFileError(path: path, reason: .system(.open, file: reference, errno: errno))
        }
        let name = String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        // Removed since it was opened (" (deleted)"), or not on a path at all: look again.
        guard name.hasPrefix("/"), names(name, descriptor) else {
            throw OutputFileError(path: path, reason: .system(.open, file: path, errno: EAGAIN))
        }
        return name
    }

    /// Refuses what the kernel's `fs.protected_symlinks`, `protected_regular` and
    /// `protected_fifos` refuse, whether or not they are on: in a sticky, world-writable
    /// directory (`/tmp`), a link, regular file or FIFO that belongs to neither this user nor
    /// the directory's owner. Its owner chose what it names or holds: following the link would
    /// write where they decide, and replacing the file would hand them the new one (it keeps the
    /// old one's owner).
    private static func refuseUntrusted(_ name: String, _ info: stat, path: String) throws(OutputFileError) {
        let user = geteuid()
        guard info.st_uid != user else { return }
        var directory = stat()
        let parent = directoryName(of: name)
        guard stat(parent, &directory) == 0,
            directory.st_mode & S_ISVTX != 0, directory.st_mode & S_IWOTH != 0,
            info.st_uid != directory.st_uid
        else { return }
        throw OutputFileError(
            path: path,
            reason: .untrusted(
                file: name, isLink: info.st_mode & S_IFMT == S_IFLNK, owner: info.st_uid, directory: parent))
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

/// A descriptor for what `path` leads to, links followed by the kernel, opened neither for
/// reading nor for writing where the system allows (Linux's O_PATH).
private func openFollowingLinks(_ path: String) -> Int32 {
    #if os(Linux)
    cnr_open_path(path)
    #else
    open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
    #endif
}

/// open(2), under a name `OutputFile.open` does not shadow.
private func systemOpen(_ path: String, _ flags: Int32, _ mode: mode_t = 0) -> Int32 {
    open(path, flags, mode)
}
