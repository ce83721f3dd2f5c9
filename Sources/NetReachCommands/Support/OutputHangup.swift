import NetReachSystem

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Notices when nobody reads standard output any more, without writing to it.
///
/// `netreach watch | head -1` prints one line, and `head` exits; the next line might come hours
/// later, or never, and until a write fails with `EPIPE` the process would run on with nobody
/// listening. poll(2) reports that state without waiting for a write: a pipe whose readers are
/// all gone is `POLLERR` on its write end, a socket whose peer closed or a terminal that hung up
/// is `POLLHUP`. A regular file or `/dev/null` never reports either, so nothing happens there.
package enum OutputHangup {
    /// Calls `action` once, on a thread of its own, when standard output has no reader any more.
    /// The thread sleeps in poll(2) (no wakeups) and lives until then, or until the process exits.
    package static func whenReaderIsGone(_ action: @escaping @Sendable () -> Void) {
        BlockingWork.start(named: "netreach-hangup") {
            if waitForHangup(of: StandardStream.output.fileDescriptor) { action() }
        }
    }

    /// Blocks until `descriptor` reports `POLLERR`, `POLLHUP` or `POLLNVAL`; `false` if poll itself
    /// fails for another reason than a signal.
    static func waitForHangup(of descriptor: Int32) -> Bool {
        // No events asked for: poll still reports the error and hang-up conditions, and only them.
        // With no events asked for, a ready descriptor is a hung-up one.
        guard let events = try? SystemCall.poll(descriptor, events: 0, timeout: nil) else { return false }
        return events & Int16(POLLERR | POLLHUP | POLLNVAL) != 0
    }
}
