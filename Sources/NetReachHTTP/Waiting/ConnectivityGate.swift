import NetReach

/// Whether a path may carry a request under a policy: a pure function, tested with tables.
///
/// Linux sends traffic through the preferred interface (lowest default-route metric), and a request
/// cannot pick another, so the policy is checked against the path's preferred interface.
enum ConnectivityGate {
    /// `nil` when the request may go; otherwise why not.
    static func denial(for path: NetworkPath, policy: RequestPolicy) -> NotConnectedReason? {
        guard path.status == .satisfied else { return .noPath(path.unsatisfiedReason) }
        if !policy.allowsCellularAccess && path.primaryInterfaceType == .cellular { return .cellularDenied }
        if !policy.allowsExpensiveNetworkAccess && path.isExpensive { return .expensiveDenied }
        if !policy.allowsConstrainedNetworkAccess && path.isConstrained { return .constrainedDenied }
        return nil
    }
}
