/// A Linux network namespace to observe, named the way `ip netns` and `/proc` name them.
///
/// Observing another namespace needs `CAP_SYS_ADMIN` (root): the monitor enters it on a thread
/// of its own just long enough to open its netlink socket.
///
/// ```swift
/// let container = PathMonitor(namespace: .process(4242))      // /proc/4242/ns/net
/// let lab = PathMonitor(namespace: .named("blue"))            // /var/run/netns/blue
/// ```
public struct NetworkNamespace: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The namespace file, such as `/var/run/netns/blue` or `/proc/4242/ns/net`.
    public var path: String

    /// A namespace given by its file.
    public init(path: String) { self.path = path }

    /// A namespace created by `ip netns add NAME`.
    public static func named(_ name: String) -> NetworkNamespace {
        NetworkNamespace(path: "/var/run/netns/\(name)")
    }

    /// The namespace of a process, such as a container's init.
    public static func process(_ pid: Int32) -> NetworkNamespace {
        NetworkNamespace(path: "/proc/\(pid)/ns/net")
    }

    /// Parses the CLI's `--namespace` value: a path if it contains `/`, else an `ip netns` name.
    public init(argument: String) {
        self = argument.contains("/") ? NetworkNamespace(path: argument) : .named(argument)
    }

    /// The resolv.conf that processes in this namespace read now: `ip netns exec` bind-mounts
    /// `/etc/netns/NAME/resolv.conf` when it exists; a process's own is under `/proc/PID/root`.
    public var resolvConfPath: String {
        let candidates = resolvConfCandidates
        return candidates.first { fileExists($0) } ?? candidates.last ?? "/etc/resolv.conf"
    }

    /// The files that can be this namespace's resolv.conf, the first existing one winning; a
    /// monitor watches them all, so `/etc/netns/NAME/resolv.conf` appearing or disappearing after
    /// start is followed.
    public var resolvConfCandidates: [String] {
        if let root = processRoot { return [root + "/etc/resolv.conf"] }
        if let name = ipNetnsName { return ["/etc/netns/\(name)/resolv.conf", "/etc/resolv.conf"] }
        return ["/etc/resolv.conf"]
    }

    /// systemd-resolved's upstream server list as processes in this namespace see it.
    public var resolvedUpstreamPath: String {
        (processRoot ?? "") + "/run/systemd/resolve/resolv.conf"
    }

    /// `NAME` of `/var/run/netns/NAME` or `/run/netns/NAME`.
    package var ipNetnsName: String? {
        guard path.hasPrefix("/var/run/netns/") || path.hasPrefix("/run/netns/"),
            let name = path.split(separator: "/").last, !name.isEmpty
        else { return nil }
        return String(name)
    }

    /// `/proc/PID/root` of a `/proc/PID/ns/net` path.
    private var processRoot: String? {
        processID.map { "/proc/\($0)/root" }
    }

    /// `/proc/PID/ns` of a `/proc/PID/ns/net` path: the process's other namespaces.
    package var processNamespaceDirectory: String? {
        processID.map { "/proc/\($0)/ns" }
    }

    /// `PID` of a `/proc/PID/ns/net` path.
    private var processID: Substring? {
        let components = path.split(separator: "/")
        guard components.count == 4, components[0] == "proc", components[2] == "ns", components[3] == "net" else {
            return nil
        }
        return components[1]
    }

    public var description: String { path }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

private func fileExists(_ path: String) -> Bool { access(path, F_OK) == 0 }
