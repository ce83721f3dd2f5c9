/// What a link does to the bytes going one way through it.
///
/// ```swift
/// // 780 kbit/s with 100 ms of delay, give or take 10 ms:
/// let down = DirectionConditions(bandwidth: 780_000 / 8, delay: .milliseconds(100), jitter: .milliseconds(10))
/// ```
///
/// In JSON (the control API's): `{"bandwidth": 97500, "delayMilliseconds": 100,
/// "jitterMilliseconds": 10, "loss": 0}`; `bandwidth` is bytes per second, `null` or absent for
/// unlimited, and absent keys are zero.
public struct DirectionConditions: Sendable, Hashable {
    /// Bytes per second the link carries; `nil` for as fast as the machine relays.
    public var bandwidth: Int?
    /// Time every byte spends on the link after it is sent.
    public var delay: Duration
    /// Each chunk's delay varies by up to this much either way (uniformly), never reordering bytes.
    public var jitter: Duration
    /// The share of packets lost, from 0 to 1. A TCP proxy cannot drop packets (TCP would resend
    /// them): a lost packet is modelled as what TCP's retransmission costs, its bytes and all
    /// after them arriving one retransmission timeout later. 1 means the link carries nothing: no
    /// connection is made over it and open ones hold their bytes until it is lowered
    /// (``LinkProfile/loss100`` says how far a proxy can go).
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

    /// Throws ``ConditionerError/invalidConditions(_:)`` naming the first value out of range:
    /// a bandwidth below 1 byte/s (use loss 1 for a link that carries nothing), a negative delay
    /// or jitter, a loss outside 0...1.
    public func validate(_ direction: String = "") throws(ConditionerError) {
        let prefix = direction.isEmpty ? "" : "\(direction) "
        if let bandwidth, bandwidth < 1 {
            throw .invalidConditions(
                "\(prefix)bandwidth must be at least 1 byte/s (is \(bandwidth)); loss 100% carries nothing")
        }
        if delay < .zero { throw .invalidConditions("\(prefix)delay must not be negative") }
        if jitter < .zero { throw .invalidConditions("\(prefix)jitter must not be negative") }
        if !(0...1).contains(loss) { throw .invalidConditions("\(prefix)loss must be between 0 and 1 (is \(loss))") }
    }
}

/// What a link does in each direction: `upstream` is client to server, `downstream` server to
/// client (a download is downstream).
///
/// ```swift
/// let conditions = LinkConditions(upstream: .init(bandwidth: 41_250, delay: .milliseconds(100)),
///                                 downstream: .init(bandwidth: 97_500, delay: .milliseconds(100)))
/// ```
public struct LinkConditions: Sendable, Hashable {
    /// Client to server.
    public var upstream: DirectionConditions
    /// Server to client.
    public var downstream: DirectionConditions
    /// Nothing is relayed (and the upstream not connected) until this long after a connection is
    /// accepted: what a slow name lookup costs a client before it connects.
    public var connectDelay: Duration
    /// Seeds the jitter and loss draws, so a run can be repeated exactly.
    public var seed: UInt64
    /// Whether each connection gets the whole bandwidth to itself. By default (`false`) the
    /// listener is the link: its connections share each direction's bandwidth, as flows share a
    /// real link (and the kernel's `tc tbf` shaper, and Apple's Network Link Conditioner), so four
    /// parallel downloads on a 2 Mbit/s link get 2 Mbit/s together.
    public var bandwidthPerConnection: Bool

    /// Conditions for both directions.
    public init(
        upstream: DirectionConditions = .none, downstream: DirectionConditions = .none,
        connectDelay: Duration = .zero, seed: UInt64 = 1, bandwidthPerConnection: Bool = false
    ) {
        self.upstream = upstream
        self.downstream = downstream
        self.connectDelay = connectDelay
        self.seed = seed
        self.bandwidthPerConnection = bandwidthPerConnection
    }

    /// No conditions either way.
    public static let none = LinkConditions()

    /// Throws ``ConditionerError/invalidConditions(_:)`` if a value is out of range.
    public func validate() throws(ConditionerError) {
        try upstream.validate("upstream")
        try downstream.validate("downstream")
        if connectDelay < .zero { throw .invalidConditions("connect delay must not be negative") }
    }
}

// MARK: JSON

extension DirectionConditions: Codable {
    private enum CodingKeys: String, CodingKey {
        case bandwidth, delayMilliseconds, jitterMilliseconds, loss
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        bandwidth = try container.decodeIfPresent(Int.self, forKey: .bandwidth)
        delay = try container.decodeMilliseconds(.delayMilliseconds) ?? .zero
        jitter = try container.decodeMilliseconds(.jitterMilliseconds) ?? .zero
        loss = try container.decodeIfPresent(Double.self, forKey: .loss) ?? 0
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(bandwidth, forKey: .bandwidth)
        try container.encode(delay.milliseconds, forKey: .delayMilliseconds)
        try container.encode(jitter.milliseconds, forKey: .jitterMilliseconds)
        try container.encode(loss, forKey: .loss)
    }
}

extension LinkConditions: Codable {
    private enum CodingKeys: String, CodingKey {
        case upstream, downstream, connectDelayMilliseconds, seed, bandwidthPerConnection
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        upstream = try container.decodeIfPresent(DirectionConditions.self, forKey: .upstream) ?? .none
        downstream = try container.decodeIfPresent(DirectionConditions.self, forKey: .downstream) ?? .none
        connectDelay = try container.decodeMilliseconds(.connectDelayMilliseconds) ?? .zero
        seed = try container.decodeIfPresent(UInt64.self, forKey: .seed) ?? 1
        bandwidthPerConnection = try container.decodeIfPresent(Bool.self, forKey: .bandwidthPerConnection) ?? false
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(upstream, forKey: .upstream)
        try container.encode(downstream, forKey: .downstream)
        try container.encode(connectDelay.milliseconds, forKey: .connectDelayMilliseconds)
        try container.encode(seed, forKey: .seed)
        try container.encode(bandwidthPerConnection, forKey: .bandwidthPerConnection)
    }
}

extension Duration {
    /// The duration in (fractional) milliseconds, as the JSON carries it.
    var milliseconds: Double { Double(nanoseconds) / 1e6 }

    /// `milliseconds` as a duration (to the nanosecond); `nil` if it is not finite or too large.
    init?(milliseconds: Double) {
        guard milliseconds.isFinite, abs(milliseconds) < 1e12 else { return nil }
        self = .nanoseconds(Int64((milliseconds * 1e6).rounded()))
    }
}

extension KeyedDecodingContainer {
    func decodeMilliseconds(_ key: Key) throws -> Duration? {
        guard let value = try decodeIfPresent(Double.self, forKey: key) else { return nil }
        guard let duration = Duration(milliseconds: value) else {
            throw DecodingError.dataCorruptedError(
                forKey: key, in: self, debugDescription: "not a number of milliseconds: \(value)")
        }
        return duration
    }
}
