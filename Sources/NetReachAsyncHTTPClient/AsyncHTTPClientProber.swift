import Dispatch
import HTTPTypes
import NetReach
import NetReachConnectivity
import NetReachHTTP

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Sends connectivity probes on AsyncHTTPClient, each over one family, where the program's own
/// requests go: directly, or through the proxy the settings choose for the probe's URL (by
/// default the environment's `http_proxy`, `https_proxy`, `all_proxy` and `no_proxy`, read as
/// curl reads them: ``NetReachHTTP/ProxySettings/environment(_:)``).
///
/// Directly, the host is resolved to addresses of that family only (a name that does not resolve
/// is the verdict `failed`, with the resolver's reason), and the connection goes to that address
/// while TLS still names and checks the host. Through a proxy, the connection to the proxy is made
/// over that family (its name resolved to that family's addresses) and the proxy resolves the
/// host; the evidence names the proxy, and an answer the proxy gave for itself (it refused the
/// connection, asked for credentials with 407, or answered 5xx for a host it could not reach) is
/// a failure of the proxy, not a portal. Redirects are never followed; the body is judged as it
/// arrives (``NetReachConnectivity/ProbeAnswer``), and no more of it is read than that takes.
///
/// ```swift
/// var settings = TransportSettings()
/// settings.tls.trustRoots = .file("/etc/ssl/probe-ca.pem")   // an https probe of your own
/// settings.proxy = ProxySettings(proxy: URL(string: "http://proxy.internal:3128")!)
/// let monitor = ConnectivityMonitor(configuration: configuration, prober: AsyncHTTPClientProber(settings: settings))
/// ```
public struct AsyncHTTPClientProber: ConnectivityProber {
    /// The TLS settings, proxies and connect timeout of the probes.
    public let settings: TransportSettings

    /// A prober with these settings (by default, the system's trust roots and the environment's
    /// proxies).
    public init(settings: TransportSettings = TransportSettings()) {
        self.settings = settings
    }

    public func probe(_ probe: ConnectivityProbe, over family: IPAddress.Family, timeout: Duration) async -> ProbeResult
    {
        let clock = ContinuousClock()
        let start = clock.now
        let deadline = start + timeout
        guard let (head, host) = HTTPRequest.get(probe.url) else {
            return ProbeResult(
                probe: probe, family: family, latency: clock.now - start,
                verdict: .failed("the probe's URL cannot be sent"))
        }
        let proxy = settings.proxy.proxy(forScheme: probe.url.scheme ?? "http", host: host)
        let shownProxy = proxy.map(Self.withoutCredentials)
        func result(_ status: Int?, _ verdict: ProbeVerdict) -> ProbeResult {
            ProbeResult(
                probe: probe, family: family, proxy: shownProxy, status: status, latency: clock.now - start,
                verdict: verdict)
        }
        var settings = self.settings
        var override: [String: String] = [:]
        if let proxy {
            // The proxy resolves the host; this family is the one of the connection to the proxy.
            switch await Self.address(of: proxy.host ?? "", family: family, timeout: timeout) {
            case .success(let address):
                let pinned = Self.replacingHost(of: proxy, with: address)
                settings.proxy = ProxySettings(http: pinned, https: pinned)
            case .failure(let reason):
                return result(nil, .failed("the proxy \(shownProxy!.absoluteString): \(reason)"))
            }
        } else {
            switch await Self.address(of: host, family: family, timeout: timeout) {
            case .success(let address):
                if IPAddress(host) == nil { override[host] = address.description }
            case .failure(let reason):
                return result(nil, .failed(reason))
            }
        }
        let transport: AsyncHTTPClientTransport
        do {
            transport = try AsyncHTTPClientTransport(settings: settings, dnsOverride: override)
        } catch {
            return result(nil, .failed("settings: \(error)"))
        }
        var request = head
        request.headerFields[.cacheControl] = "no-cache"
        do {
            let (response, body) = try await transport.send(
                request, body: nil,
                options: TransportOptions(stallTimeout: timeout, deadline: deadline))
            let status = response.status.code
            if let shownProxy, probe.url.scheme?.lowercased() == "http", status == 407 || (500...599).contains(status) {
                // Sent to the proxy in absolute form: its 407 and its 5xx (it could not reach or
                // hear the host) are its own answers, not the probe server's.
                return result(
                    status,
                    .failed(
                        "the proxy \(shownProxy.absoluteString) answered HTTP \(status)"
                            + (status == 407 ? " (it asks for credentials)" : " (it got no answer from the host)")))
            }
            var answer = ProbeAnswer(
                probe, status: status, location: response.headerFields[.location],
                networkManagerStatus: response.headerFields[HTTPField.Name("X-NetworkManager-Status")!])
            do {
                for try await chunk in body {
                    if answer.receive(chunk) != nil { break } // decided: the rest is not needed
                }
            } catch {
                return result(status, answer.cut((error as? TransportError)?.detail ?? "\(error)"))
            }
            return result(status, answer.verdict ?? answer.end())
        } catch {
            if error.kind == .tlsFailure { return result(nil, .intercepted(error.detail)) }
            return result(nil, .failed(error.detail))
        }
    }

    /// `host` as an address of `family`: itself if it is one, else resolved; a reason otherwise.
    private static func address(
        of host: String, family: IPAddress.Family, timeout: Duration
    ) async -> Lookup {
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        if let literal = IPAddress(bare) {
            return literal.family == family ? .success(literal) : .failure("\(bare) is not an \(family) address")
        }
        switch await resolve(bare, family: family, timeout: timeout) {
        case .success(let addresses): return .success(addresses[0])
        case .failure(let error): return .failure("DNS: \(error)")
        }
    }

    /// An address of the family asked for, or why there is none.
    private enum Lookup {
        case success(IPAddress)
        case failure(String)
    }

    /// `url` with its host replaced by `address` (bracketed for IPv6).
    private static func replacingHost(of url: URL, with address: IPAddress) -> URL {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return url }
        components.host = address.family == .ipv6 ? "[\(address)]" : address.description
        return components.url ?? url
    }

    /// `url` without user and password: what the evidence shows of a proxy.
    private static func withoutCredentials(_ url: URL) -> URL {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return url }
        components.user = nil
        components.password = nil
        return components.url ?? url
    }

    /// Asks the RFC 8908 API at `url`: `https` only, `Accept: application/captive+json`, redirects
    /// not followed, at most 64 KiB read, a 200 whose body has a boolean `captive` or it failed.
    /// The system resolver and either family: the network that announced it serves it.
    public func captivePortalStatus(at url: URL, timeout: Duration) async -> CaptivePortalAnswer {
        let clock = ContinuousClock()
        let start = clock.now
        guard url.scheme?.lowercased() == "https" else { return .failed("the API is not https") }
        guard var (request, _) = HTTPRequest.get(url) else { return .failed("the API's URL cannot be sent") }
        request.headerFields[.accept] = CaptivePortalAPI.mediaType
        request.headerFields[.cacheControl] = "no-cache"
        do {
            let transport = try AsyncHTTPClientTransport(settings: settings, dnsOverride: [:])
            let (response, body) = try await transport.send(
                request, body: nil,
                options: TransportOptions(stallTimeout: timeout, deadline: start + timeout))
            var bytes: [UInt8] = []
            for try await chunk in body {
                bytes += chunk
                if bytes.count > 64 * 1024 { return .failed("the API's answer is over 64 KiB") }
            }
            guard response.status.code == 200 else { return .failed("the API answered HTTP \(response.status.code)") }
            let status = try CaptivePortalAPI.Status(parsing: bytes)
            return .answered(status, latency: clock.now - start)
        } catch let error as CaptivePortalAPIError {
            return .failed("the API's answer: \(error)")
        } catch let error as TransportError {
            return .failed("the API: \(error.detail)")
        } catch {
            return .failed("the API: \(error)")
        }
    }

    /// `getaddrinfo` for one family, on a thread of its own (it blocks).
    private static func resolve(
        _ host: String, family: IPAddress.Family, timeout: Duration
    ) async
        -> Result<[IPAddress], HostResolutionError>
    {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(returning: HostResolver.resolve(host, family: family, timeout: timeout))
            }
        }
    }
}
