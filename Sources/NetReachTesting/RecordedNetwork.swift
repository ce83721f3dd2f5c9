#if os(Linux)
import NetReach
import NetReachSystem

/// A network replayed from the bytes a Linux kernel sent on a NETLINK_ROUTE socket: a
/// ``NetReach/PathSource`` that reads them with NetReach's own rtnetlink parser and snapshot store,
/// the stages the kernel's messages go through in a live monitor, with no socket and no root.
///
/// Each datagram is the payload of one `recv()`, as the kernel sent it. The network starts from a
/// dump (`RTM_GETLINK`, `RTM_GETADDR`, `RTM_GETNEXTHOP` and `RTM_GETROUTE` replies) and takes
/// notifications one wake-up at a time: ``receive(_:)`` reads a batch and, when the state changed,
/// delivers it to subscribed monitors before it returns, as ``SimulatedNetwork`` does.
///
/// ```swift
/// let network = RecordedNetwork(dump: recordedDump)
/// let monitor = PathMonitor(source: network)
/// monitor.updateObserver = { update in print(update.sequence, update.path) }
/// monitor.start(queue: DispatchQueue(label: "paths"))
/// network.receive(recordedRouteDeletion)   // the observer has the update when this returns
/// ```
///
/// A recording holds what the kernel announced, not its route choices, which a live monitor asks
/// for: paths are judged from the main-table default routes
/// (``NetReach/SystemSnapshot/emulatedRouteLookup(for:through:)``), and a link's sysfs facts
/// (wireless, device type) are unknown. A message that cannot be parsed is skipped and counted in
/// ``malformedMessages``, as a live monitor skips it.
///
/// Deliveries run while the network holds its lock: an observer must not call back into it.
public final class RecordedNetwork: PathSource, Sendable {
    private struct State {
        var reader = NetlinkReader()
        var published: SystemSnapshot
        var subscribers: [UInt64: @Sendable (SystemSnapshot) -> Void] = [:]
        var nextID: UInt64 = 0
    }

    private let state: Locked<State>

    /// A network in the state `dump` describes: the datagrams of the replies to the dumps a
    /// monitor asks for when it starts.
    public init(dump: [[UInt8]]) {
        var reader = NetlinkReader()
        for datagram in dump { _ = datagram.withUnsafeBytes { reader.applyDump($0) } }
        state = Locked(State(reader: reader, published: reader.snapshot))
    }

    /// The state read so far.
    public var snapshot: SystemSnapshot { state.withLock { $0.reader.snapshot } }

    /// How many messages could not be parsed and were skipped.
    public var malformedMessages: Int { state.withLock { $0.reader.malformedMessages } }

    /// Reads the notifications of one wake-up (each element one datagram) and, if the state they
    /// leave differs from the last one delivered, delivers it to every monitor before returning.
    public func receive(_ datagrams: [[UInt8]]) {
        state.withLock { state in
            var changed = false
            for datagram in datagrams { changed = datagram.withUnsafeBytes { state.reader.absorb($0) } || changed }
            guard changed, state.reader.snapshot != state.published else { return }
            state.published = state.reader.snapshot
            for receiver in state.subscribers.values { receiver(state.published) }
        }
    }

    public func subscribe(
        _ receiver: @escaping @Sendable (SystemSnapshot) -> Void
    ) throws(PathMonitorError) -> PathSubscription {
        let id = state.withLock { state in
            let id = state.nextID
            state.nextID += 1
            state.subscribers[id] = receiver
            receiver(state.published)
            return id
        }
        return PathSubscription { [weak self] in
            self?.state.withLock { _ = $0.subscribers.removeValue(forKey: id) }
        }
    }
}
#endif
