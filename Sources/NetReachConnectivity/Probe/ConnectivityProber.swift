import NetReach

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Sends one probe over one address family and says what came back. ``ConnectivityMonitor`` asks
/// it for every probe of a round, in parallel.
///
/// `AsyncHTTPClientProber` (product `NetReachAsyncHTTPClient`) is the implementation to use; tests
/// give a scripted one.
///
/// ```swift
/// struct AlwaysPasses: ConnectivityProber {
///     func probe(_ probe: ConnectivityProbe, over family: IPAddress.Family, timeout: Duration) async -> ProbeResult {
///         ProbeResult(probe: probe, family: family, status: 204, latency: .milliseconds(1), verdict: .passed)
///     }
/// }
/// ```
public protocol ConnectivityProber: Sendable {
    /// Sends `probe` over `family` only (its host resolved to addresses of that family), without
    /// following redirects, giving up after `timeout`; never throws: a failure is a verdict.
    func probe(_ probe: ConnectivityProbe, over family: IPAddress.Family, timeout: Duration) async -> ProbeResult

    /// Asks the RFC 8908 captive-portal API at `url` (an `https` URL the network announced)
    /// whether this client is held in a portal: a `GET` with `Accept: application/captive+json`,
    /// giving up after `timeout`; never throws. The default answers `failed`: the probes decide.
    func captivePortalStatus(at url: URL, timeout: Duration) async -> CaptivePortalAnswer
}

extension ConnectivityProber {
    public func captivePortalStatus(at url: URL, timeout: Duration) async -> CaptivePortalAnswer {
        .failed("this prober does not ask captive-portal APIs")
    }
}

extension ConnectivityProbe {
    /// Whether the probe can be sent over `family`: a URL naming an address of the other family
    /// cannot.
    public func canBeSent(over family: IPAddress.Family) -> Bool {
        guard let host = url.host else { return false }
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        guard let address = IPAddress(bare) else { return true } // a name: resolved per family
        return address.family == family
    }
}
