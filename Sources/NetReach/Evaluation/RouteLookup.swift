/// The kernel's answer to "how would a packet to this address leave?": the result of a route
/// lookup (`RTM_GETROUTE`, what `ip route get ADDRESS` prints), which sends nothing anywhere.
///
/// The kernel's answer already applies everything that decides a packet's route: policy rules
/// (`ip rule`, `suppress_prefixlength`, kill-switch `prohibit` rules), every table, route types,
/// nexthop objects, metrics and insertion order, expiry, and source address selection from any
/// interface. The Linux backend asks after every batch of routing changes and stores the answer in
/// ``SystemSnapshot/routeLookups``; tests and simulated networks can set answers by hand:
///
/// ```swift
/// // What `ip route get 8.8.8.8` says with a wg-quick tunnel up: dev wg0 table 51820 src 10.9.0.2
/// snapshot.routeLookups[.ipv4] = .route(.init(interfaceIndex: 5, source: IPAddress("10.9.0.2"), table: 51820))
/// // A kill switch (`ip rule add prohibit`): RTNETLINK answers: Permission denied
/// snapshot.routeLookups[.ipv4] = .refused(.prohibit)
/// ```
public enum RouteLookup: Sendable, Hashable, CustomStringConvertible {
    /// A route that carries traffic: packets leave through ``KernelRoute/interfaceIndex``.
    case route(KernelRoute)
    /// A route or rule that refuses traffic matched (`unreachable`, `blackhole`, `prohibit`).
    case refused(Refusal)
    /// No route matches (`ENETUNREACH`, also what a `throw` route with nothing behind it gives).
    case noRoute
    /// The lookup failed for another reason (the `errno` the kernel answered with).
    case failed(errno: Int32)

    /// A route the kernel would use.
    public struct KernelRoute: Sendable, Hashable {
        /// The interface packets leave through.
        public var interfaceIndex: Int
        /// The next hop, or `nil` when the destination is on-link (a device route, a tunnel).
        public var gateway: IPAddress?
        /// The source address the kernel would choose, possibly from another interface
        /// (unnumbered links, prefix delegation); `nil` when it has none to offer.
        public var source: IPAddress?
        /// The routing table the route came from (254 is `main`).
        public var table: UInt32
        /// Whether the destination is one of this host's own addresses (route type `local`).
        public var isLocal: Bool
        /// Every leg of a multipath (ECMP) route, ``interfaceIndex`` and ``gateway`` among them
        /// (the one the kernel picked for this flow); empty for a route with one next hop. Each
        /// flow takes one leg, chosen by a hash, so for many destinations all of them carry
        /// traffic. For one destination (a per-destination monitor) the Linux backend leaves them
        /// out when the kernel's hash policy (`net.ipv4.fib_multipath_hash_policy`, and IPv6's)
        /// ignores ports: then every connection to it takes the leg ``interfaceIndex`` names.
        public var nextHops: [NextHop]

        /// Creates a route answer.
        public init(
            interfaceIndex: Int, gateway: IPAddress? = nil, source: IPAddress? = nil,
            table: UInt32 = SystemSnapshot.DefaultRoute.mainTable, isLocal: Bool = false,
            nextHops: [NextHop] = []
        ) {
            self.interfaceIndex = interfaceIndex
            self.gateway = gateway
            self.source = source
            self.table = table
            self.isLocal = isLocal
            self.nextHops = nextHops
        }
    }

    /// One leg of a multipath route: `ip route`'s `nexthop via GATEWAY dev DEVICE`.
    public struct NextHop: Sendable, Hashable {
        /// The interface this leg leaves through.
        public var interfaceIndex: Int
        /// The leg's next hop, or `nil` when it is a device route.
        public var gateway: IPAddress?
        /// Whether the kernel sends nothing through this leg now (`dead` or `linkdown`).
        public var isDead: Bool

        /// Creates a leg.
        public init(interfaceIndex: Int, gateway: IPAddress? = nil, isDead: Bool = false) {
            self.interfaceIndex = interfaceIndex
            self.gateway = gateway
            self.isDead = isDead
        }
    }

    /// How the kernel refuses traffic, with the error a program's `connect` or `sendto` gets.
    public enum Refusal: String, Sendable, Hashable, Codable, CustomStringConvertible {
        /// An `unreachable` route: `EHOSTUNREACH`, "No route to host".
        case unreachable
        /// A `blackhole` route: packets are dropped silently (`EINVAL` to a lookup).
        case blackhole
        /// A `prohibit` route or rule: `EACCES`, "Permission denied".
        case prohibit

        public var description: String { rawValue }
    }

    /// Reads a lookup's error the way the kernel means it: `ENETUNREACH` is no route,
    /// `EHOSTUNREACH`/`EINVAL`/`EACCES` are refusing routes or rules.
    public init(errno code: Int32) {
        switch code {
        case 101: self = .noRoute // ENETUNREACH
        case 113: self = .refused(.unreachable) // EHOSTUNREACH
        case 22: self = .refused(.blackhole) // EINVAL
        case 13: self = .refused(.prohibit) // EACCES
        default: self = .failed(errno: code)
        }
    }

    public var description: String {
        switch self {
        case .route(let route):
            var text = "dev #\(route.interfaceIndex)"
            if let gateway = route.gateway { text = "via \(gateway) " + text }
            if let source = route.source { text += " src \(source)" }
            if !route.nextHops.isEmpty { text += " multipath (\(route.nextHops.count) legs)" }
            return text + " table \(route.table)" + (route.isLocal ? " local" : "")
        case .refused(let refusal): return "refused (\(refusal))"
        case .noRoute: return "no route"
        case .failed(let code): return "lookup failed (errno \(code))"
        }
    }
}
