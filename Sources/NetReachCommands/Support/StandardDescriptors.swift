#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Makes the standard streams safe to report failures on, before anything else opens a file.
package enum StandardDescriptors {
    /// Call first thing in `main`, before any socket or file is opened:
    ///
    /// - SIGPIPE is ignored, so writing to a pipe whose reader has gone (`netreach watch | head -1`)
    ///   fails with `EPIPE`, which the commands turn into ``CLIExitCode/outputFailed``, instead of
    ///   killing the process with status 141 before it can say or clean up anything.
    /// - A standard descriptor that is closed (`netreach status >&-`) is taken by `/dev/null`
    ///   opened *read-only*: writing to it still fails, with `EBADF` as for a closed descriptor, but
    ///   the next file opened can no longer become descriptor 1 and receive the output meant for
    ///   standard output (the monitor's netlink socket did, and `status >&-` exited 0).
    package static func prepare() {
        signal(SIGPIPE, SIG_IGN)
        for descriptor: Int32 in 0...2 where fcntl(descriptor, F_GETFD) == -1 && errno == EBADF {
            let opened = open("/dev/null", O_RDONLY)
            // open returns the lowest free descriptor, which is this one (lower ones are open or
            // were taken on earlier turns); anything else is closed again.
            if opened >= 0, opened != descriptor { close(opened) }
        }
    }
}
