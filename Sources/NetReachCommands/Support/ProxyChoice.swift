import ArgumentParser
import NetReachHTTP

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `--proxy` and `--noproxy` over the environment's proxies, read as curl reads them: one reading
/// for `get` and for the probes of `check`, `watch`, `wait` and `serve`, so that a probe goes
/// where a request goes.
///
/// ```swift
/// let proxies = ProxyChoice.settings(proxy: "http://127.0.0.1:3128", noProxy: "localhost")
/// ```
enum ProxyChoice {
    /// Refuses a `--proxy` that is not an http proxy URL (an empty one means "directly").
    static func validate(_ proxy: String?) throws(ValidationError) {
        guard let proxy, !proxy.isEmpty else { return }
        guard let url = URL(string: proxy.contains("://") ? proxy : "http://" + proxy),
            url.host?.isEmpty == false, url.scheme?.lowercased() == "http"
        else {
            throw ValidationError("--proxy '\(proxy)' is not an http proxy URL such as http://proxy.example:3128.")
        }
    }

    /// The environment's proxies (``NetReachHTTP/ProxySettings/environment(_:)``), with `proxy`
    /// in place of both when given ('' for none) and `noProxy` in place of `no_proxy`.
    static func settings(
        proxy: String?, noProxy: String?, environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> ProxySettings {
        var settings = ProxySettings.environment(environment)
        if let proxy {
            if proxy.isEmpty {
                settings = .none
            } else {
                let url = URL(string: proxy.contains("://") ? proxy : "http://" + proxy)
                settings.http = url
                settings.https = url
            }
        }
        if let noProxy { settings.noProxy = ProxySettings.parseList(noProxy) }
        return settings
    }
}
