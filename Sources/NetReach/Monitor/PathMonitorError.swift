/// Why a monitor could not observe the system. A monitor that fails, at start or later, reports
/// ``UnsatisfiedReason/monitorUnavailable`` and keeps the error in ``PathMonitor/failure``.
public enum PathMonitorError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The network namespace file could not be opened or entered (`errno` from open/setns).
    case namespaceUnavailable(path: String, errno: Int32)
    /// A system call on the netlink socket failed.
    case netlinkFailed(operation: String, errno: Int32)
    /// The kernel answered the initial dump with an error or a message the parser rejected.
    case dumpFailed(String)
    /// This platform has no system path source (only Linux has one).
    case unsupportedPlatform
    /// The observed network namespace went away while the monitor ran: its `ip netns` name was
    /// deleted (or now names another namespace), its bind mount was removed, or the process whose
    /// namespace it was exited. The monitor stops observing it rather than report a namespace
    /// nobody can reach by that name any more.
    case namespaceGone(path: String)

    public var description: String {
        switch self {
        case .namespaceUnavailable(let path, let code):
            "cannot use network namespace \(path): \(errnoDescription(code))"
        case .netlinkFailed(let operation, let code):
            "netlink \(operation) failed: \(errnoDescription(code))"
        case .dumpFailed(let detail):
            "initial netlink dump failed: \(detail)"
        case .unsupportedPlatform:
            "no system path source on this platform"
        case .namespaceGone(let path):
            "network namespace \(path) is gone: it was deleted, or its name now refers to another namespace"
        }
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

func errnoDescription(_ code: Int32) -> String {
    guard let text = strerror(code) else { return "errno \(code)" }
    return "\(String(cString: text)) (errno \(code))"
}
