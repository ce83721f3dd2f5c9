import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Ports on 127.0.0.1 that the kernel picks.
package enum FreePort {
    /// A port nobody listens on now, for a server that cannot be given port 0.
    package static func pick() throws -> Int {
        let (descriptor, port) = try bound(listening: false)
        close(descriptor)
        return port
    }

    /// A socket listening on a port of its own that nothing accepts on (the kernel still completes
    /// connections into its backlog), and the port; the caller closes it.
    package static func listener() throws -> (descriptor: Int32, port: Int) {
        try bound(listening: true)
    }

    private static func bound(listening: Bool) throws -> (descriptor: Int32, port: Int) {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw ExternalServerError.commandFailed("socket: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, length) == 0 && (!listening || listen(descriptor, 4) == 0)
                    && getsockname(descriptor, $0, &length) == 0
            }
        }
        guard bound else {
            let code = errno
            close(descriptor)
            throw ExternalServerError.commandFailed("cannot take a port on 127.0.0.1: errno \(code)")
        }
        return (descriptor, Int(UInt16(bigEndian: address.sin_port)))
    }
}
