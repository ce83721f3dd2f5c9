/// What a link does to the bytes going one way through it.
///
/// ```swift
/// // 780 kbit/s with 100 ms of delay, give or take 10 ms:
/// let down = DirectionConditions(bandwidth: 780_000 / 8, delay: .milliseconds(100), jitter: .milliseconds(10))
/// ```
public struct DirectionConditions: Sendable, Hashable, Codable {
    /// Bytes per second the link carries; `nil` for as fast as the machine relays.
    public var bandwidth: Int?
    /// Time every byte spends on the link after it is sent.
    public var delay: Duration
    /// Each chunk's delay varies by up to this much either way (uniformly), never reordering bytes.
    public var jitter: Duration
    /// The share of packets lost, from 0 to 1. A TCP proxy cannot drop packets (TCP would resend
    /// them): a lost packet is modelled as what TCP's retransmission costs, its bytes and all
    /// after them arriving one retransmission timeout later. 1 means nothing ever arrives.
    public var loss: Double

    /// Conditions for one direction; with no arguments, none (the link relays as fast as it can).
    public init(bandwidth: Int? = nil, delay: Duration = .zero, jitter: Duration = .zero, loss: Double = 0) {
        self.bandwidth = bandwidth
        self.delay = delay
        self.jitter = jitter
        self.loss = loss
    }

    /// No conditions: the bytes are relayed at once.
    public static let none = DirectionConditions()

    /// Whether the direction changes nothing.
    public var isNone: Bool { bandwidth == nil && delay == .zero && jitter == .zero && loss == 0 }
}

/// What a link does in each direction: `upstream` is client to server, `downstream` server to
/// client (a download is downstream).
///
/// ```swift
/// let conditions = LinkConditions(upstream: .init(bandwidth: 41_250, delay: .milliseconds(100)),
///                                 downstream: .init(bandwidth: 97_500, delay: .milliseconds(100)))
/// ```
public struct LinkConditions: Sendable, Hashable, Codable {
    /// Client to server.
    public var upstream: DirectionConditions
    /// Server to client.
    public var downstream: DirectionConditions
    /// Seeds the jitter and loss draws, so a run can be repeated exactly.
    public var seed: UInt64

    /// Conditions for both directions.
    public init(upstream: DirectionConditions = .none, downstream: DirectionConditions = .none, seed: UInt64 = 1) {
        self.upstream = upstream
        self.downstream = downstream
        self.seed = seed
    }

    /// No conditions either way.
    public static let none = LinkConditions()
}
