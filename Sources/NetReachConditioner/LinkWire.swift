import NIOCore
import NetReachSystem

/// The wire of one direction of a link: the bytes of every connection that uses it leave one
/// slice after another at the link's bandwidth, as a ``TokenBucket`` (the kernel's `tc tbf`)
/// lets them. Connections take credit for one slice at a time, and for the next once that one
/// may leave, so flows interleave slice by slice and share the rate.
///
/// Shared by a listener's connections (from any event loop), or one per connection with
/// ``LinkConditions/bandwidthPerConnection``. Times are `NIODeadline`s (the monotonic clock);
/// the credit counts from them, not from when the caller's timers ran.
///
/// ```swift
/// let wire = LinkWire()
/// let now = NIODeadline.now()
/// wire.reserve(2_500, bandwidth: 250_000, waitingSince: now)   // now: an idle link's burst
/// wire.reserve(2_500, bandwidth: 250_000, waitingSince: now)   // 10 ms later: the rate
/// ```
final class LinkWire: Sendable {
    private let bucket = Locked(TokenBucket())

    /// Takes the wire's credit for `count` bytes that have waited for it since `waitingSince`,
    /// after every slice taken before, and returns when they may leave (``TokenBucket/take(_:rate:burst:waitingSince:)``
    /// with a burst of ``DirectionShaper/burst(bandwidth:)``).
    @discardableResult
    func reserve(_ count: Int, bandwidth: Int, waitingSince: NIODeadline) -> NIODeadline {
        let leaves = bucket.withLock { bucket in
            bucket.take(
                count, rate: bandwidth, burst: DirectionShaper.burst(bandwidth: bandwidth),
                waitingSince: .nanoseconds(Int64(waitingSince.uptimeNanoseconds)))
        }
        return .uptimeNanoseconds(UInt64(max(0, leaves.nanoseconds)))
    }
}
