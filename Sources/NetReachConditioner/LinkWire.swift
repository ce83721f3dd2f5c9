import NIOCore
import NetReachSystem

/// The wire of one direction of a link: the bytes of every connection that uses it are
/// serialised one slice after another at the link's bandwidth, as a bottleneck serialises
/// packets (the kernel's `tc tbf` queue, a DSL line). Connections take one slice at a time and
/// ask for the next when it has left, so flows interleave slice by slice and share the rate.
///
/// Shared by a listener's connections (from any event loop), or one per connection with
/// ``LinkConditions/bandwidthPerConnection``.
///
/// ```swift
/// let wire = LinkWire()
/// let leaves = wire.reserve(14_480, bandwidth: 250_000, now: .now())   // 58 ms later on an idle wire
/// ```
final class LinkWire: Sendable {
    /// When the wire has serialised everything given to it so far.
    private let freeAt = Locked(NIODeadline.uptimeNanoseconds(0))

    /// Puts `count` bytes on the wire after what is on it already (at once when it is idle) and
    /// returns when their last byte has left.
    func reserve(_ count: Int, bandwidth: Int, now: NIODeadline) -> NIODeadline {
        freeAt.withLock { free in
            let start = max(now, free)
            free = start + TimeAmount(DirectionShaper.transmissionTime(count, bandwidth: bandwidth))
            return free
        }
    }
}
