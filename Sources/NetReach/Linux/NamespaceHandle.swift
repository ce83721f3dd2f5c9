#if os(Linux)
import CNetReachLinux
import NetReachSystem
import Glibc
import Logging

/// An observed network namespace, opened once for the monitor's whole life: every socket is made
/// in it through this descriptor, never by path again (by then the path may name another
/// namespace), and a watch says when the namespace can no longer be reached by its path.
///
/// How "gone" is seen, without polling:
/// - `/proc/PID/ns/net`: a pidfd (``watchFD``), readable when that process exits;
/// - any other path (`/var/run/netns/NAME`, a container runtime's bind mount): its name is watched
///   with the engine's other files (``ResolvConfWatcher``, on the process's one inotify instance);
///   on any event for the name, the path must still lead to the namespace first opened (same
///   device and inode, ``pathLeadsElsewhere()``), so `ip netns del NAME` and a reused name both
///   count as gone. Unmounting the bind mount without removing the file raises no event; that is
///   seen at the next event in the directory.
/// - when neither can be had (`pidfd_open` refused; inotify refused, as when the user's
///   `fs.inotify.max_user_instances`, 128 by default, are all taken): the engine checks the path
///   every ``NetlinkEngine/unwatchedRecheck`` instead, and says so once.
final class NamespaceHandle {
    let path: String
    /// The namespace, open for as long as the handle lives.
    let fd: Int32
    /// For a process's namespace, its pidfd, readable when the process exits; otherwise -1 (and
    /// -1 when `pidfd_open` was refused).
    private(set) var watchFD: Int32 = -1
    private let identity: FileIdentity?
    private let logger: Logger

    private struct FileIdentity: Equatable {
        var device: UInt64
        var inode: UInt64
    }

    init(_ namespace: NetworkNamespace, logger: Logger = PathMonitor.defaultLogger) throws(PathMonitorError) {
        path = namespace.path
        self.logger = logger
        // The pidfd first: opened after the namespace, it could name a new process that reused
        // the PID of one that exited in between.
        let pid = Self.processID(in: path)
        let pidFD = pid.map { cnr_pidfd_open($0) } ?? -1
        fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            let code = errno
            if pidFD >= 0 { close(pidFD) }
            throw .namespaceUnavailable(path: path, errno: code)
        }
        var status = stat()
        identity =
            fstat(fd, &status) == 0 ? FileIdentity(device: UInt64(status.st_dev), inode: UInt64(status.st_ino)) : nil
        if pid != nil {
            if pidFD >= 0, (try? SystemCall.poll(pidFD, events: Int16(POLLIN), timeout: .zero)) ?? 0 != 0 {
                // The process had exited before its namespace file was opened: not the one asked for.
                close(fd)
                close(pidFD)
                throw .namespaceUnavailable(path: path, errno: ESRCH)
            }
            if pidFD < 0 {
                NetReachDiagnostics.warning(
                    "cannot watch the process of \(path) (pidfd_open: \(errnoDescription(errno))); checking the path every \(NetlinkEngine.unwatchedRecheck) instead",
                    logger: logger)
            }
            watchFD = pidFD
        }
    }

    /// Whether the path is a process's (`/proc/PID/ns/net`), watched by ``watchFD``; any other
    /// path is watched by its name.
    var isProcess: Bool { Self.processID(in: path) != nil }

    deinit {
        close(fd)
        if watchFD >= 0 { close(watchFD) }
    }

    /// Whether the path no longer leads to the namespace first opened: it is missing (`ip netns
    /// del`, the process exited), or names another file (a name reused).
    func pathLeadsElsewhere() -> Bool {
        var status = stat()
        guard stat(path, &status) == 0 else { return true }
        return FileIdentity(device: UInt64(status.st_dev), inode: UInt64(status.st_ino)) != identity
    }

    /// Runs `body` in the network namespace open as `target` and returns to the thread's own:
    /// a socket `body` opens stays bound to `target`. The calling thread must be the engine's own
    /// (never a Swift concurrency pool thread): for the duration it lives in `target`.
    static func entering<T>(
        _ target: Int32, path: String, _ body: () throws(PathMonitorError) -> T
    ) throws(PathMonitorError) -> T {
        let home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)
        guard home >= 0 else { throw .namespaceUnavailable(path: "/proc/thread-self/ns/net", errno: errno) }
        defer { close(home) }
        guard cnr_setns_net(target) == 0 else { throw .namespaceUnavailable(path: path, errno: errno) }
        let result = Result { () throws(PathMonitorError) in try body() }
        // Going home can only fail if this thread lost CAP_SYS_ADMIN meanwhile; the thread is ours
        // alone and only reads netlink and files by path, which the network namespace does not change.
        if cnr_setns_net(home) != 0 {
            NetReachDiagnostics.warning(
                "could not leave network namespace \(path): \(errnoDescription(errno))",
                logger: PathMonitor.defaultLogger)
        }
        return try result.get()
    }

    /// The PID of a `/proc/PID/ns/net` path.
    private static func processID(in path: String) -> Int32? {
        let parts = path.split(separator: "/")
        guard parts.count == 4, parts[0] == "proc", parts[2] == "ns", parts[3] == "net" else { return nil }
        return Int32(parts[1])
    }
}
#endif
