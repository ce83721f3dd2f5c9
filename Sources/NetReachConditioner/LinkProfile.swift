/// The link profiles of Apple's Network Link Conditioner, with the same figures, as conditions
/// for a ``ConditionedProxy``.
///
/// ```swift
/// let proxy = try await ConditionedProxy.start(upstreamHost: "127.0.0.1", upstreamPort: 8080,
///                                              conditions: LinkProfile.threeG.conditions)
/// LinkProfile(name: "very-bad")?.conditions   // the same as .veryBad.conditions
/// ```
///
/// Bandwidth is what the link carries per second of payload; each direction's delay is added
/// to every byte going that way, so a round trip takes both delays longer. Apple's profiles set
/// no jitter.
public enum LinkProfile: String, Sendable, Hashable, CaseIterable, Codable {
    /// Wi-Fi: 40 Mbit/s down, 33 Mbit/s up, 1 ms each way.
    case wifi = "wifi"
    /// Wi-Fi 802.11ac: 250 Mbit/s down, 100 Mbit/s up, 1 ms each way.
    case wifiAC = "wifi-ac"
    /// LTE: 50 Mbit/s down with 50 ms, 10 Mbit/s up with 65 ms.
    case lte = "lte"
    /// DSL: 2 Mbit/s down, 256 kbit/s up, 5 ms each way.
    case dsl = "dsl"
    /// 3G: 780 kbit/s down, 330 kbit/s up, 100 ms each way.
    case threeG = "3g"
    /// Edge: 240 kbit/s down with 400 ms, 200 kbit/s up with 440 ms.
    case edge = "edge"
    /// Very Bad Network: 1 Mbit/s each way, 500 ms each way, 10% of packets lost each way.
    case veryBad = "very-bad"
    /// High Latency DNS: every name lookup takes 3 s. A TCP proxy never sees the lookup, so the
    /// 3 s are charged where a client pays them, before its connection: nothing is relayed for
    /// 3 s after each connection is accepted (``LinkConditions/connectDelay``).
    case highLatencyDNS = "high-latency-dns"
    /// 100% Loss: the link carries nothing, either way. As far as a userspace proxy can make it:
    ///
    /// - A client's `connect()` gets no answer: while the loss is 100% the listener drops every
    ///   SYN in the kernel (a socket filter), so the client retransmits until its own timeout
    ///   (about 2 minutes with Linux's defaults), as over a dead link. No upstream connection is
    ///   made and nothing is relayed.
    /// - Connections open when the loss becomes 100% stop relaying: their bytes and FINs are held
    ///   (read up to 1 MiB a direction), as TCP holds what it cannot get across, and go on intact
    ///   when the loss is lowered; a client still connecting then connects at its next SYN
    ///   retransmission.
    ///
    /// What it cannot do: on an open connection, the proxy's kernel still acknowledges what the
    /// client sends (its send buffer drains, its keepalives are answered; over a dead link they
    /// would go unanswered until `tcp_retries2` gives up, some 15 minutes); and a connection whose
    /// handshake the kernel completed before the filter was attached (a race of microseconds with
    /// the change) is accepted, but held: no upstream connection until the loss is lowered.
    case loss100 = "100-loss"

    /// The profile named `name` as the command line spells it (`3g`, `very-bad`, ...); `nil` for
    /// any other name.
    public init?(name: String) {
        self.init(rawValue: name.lowercased())
    }

    /// The name the command line and the control API use.
    public var name: String { rawValue }

    /// The profile's name in Apple's Network Link Conditioner.
    public var appleName: String {
        switch self {
        case .wifi: "Wifi"
        case .wifiAC: "Wifi 802.11ac"
        case .lte: "LTE"
        case .dsl: "DSL"
        case .threeG: "3G"
        case .edge: "Edge"
        case .veryBad: "Very Bad Network"
        case .highLatencyDNS: "High Latency DNS"
        case .loss100: "100% Loss"
        }
    }

    /// The profile as conditions (seed 1).
    public var conditions: LinkConditions {
        switch self {
        case .wifi: Self.link(down: .mbit(40), downDelay: 1, up: .mbit(33), upDelay: 1)
        case .wifiAC: Self.link(down: .mbit(250), downDelay: 1, up: .mbit(100), upDelay: 1)
        case .lte: Self.link(down: .mbit(50), downDelay: 50, up: .mbit(10), upDelay: 65)
        case .dsl: Self.link(down: .mbit(2), downDelay: 5, up: .kbit(256), upDelay: 5)
        case .threeG: Self.link(down: .kbit(780), downDelay: 100, up: .kbit(330), upDelay: 100)
        case .edge: Self.link(down: .kbit(240), downDelay: 400, up: .kbit(200), upDelay: 440)
        case .veryBad: Self.link(down: .mbit(1), downDelay: 500, up: .mbit(1), upDelay: 500, loss: 0.1)
        case .highLatencyDNS: LinkConditions(connectDelay: .seconds(3))
        case .loss100: LinkConditions(upstream: .init(loss: 1), downstream: .init(loss: 1))
        }
    }

    private static func link(down: Int, downDelay: Int, up: Int, upDelay: Int, loss: Double = 0) -> LinkConditions {
        LinkConditions(
            upstream: .init(bandwidth: up, delay: .milliseconds(upDelay), loss: loss),
            downstream: .init(bandwidth: down, delay: .milliseconds(downDelay), loss: loss))
    }

    /// Every profile's figures as a Markdown table: the one in the documentation and (as plain
    /// text) in `netreach condition --help`. A test keeps the documentation's copy equal to it.
    public static var table: String {
        var lines = [
            "| Profile | Apple's name | Down | Down delay | Up | Up delay | Loss | Other |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for profile in allCases {
            let c = profile.conditions
            let other = c.connectDelay > .zero ? "\(Self.milliseconds(c.connectDelay)) before each connection" : ""
            lines.append(
                "| `\(profile.name)` | \(profile.appleName) | \(Self.rate(c.downstream.bandwidth)) | "
                    + "\(Self.milliseconds(c.downstream.delay)) | \(Self.rate(c.upstream.bandwidth)) | "
                    + "\(Self.milliseconds(c.upstream.delay)) | \(Self.percent(c.downstream.loss)) | \(other) |")
        }
        return lines.joined(separator: "\n")
    }

    /// A bandwidth in bytes per second as people write link speeds: `780 kbit/s`, `40 Mbit/s`;
    /// `unlimited` for `nil`.
    package static func rate(_ bytesPerSecond: Int?) -> String {
        guard let bytesPerSecond else { return "unlimited" }
        let bits = bytesPerSecond * 8
        if bits % 1_000_000 == 0 { return "\(bits / 1_000_000) Mbit/s" }
        if bits % 1_000 == 0 { return "\(bits / 1_000) kbit/s" }
        return "\(bits) bit/s"
    }

    /// Whole milliseconds as the table writes them: `100 ms`, or `0`.
    package static func milliseconds(_ duration: Duration) -> String {
        duration == .zero ? "0" : "\(duration.nanoseconds / 1_000_000) ms"
    }

    /// A share as the table writes it: `10%`, or `0`.
    package static func percent(_ share: Double) -> String {
        share == 0 ? "0" : "\(Int((share * 100).rounded()))%"
    }
}

extension Int {
    /// `n` kilobits per second, in bytes per second.
    static func kbit(_ n: Int) -> Int { n * 1_000 / 8 }
    /// `n` megabits per second, in bytes per second.
    static func mbit(_ n: Int) -> Int { n * 1_000_000 / 8 }
}
