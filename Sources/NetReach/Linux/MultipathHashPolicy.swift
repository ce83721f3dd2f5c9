#if os(Linux)
import Glibc

/// How the kernel spreads the flows of a multipath route over its legs: by addresses only, or by
/// ports too. Read from `net.ipv4.fib_multipath_hash_policy` and `net.ipv6.fib_multipath_hash_policy`
/// (with `..._hash_fields` for policy 3) of the watched namespace.
///
/// For a connection this host makes (no packet to dissect yet: `fib_multipath_hash` and
/// `rt6_multipath_hash` with no `skb`), policy 0 hashes the addresses (IPv6 adds the flow label and
/// the protocol, both fixed for one kind of connection), policy 2 does the same (its inner headers
/// exist only for forwarded tunnel packets), policy 1 adds the ports, and policy 3 hashes the
/// fields its mask names. So under 0, 2, or 3 without port fields, every connection to one
/// destination takes the one leg the kernel's lookup names; under 1, or 3 with ports, connections
/// from different source ports spread over the legs.
enum MultipathHashPolicy: Equatable, Sendable {
    /// Every flow to one destination takes one leg.
    case addresses
    /// Flows to one destination spread over the legs by their ports.
    case ports

    /// `policy` and `fields` as the sysctl files hold them (`fields` may be hexadecimal, `0x0037`);
    /// an unknown policy counts as ``ports``: the legs stay listed, as they were before policies
    /// were read.
    init(policy: Int, fields: UInt32?) {
        switch policy {
        case 0, 2: self = .addresses
        case 3:
            // FIB_MULTIPATH_HASH_FIELD_SRC_PORT (0x10) and _DST_PORT (0x20); the inner ones
            // (0x400, 0x800) read a tunnel's inner header, which a local connection does not have.
            // The kernel's default mask (0x0037) has both.
            self = (fields ?? 0x37) & 0x30 != 0 ? .ports : .addresses
        default: self = .ports
        }
    }

    /// Reads one of the sysctl files' text ("1\n", "0x0037\n").
    static func number(_ text: Substring) -> Int? {
        let trimmed = text.filter { !$0.isWhitespace }
        if trimmed.hasPrefix("0x") || trimmed.hasPrefix("0X") { return Int(trimmed.dropFirst(2), radix: 16) }
        return Int(trimmed)
    }
}

/// The multipath sysctl files of the watched namespace, opened there once (a `/proc/sys/net` file
/// reads the namespace it was opened in, whatever the reader's namespace is later) and read with
/// `pread` whenever asked: a sysctl write sends no netlink message, so the value is read afresh
/// at every lookup that needs it and on the engine's checks while it matters
/// (``KernelQueries``). A file that cannot be opened (an old kernel without policy 3's fields, a
/// kernel without IPv6) reads as absent.
final class MultipathSysctls: Sendable {
    private let policyFiles: [IPAddress.Family: Int32]
    private let fieldFiles: [IPAddress.Family: Int32]

    /// Opens the files in the calling thread's namespace, or in the namespace open as `namespace`.
    init(namespace: (fd: Int32, path: String)?) throws(PathMonitorError) {
        var policyFiles: [IPAddress.Family: Int32] = [:]
        var fieldFiles: [IPAddress.Family: Int32] = [:]
        let open = { () throws(PathMonitorError) in
            for (family, directory) in [(IPAddress.Family.ipv4, "ipv4"), (.ipv6, "ipv6")] {
                let policy = Glibc.open("/proc/sys/net/\(directory)/fib_multipath_hash_policy", O_RDONLY | O_CLOEXEC)
                if policy >= 0 { policyFiles[family] = policy }
                let fields = Glibc.open("/proc/sys/net/\(directory)/fib_multipath_hash_fields", O_RDONLY | O_CLOEXEC)
                if fields >= 0 { fieldFiles[family] = fields }
            }
        }
        if let namespace {
            try NamespaceHandle.entering(namespace.fd, path: namespace.path, open)
        } else {
            try open()
        }
        self.policyFiles = policyFiles
        self.fieldFiles = fieldFiles
    }

    deinit {
        policyFiles.values.forEach { close($0) }
        fieldFiles.values.forEach { close($0) }
    }

    /// The policy for `family` now: two `pread`s (one under policies other than 3). `nil` when
    /// the file cannot be read (no multipath support, or no IPv6).
    func policy(for family: IPAddress.Family) -> MultipathHashPolicy? {
        guard let policy = policyFiles[family].flatMap(Self.read).flatMap(MultipathHashPolicy.number) else {
            return nil
        }
        let fields = policy == 3 ? fieldFiles[family].flatMap(Self.read).flatMap(MultipathHashPolicy.number) : nil
        return MultipathHashPolicy(policy: policy, fields: fields.map { UInt32(truncatingIfNeeded: $0) })
    }

    private static func read(_ fd: Int32) -> Substring? {
        var bytes = [UInt8](repeating: 0, count: 32)
        let count = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return nil }
        return Substring(String(decoding: bytes[0..<count], as: UTF8.self))
    }
}
#endif

#if os(Linux)
extension RouteQuery {
    /// The source ports the kernel is asked about for ``legsTaken(to:from:among:transport:port:on:buffer:)``:
    /// ephemeral ones, fixed so that the same kernel state gives the same answer.
    static let sampledPorts: [UInt16] = (0..<16).map { 40_000 + 997 * $0 }

    /// The legs of a multipath route that connections from `source` to `destination` take when the
    /// hash reads ports: the kernel asked `ip route get DESTINATION from SOURCE ipproto PROTOCOL
    /// sport P dport PORT` (the monitored traffic's protocol and port) for each of
    /// ``sampledPorts``, in one datagram. Those of `legs` its answers name, in `legs`' order.
    ///
    /// Asked, not worked out: the kernel decides more than the hash. Linux 6.18 prefers the legs
    /// whose source address is the connection's (`fib_select_multipath`), so legs through other
    /// interfaces carry none of a connected socket's flows, whatever the policy; older kernels do
    /// not. Sixteen ports name every leg of equal weight with probability 1 - 2^-15 for two legs.
    static func legsTaken(
        to destination: IPAddress, from source: IPAddress, among legs: [RouteLookup.NextHop],
        transport: TransportProtocol, port: UInt16, on requests: inout NetlinkSocket,
        buffer: UnsafeMutableRawBufferPointer
    ) throws(PathMonitorError) -> [RouteLookup.NextHop] {
        var message: [UInt8] = []
        var pending: [UInt32] = []
        for sampled in sampledPorts {
            requests.sequence &+= 1
            pending.append(requests.sequence)
            appendRequest(
                to: &message, for: destination, source: source, interfaceIndex: nil,
                packet: Packet(transport: transport, sourcePort: sampled, destinationPort: port),
                sequence: requests.sequence)
        }
        try requests.send(message)
        var taken: [(interfaceIndex: Int, gateway: IPAddress?)] = []
        while !pending.isEmpty {
            switch try requests.receive(into: buffer) {
            case .bytes(let count):
                let received = UnsafeRawBufferPointer(rebasing: buffer[0..<count])
                pending.removeAll { sequence in
                    guard let answer = answer(in: received, sequence: sequence, ticksPerSecond: 100) else {
                        return false
                    }
                    if case .route(let route) = answer.lookup,
                        !taken.contains(where: { $0 == (route.interfaceIndex, route.gateway) })
                    {
                        taken.append((route.interfaceIndex, route.gateway))
                    }
                    return true
                }
            case .overrun:
                continue
            case .wouldBlock:
                guard try requests.waitReadable(within: answerTimeout) else {
                    throw .dumpFailed("no answer to a route lookup within \(answerTimeout)")
                }
            }
        }
        return legs.filter { leg in taken.contains { $0 == (leg.interfaceIndex, leg.gateway) } }
    }
}
#endif
