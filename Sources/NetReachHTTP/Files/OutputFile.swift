import NetReachSystem

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
#if os(Linux)
import CNetReachLinux
#endif

/// The file behind `--output`: receives a streamed body and never leaves a half-written file under
/// the name it was asked to write.
///
/// What happens depends on what the path names when it is opened:
///
/// - **A regular file, or no file yet.** The bytes go to `NAME.part` beside it (same directory, so
///   the final rename is atomic), and ``commit()`` renames that over `NAME`. Until then `NAME` keeps
///   its old content and inode. Replacing an existing file first gives the new one the old one's
///   owner, group and mode (as far as the process may: root always can), so `-o` over a 0600 file
///   owned by someone else stays just that. A new file gets mode `0666 & ~umask`, as with curl.
///   An existing file that could not be written in place (no write permission) is not replaced
///   either: opening fails as writing it would.
/// - **A symbolic link.** Followed by the kernel, under its own rules (`fs.protected_symlinks`,
///   the permissions of every directory on the way), never by reading the link here; the kernel
///   names the file it reached, `NAME.part` goes beside *that* and the rename replaces it, so the
///   link stays. A dangling link creates its target as the kernel allows (its directory must
///   exist).
/// - **Someone else's name in a sticky, world-writable directory** (`/tmp`): a link, regular file
///   or FIFO there that belongs to neither this user nor the directory's owner is refused
///   (``OutputFileError/Reason/untrusted(file:isLink:owner:directory:)``), as the kernel refuses it
///   with `fs.protected_symlinks`, `protected_regular` and `protected_fifos` on, and here even when
///   they are off: whoever planted it would choose the file written, or own the new one.
/// - **A device or a FIFO** (`/dev/null`, `/dev/full`, a terminal, a named pipe). Opened and written
///   in place, without `O_TRUNC`, never renamed over: ``commit()`` only closes it. Opening a FIFO
///   waits for its reader, as a shell redirection does.
/// - **An open file named through `/proc`** (`/dev/stdout`, `/dev/fd/1`, `/proc/self/fd/1`). That
///   link names an open file, not a path to replace: a pipe or terminal is written in place, and
///   a regular file is appended to in place (`O_APPEND`), so
///   `{ echo header; netreach get URL -o /dev/stdout; } > file` keeps the header. Recognised by the
///   link living on the file system mounted at `/proc`.
/// - **A directory or a socket** is an error: ``OutputFileError/Reason/isDirectory``,
///   ``OutputFileError/Reason/socket``.
///
/// **Resuming** (`resume: true`, for `--continue`): the bytes already present are those of
/// `NAME.part` when one exists (the same name a failed run keeps with
/// ``abandon(keepPartial:)``), else those of a regular file at `NAME` (left by an interrupted
/// curl, say). `NAME` is then *copied* into `NAME.part` rather than renamed: `NAME` stays whole and
/// in place until ``commit()``, and no outcome of this run can lose it, at the cost of a second copy
/// of those bytes on disk while the download runs. ``resumeOffset`` says how many bytes are there;
/// ask the server for the rest (`Range: bytes=N-`). A device, a pipe or a `/proc` reference cannot
/// resume: it opens with ``resumeOffset`` 0 (the full body is wanted), not an error.
/// Without `resume`, a leftover `NAME.part` that no other process holds is removed and a new one
/// is created (so it gets this process's owner and umask).
///
/// **Two processes** writing the same `NAME` would interleave: `NAME.part` is locked with
/// flock(2) while open, and a second ``open(_:resume:)`` fails with
/// ``OutputFileError/Reason/busy(partial:)``.
///
/// **Durability:** ``commit()`` calls fsync(2) before the rename (curl, which writes in place,
/// does not). Without it a crash just after the rename can leave `NAME` empty or short on ext4 or
/// XFS, which is the one outcome the rename exists to prevent; a download is bounded by the network,
/// so one flush at the end costs little. The directory is not synced: after a crash the rename
/// may be lost, leaving the old `NAME` and a complete `NAME.part`, both whole.
///
/// Not preserved on replacement: extended attributes, ACLs and other hard links to the old file
/// (they keep the old content, as with any atomic save).
///
/// **Threads:** meant for one task at a time, like a file handle: concurrent writes would land
/// in an unspecified order. Each call holds a lock, which is what makes the type `Sendable` so it
/// can be handed to the task that streams the body; it is not a way to share one file between
/// writers.
///
/// ```swift
/// let file = try OutputFile.open("big.iso", resume: true)
/// // resumeOffset > 0: ask for "Range: bytes=\(file.resumeOffset)-"; if the server sends the
/// // whole body anyway (200, not 206), call file.truncateForRestart() first.
/// do {
///     for try await chunk in body { try file.write(chunk) }
///     try file.commit()              // big.iso appears, whole, only now
/// } catch {
///     file.abandon(keepPartial: true) // big.iso.part stays for --continue
///     throw error
/// }
/// ```
package final class OutputFile: @unchecked Sendable {
    // @unchecked: the `let`s are set in init and never change; `state` is a `Locked`, read and
    // written only inside `locked` (deinit too, through `abandon`).

    /// Where the bytes of an ``OutputFile`` go.
    package enum Destination: Sendable, Hashable {
        /// Into `partial` (`NAME.part` beside `final`), renamed over `final` by ``OutputFile/commit()``.
        /// `final` is the target after following symbolic links.
        case replacing(final: String, partial: String)
        /// Straight into `path`: a device, a FIFO, or an open file named through `/proc`. Never
        /// renamed over or truncated.
        case inPlace(String)
    }

    /// The path given to ``open(_:resume:)``, as given; errors name it.
    package let path: String
    /// Where the bytes go: a `.part` file to rename at the end, or the destination itself.
    package let destination: Destination
    /// Whether a file that is dropped without ``commit()`` or ``abandon(keepPartial:)`` keeps its
    /// `.part`: yes when opened with `resume`, so a forgotten call never destroys resumable bytes.
    private let keepsPartialWhenDropped: Bool

    struct State {
        /// -1 once committed or abandoned.
        var descriptor: Int32
        var resumeOffset: Int64
        var written: Int64 = 0
        /// The first write (or truncation, or flush) that failed: every later write and
        /// ``OutputFile/commit()`` throws it, so a body with a hole is never committed.
        var failure: OutputFileError?
        /// Where the file's bytes have been handed to the disk from (writeback started up to here).
        var writebackFrom: Int64 = 0
    }

    /// How many bytes may wait in the page cache before writing them back is started: the disk
    /// then works while the network does, and the fsync in ``commit()`` has little left to wait
    /// for (measured on a 1 GiB download: the fsync alone took 0.44 s without this).
    static let writebackStep: Int64 = 8 << 20

    private let state: Locked<State>

    /// Made by the opening code (`OutputFile+Opening.swift`) once the file is open and locked.
    init(path: String, destination: Destination, descriptor: Int32, resumeOffset: Int64, resume: Bool) {
        self.path = path
        self.destination = destination
        self.keepsPartialWhenDropped = resume
        self.state = Locked(State(descriptor: descriptor, resumeOffset: resumeOffset, writebackFrom: resumeOffset))
    }

    deinit {
        abandon(keepPartial: keepsPartialWhenDropped) // does nothing after commit or abandon
    }

    // MARK: Writing

    /// Bytes already in the file when it was opened with `resume: true` (0 otherwise, and 0 again
    /// after ``truncateForRestart()``). ``resumeOffset`` + ``written`` is always the file's length.
    package var resumeOffset: Int64 { locked { $0.resumeOffset } }

    /// Bytes written by ``write(_:)-(UnsafeRawBufferPointer)`` since opening, or since the last
    /// ``truncateForRestart()``.
    package var written: Int64 { locked { $0.written } }

    /// Appends `bytes`, all of them: short writes and interrupted calls are continued.
    ///
    /// A failure (`ENOSPC` on a full disk or `/dev/full`, `EDQUOT`, `EIO`, `EPIPE` when a FIFO's
    /// reader has gone, `EFBIG`, `EBADF` after ``commit()``) throws an ``OutputFileError`` carrying
    /// errno, and from then on every write and ``commit()`` throws the same error: a body with a
    /// hole is never committed, and the final name never sees it. (`EPIPE` needs SIGPIPE ignored,
    /// as `netreach`'s `main.swift` does; otherwise the signal ends the process first.)
    ///
    /// ```swift
    /// try chunk.withUnsafeBytes { try file.write($0) }
    /// ```
    package func write(_ bytes: UnsafeRawBufferPointer) throws(OutputFileError) {
        try locked { (state) throws(OutputFileError) in
            if let failure = state.failure { throw failure }
            guard state.descriptor >= 0 else {
                throw OutputFileError(path: path, reason: .system(.write, file: writtenFile, errno: EBADF))
            }
            do throws(OutputFileError) {
                try Self.writeAll(
                    state.descriptor, bytes, counting: &state.written, operation: .write,
                    file: writtenFile, path: path)
            } catch {
                state.failure = error
                throw error
            }
            #if os(Linux)
            // A file that commit() will fsync: start writing it back as it grows. A failure here
            // only loses the head start (the fsync still flushes everything), so it is ignored.
            if case .replacing = destination {
                let end = state.resumeOffset + state.written
                if end - state.writebackFrom >= Self.writebackStep {
                    _ = cnr_start_writeback(state.descriptor, state.writebackFrom, end - state.writebackFrom)
                    state.writebackFrom = end
                }
            }
            #endif
        }
    }

    /// Appends the bytes of an array, a slice of one, `Data`, or any other contiguous bytes.
    ///
    /// ```swift
    /// try file.write(Array("hello\n".utf8))
    /// try file.write(buffer[start..<end])   // an ArraySlice<UInt8>
    /// ```
    package func write(_ bytes: some ContiguousBytes) throws(OutputFileError) {
        var failure: OutputFileError?
        bytes.withUnsafeBytes { buffer in
            do throws(OutputFileError) { try write(buffer) } catch { failure = error }
        }
        if let failure { throw failure }
    }

    /// Starts the body again from byte 0: for a server that ignored the `Range` request and sends
    /// the whole body (200 rather than 206), or a retry after part of a body was written.
    ///
    /// Truncates the `.part` and rewinds; ``resumeOffset`` and ``written`` become 0. A destination
    /// written in place cannot take back what it was given: once anything was written there this
    /// throws ``OutputFileError/Reason/cannotRestart`` (before that it does nothing).
    ///
    /// ```swift
    /// if file.resumeOffset > 0, response.status == .ok { try file.truncateForRestart() }
    /// ```
    package func truncateForRestart() throws(OutputFileError) {
        try locked { (state) throws(OutputFileError) in
            if let failure = state.failure { throw failure }
            guard state.descriptor >= 0 else {
                throw OutputFileError(path: path, reason: .system(.truncate, file: writtenFile, errno: EBADF))
            }
            guard case .replacing = destination else {
                if state.written == 0 { return }
                throw OutputFileError(path: path, reason: .cannotRestart)
            }
            do throws(SystemError) {
                try SystemCall.retryingInterrupts { ftruncate(state.descriptor, 0) }
            } catch {
                let error = OutputFileError(
                    path: path, reason: .system(.truncate, file: writtenFile, errno: error.code))
                state.failure = error
                throw error
            }
            guard lseek(state.descriptor, 0, SEEK_SET) == 0 else {
                let code = errno
                let error = OutputFileError(path: path, reason: .system(.truncate, file: writtenFile, errno: code))
                state.failure = error
                throw error
            }
            state.resumeOffset = 0
            state.written = 0
            state.writebackFrom = 0
        }
    }

    // MARK: Helpers

    /// The file the bytes go to: the `.part`, or the in-place destination.
    var writtenFile: String {
        switch destination {
        case .replacing(_, let partial): partial
        case .inPlace(let target): target
        }
    }

    /// Runs `body` on the state while holding the lock: the only way `state` is touched.
    func locked<Result, Failure: Error>(
        _ body: (inout State) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        try state.withLock(body)
    }

    /// Writes all of `bytes` (a FIFO or terminal someone made non-blocking is waited for), adding
    /// what got through to `counter`, also when it fails.
    static func writeAll(
        _ descriptor: Int32, _ bytes: UnsafeRawBufferPointer, counting counter: inout Int64,
        operation: OutputFileError.Operation, file: String,
        path: String
    ) throws(OutputFileError) {
        var written = 0
        defer { counter += Int64(written) }
        do throws(SystemError) {
            try SystemCall.writeAll(descriptor, bytes, written: &written)
        } catch {
            throw OutputFileError(path: path, reason: .system(operation, file: file, errno: error.code))
        }
    }

}

/// Why ``OutputFile`` could not open, write or finish a file: the path as given and the reason,
/// with errno and the file the failing call was made on when the system refused.
///
/// Its ``description`` is a sentence for standard error:
/// `'big.iso': No space left on device (errno 28), writing 'big.iso.part'`.
///
/// ```swift
/// do { try file.write(chunk) } catch {
///     StandardStream.complain("cannot write --output file \(error)")
///     if error.errno == ENOSPC { /* the disk is full */ }
/// }
/// ```
package struct OutputFileError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The path given to ``OutputFile/open(_:resume:)``.
    package var path: String
    /// What went wrong.
    package var reason: Reason

    /// What went wrong, in the terms the caller can act on.
    package enum Reason: Sendable, Hashable {
        /// The path is a directory (or ends in `/`).
        case isDirectory
        /// The path is a Unix-domain socket, which open(2) cannot write (`ENXIO`).
        case socket
        /// Another process is writing the same output: it holds `partial`'s lock.
        case busy(partial: String)
        /// `partial`, the name the download would use, is taken by something that is not a regular
        /// file (a directory, a symbolic link...). Left alone for a person to look at.
        case partialInTheWay(partial: String)
        /// ``OutputFile/truncateForRestart()`` on a destination written in place after bytes went out.
        case cannotRestart
        /// At ``OutputFile/commit()``, the final name no longer held a regular file (or nothing).
        case destinationChanged
        /// `file`, a symbolic link (`isLink`), regular file or FIFO in `directory`, a sticky,
        /// world-writable directory such as `/tmp`, belongs to `owner`, who is neither this user
        /// nor the directory's owner: refused as the kernel's `fs.protected_symlinks`,
        /// `protected_regular` and `protected_fifos` refuse it.
        case untrusted(file: String, isLink: Bool, owner: UInt32, directory: String)
        /// A system call failed: `operation` on `file` (the path itself, the `.part`, or a link on
        /// the way), with its errno.
        case system(Operation, file: String, errno: Int32)
    }

    /// The step that failed.
    package enum Operation: String, Sendable, Hashable {
        /// Looking at the path or opening it: lstat, readlink, access, open.
        case open
        /// Creating `NAME.part`.
        case create
        /// Copying an existing `NAME` into `NAME.part` to resume.
        case copy
        /// Writing the body.
        case write
        /// Truncating for a restart.
        case truncate
        /// fsync before the rename.
        case sync
        /// Giving the new file the old one's owner and mode.
        case setOwnerAndMode
        /// Renaming `NAME.part` over `NAME`.
        case replace
        /// Closing.
        case close
    }

    package init(path: String, reason: Reason) {
        self.path = path
        self.reason = reason
    }

    /// The errno of a failed system call (`ENOSPC`, `EACCES`, `EROFS`...), nil for the other reasons.
    package var errno: Int32? {
        if case .system(_, _, let code) = reason { return code }
        return nil
    }

    /// `'big.iso': No space left on device (errno 28), writing 'big.iso.part'`.
    package var description: String {
        let name = "'\(path)'"
        switch reason {
        case .isDirectory:
            return "\(name) is a directory"
        case .socket:
            return "\(name) is a socket, which cannot be opened as a file"
        case .busy(let partial):
            return "\(name) is being written by another process ('\(partial)' is locked)"
        case .partialInTheWay(let partial):
            return
                "\(name): '\(partial)', where the download goes until it is complete, is not a regular file; move it away"
        case .cannotRestart:
            return
                "\(name) is written in place (a device or a pipe), so the bytes already written cannot be taken back to start again"
        case .destinationChanged:
            return "\(name) stopped being a regular file during the download, so it was not replaced"
        case .untrusted(let file, let isLink, let owner, let directory):
            let what = file == path ? name : "\(name) leads to '\(file)', which"
            return isLink
                ? "\(what) is a symbolic link of user \(owner) in '\(directory)', a sticky world-writable directory: not followed, since its owner chooses which file would be written (as fs.protected_symlinks)"
                : "\(what) belongs to user \(owner) in '\(directory)', a sticky world-writable directory: not written, since its owner could read what is written there (as fs.protected_regular)"
        case .system(let operation, let file, let code):
            let reason = strerror(code).map { String(cString: $0) } ?? "error"
            var text = "\(name): \(reason) (errno \(code))"
            let other = file == path ? "" : " '\(file)'"
            switch operation {
            case .open: if !other.isEmpty { text += ", opening\(other)" }
            case .create: text += ", creating\(other)"
            case .copy: text += ", copying the bytes already there to resume (at '\(file)')"
            case .write: if !other.isEmpty { text += ", writing\(other)" }
            case .truncate: text += ", truncating\(other) to start again"
            case .sync: text += ", flushing\(other) to disk"
            case .setOwnerAndMode: text += ", giving\(other) the replaced file's owner and mode"
            case .replace: text += ", renaming\(other) over it"
            case .close: text += ", closing\(other)"
            }
            if operation == .create, code == ENOENT {
                text += ": the directory '\(OutputFile.directoryName(of: file))' does not exist"
            }
            return text
        }
    }
}
