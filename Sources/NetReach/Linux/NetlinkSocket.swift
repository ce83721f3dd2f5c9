#if os(Linux)
import CNetReachLinux
import Glibc
import NetReachSystem

/// A NETLINK_ROUTE socket: either subscribed to link, address, route, rule and nexthop changes of
/// both families (the *events* socket), or joined to no group (the *requests* socket, for dumps and
/// route lookups, whose buffer a flood of notifications can never fill). Thin: it opens, joins,
/// sends and receives; parsing and state live elsewhere.
struct NetlinkSocket: ~Copyable {
    let fd: Int32
    private(set) var portID: UInt32 = 0
    /// The last request's sequence number; each request takes the next (`&+= 1`).
    var sequence: UInt32 = 1

    /// What a socket is for.
    enum Role { case events, requests }

    /// Opens a socket for `role` in the calling thread's network namespace, or in the namespace
    /// open as `namespace` (entered on this thread with setns and left again, so only the socket
    /// stays bound to it).
    /// `receiveBufferSize` applies to the events socket (a requests socket keeps the kernel's
    /// default: the kernel sends the next part of a dump only when the previous one has been read).
    init(_ role: Role, namespace: (fd: Int32, path: String)?, receiveBufferSize: Int32) throws(PathMonitorError) {
        let fd: Int32
        if let namespace {
            fd = try Self.openInNamespace(namespace.fd, path: namespace.path)
        } else {
            fd = try Self.openSocket()
        }
        do {
            portID = try Self.configure(fd, role: role, receiveBufferSize: receiveBufferSize)
        } catch {
            close(fd)
            throw error
        }
        self.fd = fd
    }

    private static func openSocket() throws(PathMonitorError) -> Int32 {
        let fd = socket(
            AF_NETLINK, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue),
            NETLINK_ROUTE)
        guard fd >= 0 else { throw .netlinkFailed(operation: "socket", errno: errno) }
        return fd
    }

    /// Sizes the receive buffer and joins the multicast groups; returns the kernel-assigned port id.
    private static func configure(_ fd: Int32, role: Role, receiveBufferSize: Int32) throws(PathMonitorError) -> UInt32
    {
        var address = sockaddr_nl()
        address.nl_family = sa_family_t(AF_NETLINK)
        if role == .events {
            // Room for bursts; as root SO_RCVBUFFORCE goes past rmem_max. An overrun still forces a resync.
            var size = receiveBufferSize
            if setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, socklen_t(MemoryLayout<Int32>.size)) != 0 {
                _ = setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
            }
            // Neighbours too: a router that stops answering makes the kernel route via another one
            // with no route message (IPv6 router reachability, IPv4 `fib_multipath_use_neigh`).
            address.nl_groups = UInt32(
                RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR | RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_ROUTE
                    | RTMGRP_NEIGH)
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_nl>.size))
            }
        }
        guard bound == 0 else { throw .netlinkFailed(operation: "bind", errno: errno) }
        if role == .events {
            // Rules, nexthops and per-interface settings (`ignore_routes_with_linkdown`) change
            // the kernel's route choice without any route message (deleting a nexthop object
            // removes its routes with only RTM_DELNEXTHOP). Groups past 31 can only be joined this
            // way; kernels before 5.3 have no nexthop group, and then there are no nexthop objects
            // to miss.
            for group in [
                RTNLGRP_IPV4_RULE, RTNLGRP_IPV6_RULE, RTNLGRP_IPV4_NETCONF, RTNLGRP_IPV6_NETCONF, RTNLGRP_NEXTHOP,
            ] {
                var number = Int32(group.rawValue)
                if setsockopt(fd, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &number, socklen_t(MemoryLayout<Int32>.size))
                    != 0,
                    group != RTNLGRP_NEXTHOP
                {
                    throw .netlinkFailed(operation: "join group \(group.rawValue)", errno: errno)
                }
            }
        }
        var length = socklen_t(MemoryLayout<sockaddr_nl>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return address.nl_pid
    }

    deinit { close(fd) }

    private static func openInNamespace(_ target: Int32, path: String) throws(PathMonitorError) -> Int32 {
        try NamespaceHandle.entering(target, path: path) { () throws(PathMonitorError) in try openSocket() }
    }

    /// Kinds of dump the monitor needs, in the order it asks for them: nexthop objects before the
    /// routes that name them.
    enum Dump: CaseIterable {
        case links, addresses, nexthops, routes

        var requestType: UInt16 {
            switch self {
            case .links: 18
            case .addresses: 22
            case .nexthops: 106
            case .routes: 26
            }
        } // RTM_GET*
        /// ifinfomsg is 16 bytes, ifaddrmsg 8, nhmsg 8, rtmsg 12; all zero = every family.
        var bodySize: Int {
            switch self {
            case .links: 16
            case .addresses: 8
            case .nexthops: 8
            case .routes: 12
            }
        }
    }

    /// Sends a dump request and returns its sequence number.
    mutating func requestDump(_ dump: Dump) throws(PathMonitorError) -> UInt32 {
        sequence &+= 1
        let length = RtnetlinkParser.headerSize + dump.bodySize
        var request = [UInt8](repeating: 0, count: length)
        request.withUnsafeMutableBytes { raw in
            raw.storeBytes(of: UInt32(length), toByteOffset: 0, as: UInt32.self)
            raw.storeBytes(of: dump.requestType, toByteOffset: 4, as: UInt16.self)
            raw.storeBytes(of: UInt16(NLM_F_REQUEST | NLM_F_DUMP), toByteOffset: 6, as: UInt16.self)
            raw.storeBytes(of: sequence, toByteOffset: 8, as: UInt32.self)
        }
        try send(request)
        return sequence
    }

    /// Sends one request whose sequence number is already in it. The kernel answers (or queues
    /// the first part of a dump) before the call returns; an unconnected netlink socket's datagram
    /// goes to the kernel.
    func send(_ request: [UInt8]) throws(PathMonitorError) {
        let sent = request.withUnsafeBytes { raw in
            Result { () throws(SystemError) in try SystemCall.writeAll(fd, raw) }
        }
        do throws(SystemError) { try sent.get() } catch {
            throw .netlinkFailed(operation: "send", errno: error.code)
        }
    }

    /// Receives one datagram into `buffer`: its size, nothing queued, or an overrun (ENOBUFS).
    func receive(into buffer: UnsafeMutableRawBufferPointer) throws(PathMonitorError) -> SystemCall.Received {
        do throws(SystemError) { return try SystemCall.receive(fd, into: buffer) } catch {
            throw .netlinkFailed(operation: "recv", errno: error.code)
        }
    }

    /// Has the kernel drop, before they are queued, the route notifications `filter` drops
    /// (``RouteNotificationFilter``); `nil` takes any filter off, so every message is read.
    func filter(_ filter: RouteNotificationFilter?) throws(PathMonitorError) {
        let instructions = filter?.instructions ?? []
        let result = instructions.withUnsafeBytes {
            cnr_set_socket_filter(fd, $0.baseAddress, UInt16(instructions.count))
        }
        guard result == 0 else { throw .netlinkFailed(operation: "attach a socket filter", errno: errno) }
    }

    /// Waits up to `timeout` for something to read; `false` when the time ran out.
    func waitReadable(within timeout: Duration) throws(PathMonitorError) -> Bool {
        do throws(SystemError) {
            return try SystemCall.poll(fd, events: Int16(POLLIN), timeout: timeout) != 0
        } catch {
            throw .netlinkFailed(operation: "poll", errno: error.code)
        }
    }
}
#endif
