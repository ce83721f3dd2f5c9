/// A fault in the manner of Shopify's toxiproxy, applied to a conditioned link on top of its
/// conditions.
///
/// ```swift
/// try proxy.addFault(.limitData(bytes: 1_000), direction: .downstream, name: "cut")   // close after 1 kB
/// ```
public enum LinkFault: Sendable, Hashable, Codable {
    /// Resets both connections (TCP RST) this long after each connection starts.
    case resetPeer(after: Duration)
    /// Holds the connection: nothing more is delivered; closes it after `after` (`nil`: never).
    case timeout(after: Duration?)
    /// Delays passing a close on by `delay` once everything before it was delivered.
    case slowClose(delay: Duration)
    /// Closes the connection once this many bytes have been delivered in the fault's direction.
    case limitData(bytes: Int)
    /// Cuts what is delivered into slices of `averageSize` ± `sizeVariation` bytes, `delay` apart.
    case slicer(averageSize: Int, sizeVariation: Int, delay: Duration)
}

/// Which way a fault acts.
public enum LinkDirection: String, Sendable, Hashable, Codable, CaseIterable {
    /// Client to server.
    case upstream
    /// Server to client.
    case downstream
}

/// A fault with the name it was added under and the directions it acts on.
public struct NamedFault: Sendable, Hashable, Codable {
    public var name: String
    public var fault: LinkFault
    public var directions: Set<LinkDirection>

    public init(name: String, fault: LinkFault, directions: Set<LinkDirection>) {
        self.name = name
        self.fault = fault
        self.directions = directions
    }
}
