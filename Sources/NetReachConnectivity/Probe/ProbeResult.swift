import NetReach

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One probe's evidence: what was asked, over which family and interface, what came back, how
/// fast, and the verdict. A level is never shown without these.
public struct ProbeResult: Sendable, Hashable, CustomStringConvertible {
    /// The probe.
    public var probe: ConnectivityProbe
    /// The family it was sent over.
    public var family: IPAddress.Family
    /// The interface the path used (`eth0`), if known.
    public var interface: String?
    /// The proxy the probe went through (without credentials), or `nil` when it went directly.
    public var proxy: URL?
    /// The HTTP status, when something answered.
    public var status: Int?
    /// From the request to the answer (or the failure).
    public var latency: Duration
    /// What the answer says.
    public var verdict: ProbeVerdict

    /// Makes a result.
    public init(
        probe: ConnectivityProbe, family: IPAddress.Family, interface: String? = nil, proxy: URL? = nil,
        status: Int? = nil, latency: Duration, verdict: ProbeVerdict
    ) {
        self.probe = probe
        self.family = family
        self.interface = interface
        self.proxy = proxy
        self.status = status
        self.latency = latency
        self.verdict = verdict
    }

    /// `ipv4 http://192.0.2.1/generate_204 via eth0: HTTP 204 in 3 ms, passed`, with
    /// `through proxy http://10.0.0.1:3128` after the URL when it went through one.
    public var description: String {
        let via = (interface.map { " via \($0)" } ?? "") + (proxy.map { " through proxy \($0.absoluteString)" } ?? "")
        let answer = status.map { "HTTP \($0)" } ?? "no answer"
        return
            "\(family) \(probe.url.absoluteString)\(via): \(answer) in \(Int(latency.milliseconds.rounded())) ms, \(verdict)"
    }
}

extension Duration {
    /// The duration in milliseconds, fractions kept: how probe latencies are shown.
    package var milliseconds: Double {
        Double(components.seconds) * 1000 + Double(components.attoseconds) / 1e15
    }
}
