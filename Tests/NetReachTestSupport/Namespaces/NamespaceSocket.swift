import CNetReachLinux
import Foundation
import NetReachSystem

#if canImport(Glibc)
import Glibc
#endif

/// A socket of another network namespace: made on a thread of our own that enters the namespace
/// with `setns` and leaves it again. The socket stays in the namespace it was made in, so it can
/// then be bound, connected and used from any thread; no Swift concurrency thread ever changes
/// namespace.
///
/// ```swift
/// let fd = try NamespaceSocket.tcp(inNamespace: lab.peerName)   // bind, listen or connect it here
/// ```
package enum NamespaceSocket {
    /// A TCP (IPv4) socket, close-on-exec, of the `ip netns` namespace `name`.
    package static func tcp(inNamespace name: String) throws(LabError) -> Int32 {
        try tcp(inNamespaceAt: "/var/run/netns/\(name)")
    }

    /// A TCP (IPv4) socket, close-on-exec, of the namespace whose file is at `path`.
    package static func tcp(inNamespaceAt path: String) throws(LabError) -> Int32 {
        let result = Locked<Result<Int32, LabError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Thread {
            result.withLock { $0 = Result { () throws(LabError) in try tcpHere(inNamespaceAt: path) } }
            done.signal()
        }.start()
        done.wait()
        return try result.withLock { $0! }.get()
    }

    private static func tcpHere(inNamespaceAt path: String) throws(LabError) -> Int32 {
        let target = open(path, O_RDONLY | O_CLOEXEC)
        guard target >= 0 else { throw .systemCall("open \(path)", String(cString: strerror(errno))) }
        defer { close(target) }
        let home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)
        guard home >= 0 else { throw .systemCall("open /proc/thread-self/ns/net", String(cString: strerror(errno))) }
        defer { close(home) }
        guard cnr_setns_net(target) == 0 else { throw .systemCall("setns \(path)", String(cString: strerror(errno))) }
        defer { _ = cnr_setns_net(home) }
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .systemCall("socket", String(cString: strerror(errno))) }
        return fd
    }
}
