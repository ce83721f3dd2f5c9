/// What one direction of a connection carried, and what the conditions did to it.
public struct DirectionStatistics: Sendable, Hashable, Codable {
    /// Bytes read from the sender.
    public var bytesRead = 0
    /// Bytes accepted for delivery (a data limit or a held connection accepts fewer).
    public var bytesScheduled = 0
    /// Bytes written to the receiver.
    public var bytesDelivered = 0
    /// Writes made to the receiver (a slicer makes more).
    public var chunksDelivered = 0
    /// Reads that came while the link carried nothing (100% loss): held until the loss is lowered.
    public var chunksHeldBack = 0
    /// The sum of every delivered chunk's time in the proxy, in milliseconds.
    public var totalDelayMilliseconds = 0.0
    /// The longest time a delivered chunk spent in the proxy, in milliseconds.
    public var maximumDelayMilliseconds = 0.0
    /// The upstream could not be connected to.
    public var upstreamRefused = false

    public init() {}

    mutating func delivered(_ count: Int, delay: Duration) {
        bytesDelivered += count
        chunksDelivered += 1
        let milliseconds = Double(delay.nanoseconds) / 1e6
        totalDelayMilliseconds += milliseconds
        maximumDelayMilliseconds = max(maximumDelayMilliseconds, milliseconds)
    }
}

/// One connection through a conditioned listener.
public struct ConnectionStatistics: Sendable, Hashable, Codable {
    /// The connection's number within its listener, from 1.
    public var id: Int
    /// Client to server.
    public var upstream: DirectionStatistics
    /// Server to client.
    public var downstream: DirectionStatistics
    /// Whether the connection is still open.
    public var isOpen: Bool
}
