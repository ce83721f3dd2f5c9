import Dispatch
import Foundation
import HTTPTypes
import NetReach
import NetReachConnectivity
import NetReachHTTP

/// Sends connectivity probes on AsyncHTTPClient, each over one family: the host is resolved to
/// addresses of that family only (a name that does not resolve is the verdict `failed`, with the
/// resolver's reason), and the connection goes to that address while TLS still names and checks
/// the host. Redirects are never followed; no proxy is used (a probe through a proxy would judge
/// the proxy); at most 100 KiB of body is read.
///
/// ```swift
/// var settings = TransportSettings()
/// settings.tls.trustRoots = .file("/etc/ssl/probe-ca.pem")   // an https probe of your own
/// let monitor = ConnectivityMonitor(configuration: configuration, prober: AsyncHTTPClientProber(settings: settings))
/// ```
public struct AsyncHTTPClientProber: ConnectivityProber {
    /// The TLS settings and connect timeout of the probes (proxies are ignored).
    public let settings: TransportSettings

    /// A prober with these TLS settings.
    public init(settings: TransportSettings = TransportSettings()) {
        var settings = settings
        settings.proxy = .none
        self.settings = settings
    }

    public func probe(_ probe: ConnectivityProbe, over family: IPAddress.Family, timeout: Duration) async -> ProbeResult
    {
        let clock = ContinuousClock()
        let start = clock.now
        let deadline = start + timeout
        func result(_ status: Int?, _ verdict: ProbeVerdict) -> ProbeResult {
            ProbeResult(probe: probe, family: family, status: status, latency: clock.now - start, verdict: verdict)
        }
        guard let (head, host) = HTTPRequest.get(probe.url) else {
            return result(nil, .failed("the probe's URL cannot be sent"))
        }
        var override: [String: String] = [:]
        if let literal = IPAddress(host) {
            guard literal.family == family else { return result(nil, .failed("\(host) is not an \(family) address")) }
        } else {
            switch await Self.resolve(host, family: family, timeout: timeout) {
            case .success(let addresses):
                override[host] = addresses[0].description
            case .failure(let error):
                return result(nil, .failed("DNS: \(error)"))
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
            var prefix: [UInt8] = []
            var length = 0
            do {
                for try await chunk in body {
                    length += chunk.count
                    if prefix.count < 4096 { prefix += chunk.prefix(4096 - prefix.count) }
                    if length > ConnectivityProbe.maximumBodySize { break } // a portal's page: enough read
                }
            } catch {
                // A body cut short still says what answered; its length so far is the evidence.
            }
            let verdict = ProbeJudge.judge(
                probe, status: response.status.code,
                location: response.headerFields[.location],
                networkManagerStatus: response.headerFields[HTTPField.Name("X-NetworkManager-Status")!],
                bodyPrefix: prefix, bodyLength: length)
            return result(response.status.code, verdict)
        } catch {
            if error.kind == .tlsFailure { return result(nil, .intercepted(error.detail)) }
            return result(nil, .failed(error.detail))
        }
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
