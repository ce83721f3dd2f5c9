#if os(Linux)
// SOCK_DGRAM and SOCK_CLOEXEC come through the kernel-headers module: in the release build
// (scripts/build-release.sh) Glibc alone did not make them visible to this file.
import CNetReachLinux
import Glibc

/// What a program's `connect()` gets, asked of the kernel the way a program asks it: an unbound UDP
/// socket per family, connected to the destination. Connecting a UDP socket sends nothing on any
/// wire; it makes the kernel choose a route and a source address, exactly as for a TCP connect.
///
/// Why not a route lookup alone: an unbound socket's route is chosen in two stages. The kernel
/// first picks a source address, then routes with it, so `ip rule from ADDR`, IPv6 source-specific
/// routes (`default from PREFIX`) and `ip -6 rule from PREFIX` decide where the traffic goes; and
/// IPv6 (`ip6_dst_lookup_tail`) picks a source from any interface even when no route matches
/// without one. A lookup with no source (`ip route get ADDRESS`) sees none of that. The source this
/// socket learns (`getsockname`) is then asked about with `RTA_SRC` (`ip route get ADDRESS from
/// SOURCE`) for the route's details.
///
/// The socket connects to the monitored traffic's destination port (443 unless a monitor names
/// another), so rules that match ports (`ip rule ... dport`) see that flow; a UDP socket cannot show
/// rules that match the protocol (`ipproto tcp`), which ``RouteQuery`` asks the kernel about
/// separately.
struct SourceQuery: ~Copyable {
    private let sockets: [IPAddress.Family: Int32]
    /// Why a family has no socket (IPv6 disabled: `EAFNOSUPPORT`).
    private let unavailable: [IPAddress.Family: Int32]
    /// `/proc/sys/net/ipv4/fib_multipath_use_neigh`, opened in the same namespace (a `/proc/sys/net`
    /// file reads the namespace it was opened in), or -1.
    private let useNeighbourFile: Int32
    /// `/proc/sys/net/ipv4/ip_local_port_range` of the namespace (both families use it), or -1.
    private let portRangeFile: Int32
    /// The transport protocol of the traffic asked about.
    let transport: TransportProtocol
    /// The destination port of the traffic asked about.
    let port: UInt16

    /// Opens the sockets in the calling thread's namespace, or in the namespace open as `namespace`,
    /// for traffic of `transport` to `port`.
    init(
        namespace: (fd: Int32, path: String)?, transport: TransportProtocol = .tcp, port: UInt16 = 443
    ) throws(PathMonitorError) {
        var sockets: [IPAddress.Family: Int32] = [:]
        var unavailable: [IPAddress.Family: Int32] = [:]
        var useNeighbourFile: Int32 = -1
        var portRangeFile: Int32 = -1
        let open = { () throws(PathMonitorError) in
            for (family, domain) in [(IPAddress.Family.ipv4, AF_INET), (.ipv6, AF_INET6)] {
                let fd = socket(domain, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
                if fd >= 0 { sockets[family] = fd } else { unavailable[family] = errno }
            }
            useNeighbourFile = Glibc.open("/proc/sys/net/ipv4/fib_multipath_use_neigh", O_RDONLY | O_CLOEXEC)
            portRangeFile = Glibc.open("/proc/sys/net/ipv4/ip_local_port_range", O_RDONLY | O_CLOEXEC)
        }
        if let namespace {
            try NamespaceHandle.entering(namespace.fd, path: namespace.path, open)
        } else {
            try open()
        }
        self.sockets = sockets
        self.unavailable = unavailable
        self.useNeighbourFile = useNeighbourFile
        self.portRangeFile = portRangeFile
        self.transport = transport
        self.port = port
    }

    deinit {
        sockets.values.forEach { close($0) }
        if useNeighbourFile >= 0 { close(useNeighbourFile) }
        if portRangeFile >= 0 { close(portRangeFile) }
    }

    /// What one `connect()` got: the source the kernel chose, and the local port the socket was
    /// given (a UDP `connect` binds one from `ip_local_port_range` before it routes).
    struct Connection: Equatable {
        var source: IPAddress
        var localPort: UInt16 = 0
    }

    /// The source address the kernel chose for a connection to `destination` (at ``port``), or the
    /// error the `connect` failed with (`ENETUNREACH`, `EHOSTUNREACH`, `EACCES`, `EINVAL`, ...).
    func connect(to destination: IPAddress) -> Result<Connection, ConnectFailure> {
        source(for: destination)
    }

    /// The source port a client's connection gets, as rules that match `sport` see it: the first
    /// of the namespace's `ip_local_port_range`, read now (the kernel picks any port of the range;
    /// the first stands for them all). 32768, the kernel's default, when it cannot be read.
    func sourcePort() -> UInt16 {
        var bytes = [UInt8](repeating: 0, count: 32)
        let count = portRangeFile >= 0 ? pread(portRangeFile, &bytes, bytes.count, 0) : -1
        guard count > 0 else { return 32768 }
        return Self.firstPort(ofRange: bytes[0..<count]) ?? 32768
    }

    /// The first port of `ip_local_port_range`'s text (`"32768\t60999\n"`); `nil` when it is none.
    static func firstPort(ofRange text: some Collection<UInt8>) -> UInt16? {
        let digits = text.drop { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }
            .prefix { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
        guard !digits.isEmpty, digits.count <= 5 else { return nil }
        let value = digits.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
        return value > 0 && value <= Int(UInt16.max) ? UInt16(value) : nil
    }

    /// Whether the kernel leaves out a multipath leg to `family` whose gateway's neighbour entry is
    /// not valid: `net.ipv4.fib_multipath_use_neigh` in the namespace, read now (IPv4 only; `false`
    /// for IPv6, or when it cannot be read). Asked only of a route with several legs, so a lookup
    /// of a single-path route costs no read.
    func multipathUsesNeighbours(for family: IPAddress.Family) -> Bool {
        guard family == .ipv4, useNeighbourFile >= 0 else { return false }
        var byte: UInt8 = 0
        return pread(useNeighbourFile, &byte, 1, 0) == 1 && byte == UInt8(ascii: "1")
    }

    private func source(for destination: IPAddress) -> Result<Connection, ConnectFailure> {
        guard let fd = sockets[destination.family] else {
            return .failure(ConnectFailure(errno: unavailable[destination.family] ?? EAFNOSUPPORT))
        }
        // Dissolve the last association first: a UDP socket keeps the source its first connect
        // chose (the kernel binds it implicitly), so without this every later connect would be
        // routed from that address, even after it was removed or another became preferred.
        var unspecified = sockaddr()
        unspecified.sa_family = sa_family_t(AF_UNSPEC)
        _ = Glibc.connect(fd, &unspecified, socklen_t(MemoryLayout<sockaddr>.size))
        var storage = sockaddr_storage()
        let length = fill(&storage, with: destination)
        let connected = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, length) }
        }
        guard connected == 0 else { return .failure(ConnectFailure(errno: errno)) }
        var local = sockaddr_storage()
        var localLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let named = withUnsafeMutablePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &localLength) }
        }
        guard named == 0, let local = Self.address(of: local) else {
            return .failure(ConnectFailure(errno: named == 0 ? EAFNOSUPPORT : errno))
        }
        return .success(Connection(source: local.address, localPort: local.port))
    }

    private func fill(_ storage: inout sockaddr_storage, with destination: IPAddress) -> socklen_t {
        withUnsafeMutableBytes(of: &storage) { raw in
            if destination.family == .ipv4 {
                var address = sockaddr_in()
                address.sin_family = sa_family_t(AF_INET)
                address.sin_port = port.bigEndian
                withUnsafeMutableBytes(of: &address.sin_addr) { target in
                    destination.withUnsafeBytes { target.copyMemory(from: $0) }
                }
                withUnsafeBytes(of: address) { raw.copyMemory(from: $0) }
                return socklen_t(MemoryLayout<sockaddr_in>.size)
            }
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = port.bigEndian
            withUnsafeMutableBytes(of: &address.sin6_addr) { target in
                destination.withUnsafeBytes { target.copyMemory(from: $0) }
            }
            withUnsafeBytes(of: address) { raw.copyMemory(from: $0) }
            return socklen_t(MemoryLayout<sockaddr_in6>.size)
        }
    }

    private static func address(of storage: sockaddr_storage) -> (address: IPAddress, port: UInt16)? {
        let family = Int32(storage.ss_family)
        return withUnsafeBytes(of: storage) { raw -> (address: IPAddress, port: UInt16)? in
            switch family {
            case AF_INET:
                let address = raw.load(as: sockaddr_in.self)
                return withUnsafeBytes(of: address.sin_addr) { IPAddress(networkOrder: $0) }
                    .map { ($0, UInt16(bigEndian: address.sin_port)) }
            case AF_INET6:
                let address = raw.load(as: sockaddr_in6.self)
                return withUnsafeBytes(of: address.sin6_addr) { IPAddress(networkOrder: $0) }
                    .map { ($0, UInt16(bigEndian: address.sin6_port)) }
            default:
                return nil
            }
        }
    }
}

/// A `connect` that failed, with its `errno`.
struct ConnectFailure: Error, Equatable {
    var errno: Int32
}
#endif
