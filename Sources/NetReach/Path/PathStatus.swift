/// Whether a path can be used, as in Network.framework's `NWPath.Status`.
public enum PathStatus: String, Sendable, Hashable, Codable, CustomStringConvertible {
    /// The path can send and receive data.
    case satisfied
    /// The path cannot be used; ``NetworkPath/unsatisfiedReason`` says why.
    case unsatisfied
    /// The path is not available now but establishing a connection could make it so.
    ///
    /// The Linux kernel has no on-demand connections, so the Linux backend never reports this
    /// status; it exists so ported code that switches over all cases keeps compiling, and so a
    /// simulated network (`NetReachTesting`) can produce it.
    case requiresConnection

    public var description: String { rawValue }
}

/// Why a path is not satisfied.
public enum UnsatisfiedReason: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
    /// There is no interface other than loopback.
    case noInterface
    /// Every candidate interface is administratively down or has no carrier.
    case linkDown
    /// An interface is up, but none has a usable address (none, or still tentative, or DAD failed),
    /// or the source address the kernel picks for the traffic cannot carry it (loopback, which the
    /// kernel hands a socket while every global IPv6 address is tentative; tentative; DAD failed;
    /// `0.0.0.0`, its pick when no interface has an IPv4 address).
    case noAddress
    /// An interface is up with an address, but the kernel has no route to the destination
    /// (for the internet: no default route in any table the policy rules reach).
    case noDefaultRoute
    /// The kernel's route for the destination refuses traffic: an `unreachable`, `blackhole` or
    /// `prohibit` route or rule matched, as a VPN kill switch installs.
    case routeRefused
    /// The interface the kernel would use (or, with no route, one that would otherwise qualify)
    /// is of a type the monitor's requirements exclude.
    case excludedByRequirements
    /// A per-destination monitor's host name has no addresses (the name does not exist, or the
    /// resolver failed or timed out); ``PathMonitor/resolutionFailure`` says which.
    case destinationUnresolved
    /// The monitor could not observe the system (for example the netlink socket could not be
    /// opened, or the network namespace could not be entered); ``PathMonitor/failure`` has details.
    case monitorUnavailable

    public var description: String {
        switch self {
        case .noInterface: "no interface"
        case .linkDown: "link down"
        case .noAddress: "no address"
        case .noDefaultRoute: "no default route"
        case .routeRefused: "route refuses traffic"
        case .excludedByRequirements: "excluded by requirements"
        case .destinationUnresolved: "destination not resolved"
        case .monitorUnavailable: "monitor unavailable"
        }
    }
}
