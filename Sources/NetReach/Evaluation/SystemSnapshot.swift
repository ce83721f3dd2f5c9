/// Everything the evaluator needs to know about the system's network state, and nothing more:
/// links, their addresses, default routes, the kernel's answer to "how would a packet to the
/// internet leave?" per family (``routeLookups``), and the configured nameservers.
///
/// The Linux backend keeps one up to date from rtnetlink and resolv.conf; a simulated network
/// (`NetReachTesting`) builds them by hand. Fixtures read like `ip addr`/`ip route` output:
///
/// ```swift
/// let snapshot = SystemSnapshot(
///     links: [.init(index: 2, name: "eth0", isUp: true, hasCarrier: true)],
///     addresses: [.init(interfaceIndex: 2, address: IPAddress("192.0.2.10")!, prefixLength: 24)],
///     defaultRoutes: [.init(interfaceIndex: 2, gateway: IPAddress("192.0.2.1")!)],
///     nameservers: [IPAddress("192.0.2.53")!]
/// )
/// let path = PathEvaluator.evaluate(snapshot)   // satisfied via eth0(wiredEthernet) ...
/// ```
public struct SystemSnapshot: Sendable, Hashable {
    /// A network interface as the kernel reports it (RTM_NEWLINK), plus what sysfs says about it.
    public struct Link: Sendable, Hashable {
        /// Kernel interface index.
        public var index: Int
        /// Interface name.
        public var name: String { didSet { classify() } }
        /// `IFF_UP`: administratively up.
        public var isUp: Bool
        /// `IFF_RUNNING`: the link has carrier and is operational. `IFF_LOWER_UP` alone is not
        /// enough: a veth shows `LOWER_UP` while still `NO-CARRIER` (seen on this kernel).
        public var hasCarrier: Bool
        /// `IFF_LOOPBACK`.
        public var isLoopback: Bool { didSet { classify() } }
        /// The link-layer type (`ARPHRD_*`; 1 is Ethernet).
        public var hardwareType: UInt16 { didSet { classify() } }
        /// The driver kind from `IFLA_INFO_KIND` (`veth`, `bridge`, `tun`, `wireguard`, ...), if any.
        public var kind: String? { didSet { classify() } }
        /// `DEVTYPE` from sysfs `uevent` (`wlan`, `wwan`, `bridge`, ...), if readable.
        public var deviceType: String? { didSet { classify() } }
        /// Whether sysfs shows `wireless` or `phy80211` for the interface.
        public var isWireless: Bool { didSet { classify() } }
        /// The type the kernel's and sysfs' facts above give (``InterfaceClassification/automatic``),
        /// worked out once when the link is made or one of those facts changes, not on every
        /// evaluation; a classification's overrides by name apply on top.
        public private(set) var automaticType: InterfaceType = .other

        /// Ethernet, the most common `hardwareType`.
        public static let ethernetHardwareType: UInt16 = 1
        /// Loopback's `hardwareType` (`ARPHRD_LOOPBACK`).
        public static let loopbackHardwareType: UInt16 = 772

        /// Creates a link.
        public init(
            index: Int, name: String, isUp: Bool = true, hasCarrier: Bool = true, isLoopback: Bool = false,
            hardwareType: UInt16 = Link.ethernetHardwareType, kind: String? = nil, deviceType: String? = nil,
            isWireless: Bool = false
        ) {
            self.index = index
            self.name = name
            self.isUp = isUp
            self.hasCarrier = hasCarrier
            self.isLoopback = isLoopback
            self.hardwareType = hardwareType
            self.kind = kind
            self.deviceType = deviceType
            self.isWireless = isWireless
            classify()
        }

        private mutating func classify() { automaticType = InterfaceClassification.automaticType(of: self) }

        /// Up with carrier: able to carry traffic.
        public var isOperational: Bool { isUp && hasCarrier }
    }

    /// An address assigned to an interface (RTM_NEWADDR).
    public struct Address: Sendable, Hashable {
        /// The interface the address is on.
        public var interfaceIndex: Int
        /// The local address.
        public var address: IPAddress
        /// The prefix length.
        public var prefixLength: UInt8
        /// The kernel's scope (`RT_SCOPE_*`): 0 universe (global), 253 link, 254 host.
        public var scope: UInt8
        /// IPv6 duplicate address detection has not finished (`IFA_F_TENTATIVE`) and the address is
        /// not optimistic (`IFA_F_OPTIMISTIC`, RFC 4429): the kernel does not use it as a source.
        public var isTentative: Bool
        /// IPv6 duplicate address detection failed (`IFA_F_DADFAILED`).
        public var isDADFailed: Bool

        /// Scope value for global addresses.
        public static let globalScope: UInt8 = 0

        /// Creates an address.
        public init(
            interfaceIndex: Int, address: IPAddress, prefixLength: UInt8, scope: UInt8 = Address.globalScope,
            isTentative: Bool = false, isDADFailed: Bool = false
        ) {
            self.interfaceIndex = interfaceIndex
            self.address = address
            self.prefixLength = prefixLength
            self.scope = scope
            self.isTentative = isTentative
            self.isDADFailed = isDADFailed
        }

        /// Whether the address can source traffic beyond the link: not tentative, DAD not failed,
        /// and global in scope (IPv6) or not host-scoped (IPv4).
        public var isUsable: Bool {
            guard !isTentative, !isDADFailed else { return false }
            switch address.family {
            case .ipv4: return scope != 254
            case .ipv6: return scope == Address.globalScope
            }
        }

        /// Whether `other` lies inside this address's prefix (the on-link network).
        public func contains(_ other: IPAddress) -> Bool {
            other.family == address.family && other.isIn(prefix: address.bytes, length: Int(prefixLength))
        }

        /// The kernel identifies an address by interface, local address and prefix length.
        struct Key: Hashable {
            var interfaceIndex: Int
            var address: IPAddress
            var prefixLength: UInt8
        }
        var key: Key { Key(interfaceIndex: interfaceIndex, address: address, prefixLength: prefixLength) }
    }

    /// A unicast default route (destination prefix length 0) in the main table, one per next hop.
    public struct DefaultRoute: Sendable, Hashable {
        /// The route's address family.
        public var family: IPAddress.Family
        /// The outgoing interface.
        public var interfaceIndex: Int
        /// The next hop, or `nil` for a device route (`ip route add default dev tun0`).
        public var gateway: IPAddress?
        /// The route's priority (`metric`); lower is preferred.
        public var metric: UInt32
        /// The routing table (254 is `main`).
        public var table: UInt32

        /// The main routing table's id.
        public static let mainTable: UInt32 = 254

        /// A total order: metric, then interface index, then IPv4 before IPv6, then gateway bytes.
        /// Ties must not fall back on a set's hash order (NetworkManager gives its IPv4 and IPv6
        /// defaults the same metric), or equal snapshots would give paths that differ in order only.
        func isPreferred(over other: DefaultRoute) -> Bool {
            if metric != other.metric { return metric < other.metric }
            if interfaceIndex != other.interfaceIndex { return interfaceIndex < other.interfaceIndex }
            if family != other.family { return family == .ipv4 }
            guard let gateway, let otherGateway = other.gateway else { return gateway == nil && other.gateway != nil }
            return gateway.precedes(otherGateway)
        }

        /// Creates a default route. The family defaults to the gateway's, or IPv4 without one.
        public init(
            family: IPAddress.Family? = nil, interfaceIndex: Int, gateway: IPAddress? = nil,
            metric: UInt32 = 0, table: UInt32 = DefaultRoute.mainTable
        ) {
            self.family = family ?? gateway?.family ?? .ipv4
            self.interfaceIndex = interfaceIndex
            self.gateway = gateway
            self.metric = metric
            self.table = table
        }
    }

    /// Links by interface index.
    public var links: [Int: Link]
    /// Addresses, keyed the way the kernel identifies them.
    var addressTable: [Address.Key: Address]
    /// Default routes (a set: the kernel never reports two identical next hops).
    public var defaultRoutes: Set<DefaultRoute>
    /// Nameservers from resolv.conf, in file order.
    public var nameservers: [IPAddress]
    /// The kernel's route lookup for one global address per family (see ``RouteLookup``): what
    /// decides which interface, gateway and source traffic to the internet really uses.
    ///
    /// The Linux backend always fills both families. A hand-built snapshot may leave a family out:
    /// the evaluator then uses ``emulatedRouteLookup(for:through:)``, the main table's answer alone.
    public var routeLookups: [IPAddress.Family: RouteLookup]
    /// The kernel's answer for traffic bound to one interface (`ip route get ADDRESS oif DEV`, what
    /// a socket with `SO_BINDTODEVICE` gets), per family and interface index: how a monitor that
    /// requires or prohibits interface types is judged when the unbound route uses an excluded one,
    /// as Network.framework scopes such a connection to an allowed interface.
    ///
    /// The Linux backend asks for every other interface that is up with carrier and an address of
    /// the family, whenever the unbound lookup finds a route; a missing entry then means no route.
    public var scopedRouteLookups: [IPAddress.Family: [Int: RouteLookup]]

    /// The kernel's route lookups for the destinations of per-destination monitors
    /// (``PathMonitor/init(destination:port:protocol:requiredInterfaceType:prohibitedInterfaceTypes:classification:namespace:)``),
    /// by address. A destination missing here is answered by ``emulatedRouteLookup(to:)``.
    public var destinationLookups: [IPAddress: RouteLookup] = [:]

    /// Set when the source can no longer observe the system (the watched network namespace was
    /// deleted): the path is then unsatisfied with ``UnsatisfiedReason/monitorUnavailable`` and
    /// ``PathMonitor/failure`` holds this error. A simulated network can set it to test how code
    /// copes:
    ///
    /// ```swift
    /// network.update { $0.observationFailure = .namespaceGone(path: "/var/run/netns/blue") }
    /// ```
    public var observationFailure: PathMonitorError?

    /// Creates a snapshot from plain lists.
    public init(
        links: [Link] = [], addresses: [Address] = [], defaultRoutes: [DefaultRoute] = [],
        nameservers: [IPAddress] = [], routeLookups: [IPAddress.Family: RouteLookup] = [:],
        scopedRouteLookups: [IPAddress.Family: [Int: RouteLookup]] = [:], observationFailure: PathMonitorError? = nil
    ) {
        self.observationFailure = observationFailure
        self.links = Dictionary(links.map { ($0.index, $0) }, uniquingKeysWith: { _, last in last })
        self.addressTable = Dictionary(addresses.map { ($0.key, $0) }, uniquingKeysWith: { _, last in last })
        self.defaultRoutes = Set(defaultRoutes)
        self.nameservers = nameservers
        self.routeLookups = routeLookups
        self.scopedRouteLookups = scopedRouteLookups
    }

    /// The route lookup for `family`: the kernel's answer when the snapshot has one, else
    /// ``emulatedRouteLookup(for:through:)``.
    public func routeLookup(for family: IPAddress.Family) -> RouteLookup {
        routeLookups[family] ?? emulatedRouteLookup(for: family)
    }

    /// The route lookup for one destination: the kernel's answer when the snapshot has one, else
    /// ``emulatedRouteLookup(to:)``.
    public func routeLookup(to destination: IPAddress) -> RouteLookup {
        destinationLookups[destination] ?? emulatedRouteLookup(to: destination)
    }

    /// What the kernel would answer for `destination` in a network with no policy routing: a
    /// loopback address or one of this host's own is local, through the loopback interface; an
    /// address inside the prefix of an interface's address is on that link (no gateway);
    /// anything else goes the way of the family's internet lookup (``routeLookup(for:)``).
    public func emulatedRouteLookup(to destination: IPAddress) -> RouteLookup {
        let own = addressTable.values.first { $0.address == destination }
        if destination.isLoopback || own != nil {
            guard let loopback = links.values.filter({ $0.isLoopback }).min(by: { $0.index < $1.index }) else {
                return .noRoute
            }
            return .route(.init(interfaceIndex: loopback.index, source: destination, table: 255, isLocal: true))
        }
        let onLink = addressTable.values
            .filter {
                $0.address.family == destination.family && $0.isUsable
                    && links[$0.interfaceIndex]?.isOperational == true
                    && $0.contains(destination)
            }
            .max { ($0.prefixLength, -$0.interfaceIndex) < ($1.prefixLength, -$1.interfaceIndex) }
        if let onLink {
            return .route(.init(interfaceIndex: onLink.interfaceIndex, source: onLink.address))
        }
        return routeLookup(for: destination.family)
    }

    /// The lookup for `family` bound to one interface: the kernel's answer when the snapshot has
    /// kernel answers for the family (none stored: no route), else the emulated one.
    public func scopedRouteLookup(for family: IPAddress.Family, interfaceIndex: Int) -> RouteLookup {
        guard routeLookups[family] != nil else { return emulatedRouteLookup(for: family, through: interfaceIndex) }
        return scopedRouteLookups[family]?[interfaceIndex] ?? .noRoute
    }

    /// What a kernel with nothing but these main-table default routes would answer: the route with
    /// the lowest metric (then the lowest interface index) through an interface that is up with
    /// carrier and has a usable address of the family, with that address as the source.
    /// `interfaceIndex` limits the answer to routes through that interface.
    ///
    /// For hand-built snapshots (fixtures, ``PathSource``s of your own) that do not model policy
    /// routing. The Linux backend always has the kernel's answers for the internet lookups; a
    /// destination's comes from here only until its first lookup arrives.
    public func emulatedRouteLookup(for family: IPAddress.Family, through interfaceIndex: Int? = nil) -> RouteLookup {
        var best: (route: DefaultRoute, source: IPAddress)?
        for route in defaultRoutes where route.family == family && route.table == DefaultRoute.mainTable {
            if let interfaceIndex, route.interfaceIndex != interfaceIndex { continue }
            guard links[route.interfaceIndex]?.isOperational == true,
                let source = addressTable.values.first(where: {
                    $0.interfaceIndex == route.interfaceIndex && $0.address.family == family && $0.isUsable
                })?.address
            else { continue }
            if let current = best?.route, !route.isPreferred(over: current) { continue }
            best = (route, source)
        }
        guard let best else { return .noRoute }
        return .route(
            .init(interfaceIndex: best.route.interfaceIndex, gateway: best.route.gateway, source: best.source))
    }

    /// The interfaces holding a usable address of `family` (``Address/isUsable``), sorted for
    /// ``Swift/Array/containsSorted(_:)``: asked per link on every change, so no set to build and hash.
    func interfacesWithUsableAddress(_ family: IPAddress.Family) -> [Int] {
        // One buffer, sorted in place: no second array, no regrowth.
        var indices: [Int] = []
        indices.reserveCapacity(addressTable.count)
        for entry in addressTable.values where entry.address.family == family && entry.isUsable {
            indices.append(entry.interfaceIndex)
        }
        indices.sort()
        return indices
    }

    /// All addresses, in no particular order.
    public var addresses: [Address] { Array(addressTable.values) }

    /// Adds or replaces an address (same interface, address and prefix length).
    public mutating func upsertAddress(_ address: Address) { addressTable[address.key] = address }

    /// Removes an address; returns whether it was there.
    @discardableResult
    public mutating func removeAddress(_ address: Address) -> Bool {
        addressTable.removeValue(forKey: address.key) != nil
    }

    /// Removes a link together with its addresses and routes (what RTM_DELLINK implies).
    @discardableResult
    public mutating func removeLink(index: Int) -> Bool {
        let removed = links.removeValue(forKey: index) != nil
        let addressCount = addressTable.count
        let routeCount = defaultRoutes.count
        addressTable = addressTable.filter { $0.key.interfaceIndex != index }
        removeRoutes(throughInterface: index)
        return removed || addressCount != addressTable.count || routeCount != defaultRoutes.count
    }

    /// Removes every default route through an interface, optionally of one family only.
    @discardableResult
    public mutating func removeRoutes(throughInterface index: Int, family: IPAddress.Family? = nil) -> Bool {
        let before = defaultRoutes.count
        defaultRoutes = defaultRoutes.filter { route in
            !(route.interfaceIndex == index && (family == nil || route.family == family))
        }
        return before != defaultRoutes.count
    }
}

extension [Int] {
    /// Whether the array, sorted ascending, holds `value` (a binary search).
    func containsSorted(_ value: Int) -> Bool {
        var low = 0
        var high = count
        while low < high {
            let middle = (low + high) / 2
            if self[middle] < value { low = middle + 1 } else { high = middle }
        }
        return low < count && self[low] == value
    }
}
