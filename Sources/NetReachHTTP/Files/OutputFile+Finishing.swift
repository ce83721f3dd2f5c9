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

// Finishing an output file: the `NAME.part` given the replaced file's owner and mode, flushed and
// renamed over `NAME` (or a destination written in place closed), or, when the download failed,
// kept for a later resume or removed.
extension OutputFile {
    /// Finishes the file: renames `NAME.part` over `NAME` (after giving it the replaced file's
    /// owner, group and mode, and an fsync), or for a destination written in place just closes it.
    ///
    /// If it throws, nothing was renamed: the `.part` is still open, for
    /// ``abandon(keepPartial:)`` (or for the object to be dropped). A failure to close after the
    /// rename is reported too, though the file is then in place (on local file systems fsync has
    /// already reported anything close could).
    ///
    /// ```swift
    /// try file.commit()
    /// ```
    package func commit() throws(OutputFileError) {
        try locked { (state) throws(OutputFileError) in
            if let failure = state.failure { throw failure }
            guard state.descriptor >= 0 else {
                throw OutputFileError(path: path, reason: .system(.replace, file: writtenFile, errno: EBADF))
            }
            if case .replacing(let final, let partial) = destination {
                try replace(final, with: partial, descriptor: state.descriptor, failure: &state.failure)
            }
            let descriptor = state.descriptor
            state.descriptor = -1
            // Not retried on EINTR: Linux has closed the descriptor by then.
            if close(descriptor) != 0, errno != EINTR {
                throw OutputFileError(path: path, reason: .system(.close, file: writtenFile, errno: errno))
            }
        }
    }

    /// Gives the `.part` the owner and mode of the file it replaces, flushes it, renames it.
    private func replace(
        _ final: String, with partial: String, descriptor: Int32,
        failure: inout OutputFileError?
    ) throws(OutputFileError) {
        var existing = stat()
        if lstat(final, &existing) == 0 {
            // Something else took the name meanwhile (a device, a directory, a link): renaming
            // over it is what this type exists not to do.
            guard existing.st_mode & S_IFMT == S_IFREG else {
                throw OutputFileError(path: path, reason: .destinationChanged)
            }
            // Owner before mode: chown clears set-user-ID and set-group-ID, chmod restores them.
            // Without root only a group this user belongs to can be given; the rest stays ours.
            if fchown(descriptor, existing.st_uid, existing.st_gid) != 0 {
                _ = fchown(descriptor, uid_t.max, existing.st_gid)
            }
            guard fchmod(descriptor, existing.st_mode & 0o7777) == 0 else {
                throw OutputFileError(path: path, reason: .system(.setOwnerAndMode, file: partial, errno: errno))
            }
        } else if errno != ENOENT {
            throw OutputFileError(path: path, reason: .system(.replace, file: final, errno: errno))
        }
        do throws(SystemError) {
            try SystemCall.retryingInterrupts { fsync(descriptor) }
        } catch {
            // Bytes the kernel could not write back are lost: the body has a hole.
            let error = OutputFileError(path: path, reason: .system(.sync, file: partial, errno: error.code))
            failure = error
            throw error
        }
        // While the lock is still held: nobody else can be using the .part as it leaves.
        guard rename(partial, final) == 0 else {
            throw OutputFileError(path: path, reason: .system(.replace, file: partial, errno: errno))
        }
    }

    /// Gives up: closes the file and removes `NAME.part`, or with `keepPartial` leaves it for a
    /// later `resume` (`--continue`). The final name is never touched. A destination written in
    /// place is only closed. Calling it again, or after ``commit()``, does nothing.
    ///
    /// A file dropped without either call is abandoned as well: keeping the `.part` if it was
    /// opened with `resume`, removing it otherwise.
    ///
    /// ```swift
    /// file.abandon(keepPartial: continueRequested)
    /// ```
    package func abandon(keepPartial: Bool = false) {
        locked { state in
            guard state.descriptor >= 0 else { return }
            // Removed while still locked, and only if the name is still this file's.
            if case .replacing(_, let partial) = destination, !keepPartial, Self.names(partial, state.descriptor) {
                unlink(partial)
            }
            close(state.descriptor)
            state.descriptor = -1
        }
    }
}
