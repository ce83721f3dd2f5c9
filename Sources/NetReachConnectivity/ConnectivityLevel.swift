import NetReach

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// How far the network reaches: a path only says a route exists; the level says whether the
/// internet answers through it.
///
/// The levels mean what NetworkManager's connectivity states and GLib's `GNetworkConnectivity`
/// mean:
///
/// | NetReach | NetworkManager | GLib |
/// | --- | --- | --- |
/// | `unknown` | `UNKNOWN` | (none: GLib always answers) |
/// | `none` | `NONE` (no carrier or no address) | `LOCAL` |
/// | `local` | `NONE` (no route beyond the link) | `LOCAL` |
/// | `limited` | `LIMITED` | `LIMITED` |
/// | `portal` | `PORTAL` | `PORTAL` |
/// | `full` | `FULL` | `FULL` |
///
/// NetworkManager does not say which of its two `NONE`s it means; GLib folds both into `LOCAL`.
/// Unlike both, a portal here may carry where to sign in.
///
/// ```swift
/// switch level {
/// case .full: sync()
/// case .portal(let login): showLogin(login)          // hotel Wi-Fi: sign in first
/// case .limited, .local, .none: showOffline()
/// case .unknown: break                                // not judged yet
/// }
/// ```
public enum ConnectivityLevel: Sendable, Hashable, CustomStringConvertible {
    /// Not judged yet (no path seen, or the first probes have not answered).
    case unknown
    /// No usable path: no route anywhere.
    case none
    /// A path, but no route beyond the local network (no default route).
    case local
    /// A route to the internet exists, but probes through it fail: no answer, refused, DNS
    /// failing, or held open without an answer.
    case limited
    /// Something answered in the probe's place: a captive portal (a redirect, another page, an
    /// intercepted TLS connection). `loginURL` is where to sign in, when it said.
    case portal(loginURL: URL?)
    /// Probes pass: the internet answers.
    case full

    /// What a path that cannot reach the internet says for itself, without a probe: ``local``
    /// when there is a local network but no default route, ``none`` for every other reason (no
    /// address, link down, no interface, a refusing route).
    static func withoutRoute(_ reason: UnsatisfiedReason?) -> ConnectivityLevel {
        reason == .noDefaultRoute ? .local : .none
    }

    /// `full`, `portal`, `limited`, `local`, `none`, `unknown`: the level without its login URL
    /// (`check --json`'s `level`, the `level` label of `netreach_connectivity_level`).
    ///
    /// ```swift
    /// ConnectivityLevel.portal(loginURL: URL(string: "http://login.example/")).name   // "portal"
    /// ```
    package var name: String {
        if case .portal = self { return "portal" }
        return description
    }

    /// `full`, `portal(http://login.example/)`, …
    public var description: String {
        switch self {
        case .unknown: "unknown"
        case .none: "none"
        case .local: "local"
        case .limited: "limited"
        case .portal(let loginURL?): "portal(\(loginURL.absoluteString))"
        case .portal(nil): "portal"
        case .full: "full"
        }
    }
}
