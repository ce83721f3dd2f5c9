/// A fault in the manner of Shopify's toxiproxy, applied to a conditioned link on top of its
/// conditions.
///
/// ```swift
/// try proxy.addFault(.limitData(bytes: 1_000), directions: [.downstream], name: "cut")   // close after 1 kB
/// ```
///
/// In JSON, a `type` (toxiproxy's name) and its values: `{"type": "reset_peer", "afterMilliseconds": 500}`,
/// `{"type": "timeout", "afterMilliseconds": 2000}` (absent or 0: hold for ever),
/// `{"type": "slow_close", "delayMilliseconds": 1000}`, `{"type": "limit_data", "bytes": 1000}`,
/// `{"type": "slicer", "averageSize": 64, "sizeVariation": 16, "delayMilliseconds": 10}`.
public enum LinkFault: Sendable, Hashable {
    /// Resets both connections (TCP RST) this long after each connection starts.
    case resetPeer(after: Duration)
    /// Holds the connection: nothing more is delivered (bytes read meanwhile wait, up to the
    /// proxy's 1 MiB per direction, and flow again if the fault is removed); closes it `after` the fault came into force (`nil` or
    /// zero: never, as toxiproxy's 0).
    case timeout(after: Duration?)
    /// Delays passing a close on by `delay` once everything before it was delivered.
    case slowClose(delay: Duration)
    /// Closes the connection once this many bytes have been delivered in the fault's direction.
    case limitData(bytes: Int)
    /// Cuts what is delivered into slices of `averageSize` ± `sizeVariation` bytes, `delay` apart.
    case slicer(averageSize: Int, sizeVariation: Int, delay: Duration)

    /// toxiproxy's name for the fault: `reset_peer`, `timeout`, `slow_close`, `limit_data`, `slicer`.
    public var typeName: String {
        switch self {
        case .resetPeer: "reset_peer"
        case .timeout: "timeout"
        case .slowClose: "slow_close"
        case .limitData: "limit_data"
        case .slicer: "slicer"
        }
    }

    /// Throws ``ConditionerError/invalidFault(_:)`` for a negative time or size, a slicer whose
    /// slices could be empty (average below 1, or variation not below the average).
    public func validate() throws(ConditionerError) {
        func time(_ duration: Duration?, _ what: String) throws(ConditionerError) {
            if let duration, duration < .zero { throw .invalidFault("\(typeName): \(what) must not be negative") }
        }
        switch self {
        case .resetPeer(let after): try time(after, "after")
        case .timeout(let after): try time(after, "after")
        case .slowClose(let delay): try time(delay, "delay")
        case .limitData(let bytes):
            if bytes < 0 { throw .invalidFault("limit_data: bytes must not be negative") }
        case .slicer(let average, let variation, let delay):
            if average < 1 { throw .invalidFault("slicer: averageSize must be at least 1") }
            if variation < 0 || variation >= average {
                throw .invalidFault("slicer: sizeVariation must be at least 0 and below averageSize (\(average))")
            }
            try time(delay, "delay")
        }
    }
}

/// Which way a fault acts.
public enum LinkDirection: String, Sendable, Hashable, Codable, CaseIterable {
    /// Client to server.
    case upstream
    /// Server to client.
    case downstream
}

/// A fault with the name it was added under and the directions it acts on.
///
/// In JSON, the fault's object with a `name` and a `direction` (`upstream`, `downstream` or
/// `both`, the default): `{"name": "cut", "direction": "downstream", "type": "limit_data", "bytes": 1000}`.
public struct NamedFault: Sendable, Hashable {
    public var name: String
    public var fault: LinkFault
    public var directions: Set<LinkDirection>

    public init(name: String, fault: LinkFault, directions: Set<LinkDirection> = Set(LinkDirection.allCases)) {
        self.name = name
        self.fault = fault
        self.directions = directions
    }

    /// Throws ``ConditionerError/invalidFault(_:)`` for an empty name, no direction, or a fault
    /// value out of range.
    public func validate() throws(ConditionerError) {
        if name.isEmpty { throw .invalidFault("a fault needs a name") }
        if directions.isEmpty { throw .invalidFault("\(name): a fault acts on at least one direction") }
        try fault.validate()
    }
}

// MARK: JSON

extension LinkFault: Codable {
    private enum CodingKeys: String, CodingKey {
        case type, afterMilliseconds, delayMilliseconds, bytes, averageSize, sizeVariation
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let type = try container.decode(String.self, forKey: .type)
        switch type {
        case "reset_peer":
            self = .resetPeer(after: try container.decodeMilliseconds(.afterMilliseconds) ?? .zero)
        case "timeout":
            self = .timeout(after: try container.decodeMilliseconds(.afterMilliseconds))
        case "slow_close":
            self = .slowClose(delay: try container.decodeMilliseconds(.delayMilliseconds) ?? .zero)
        case "limit_data":
            self = .limitData(bytes: try container.decode(Int.self, forKey: .bytes))
        case "slicer":
            self = .slicer(
                averageSize: try container.decode(Int.self, forKey: .averageSize),
                sizeVariation: try container.decodeIfPresent(Int.self, forKey: .sizeVariation) ?? 0,
                delay: try container.decodeMilliseconds(.delayMilliseconds) ?? .zero)
        default:
            throw DecodingError.dataCorruptedError(
                forKey: .type, in: container,
                debugDescription: "unknown fault type \(type) (reset_peer, timeout, slow_close, limit_data, slicer)")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(typeName, forKey: .type)
        switch self {
        case .resetPeer(let after):
            try container.encode(after.milliseconds, forKey: .afterMilliseconds)
        case .timeout(let after):
            try container.encode(after?.milliseconds, forKey: .afterMilliseconds)
        case .slowClose(let delay):
            try container.encode(delay.milliseconds, forKey: .delayMilliseconds)
        case .limitData(let bytes):
            try container.encode(bytes, forKey: .bytes)
        case .slicer(let average, let variation, let delay):
            try container.encode(average, forKey: .averageSize)
            try container.encode(variation, forKey: .sizeVariation)
            try container.encode(delay.milliseconds, forKey: .delayMilliseconds)
        }
    }
}

extension NamedFault: Codable {
    private enum CodingKeys: String, CodingKey {
        case name, direction
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        name = try container.decode(String.self, forKey: .name)
        switch try container.decodeIfPresent(String.self, forKey: .direction) ?? "both" {
        case "both": directions = Set(LinkDirection.allCases)
        case "upstream": directions = [.upstream]
        case "downstream": directions = [.downstream]
        case let other:
            throw DecodingError.dataCorruptedError(
                forKey: .direction, in: container,
                debugDescription: "unknown direction \(other) (upstream, downstream, both)")
        }
        fault = try LinkFault(from: decoder)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(name, forKey: .name)
        let direction = directions.count == 1 ? directions.first!.rawValue : "both"
        try container.encode(direction, forKey: .direction)
        try fault.encode(to: encoder)
    }
}
