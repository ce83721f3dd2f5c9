import NetReachSystem

/// Where a ``PathMonitor`` gets the system's network state from.
///
/// The Linux kernel is one source (``SystemPathSource``); a simulated network for tests
/// (`NetReachTesting.SimulatedNetwork`) is another. A source sends *snapshots*; each monitor
/// evaluates them with its own requirements, so any number of monitors can share one source.
///
/// A conforming type must:
/// - call `receiver` with the current snapshot before `subscribe` returns;
/// - then call it with every changed snapshot, from one thread at a time, in order;
/// - stop calling it soon after the subscription is cancelled (a call already under way may finish).
public protocol PathSource: AnyObject, Sendable {
    /// Starts delivering snapshots to `receiver`, beginning with the current one.
    func subscribe(
        _ receiver: @escaping @Sendable (SystemSnapshot) -> Void
    ) throws(PathMonitorError) -> PathSubscription

    /// Asks the source to include its routes to `destinations` in its snapshots
    /// (``SystemSnapshot/destinationLookups``) until the subscription is cancelled; per-destination
    /// monitors call it before ``subscribe(_:)``. A source with no kernel to ask (a simulated
    /// network) need not implement it: snapshots then answer with
    /// ``SystemSnapshot/emulatedRouteLookup(to:)``.
    func lookUpRoutes(to destinations: [IPAddress]) -> PathSubscription
}

extension PathSource {
    /// Does nothing: the snapshot's emulated lookups answer for destinations.
    public func lookUpRoutes(to destinations: [IPAddress]) -> PathSubscription { PathSubscription {} }
}

/// A handle that ends a ``PathSource`` subscription. Cancelling twice is harmless.
public final class PathSubscription: Sendable {
    private let onCancel: Locked<(@Sendable () -> Void)?>

    /// Creates a subscription that runs `onCancel` once, on the first ``cancel()``.
    public init(onCancel: @escaping @Sendable () -> Void) { self.onCancel = Locked(onCancel) }

    /// Ends the subscription.
    public func cancel() {
        let action = onCancel.withLock { action in
            defer { action = nil }
            return action
        }
        action?()
    }

    deinit { cancel() }
}
