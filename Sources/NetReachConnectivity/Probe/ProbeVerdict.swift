#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What one probe's answer says.
public enum ProbeVerdict: Sendable, Hashable, CustomStringConvertible {
    /// The expected answer: the internet answers.
    case passed
    /// Something else answered in the probe server's place (a redirect, another status or body,
    /// a page too large for a probe): a captive portal. `loginURL` is a redirect's `Location`.
    case portal(loginURL: URL?, evidence: String)
    /// An https probe's certificate was not trusted: something intercepted the connection and
    /// answered for the host. A portal's sign (or a middlebox's), not "offline".
    case intercepted(String)
    /// No answer: refused, unreachable, a name that does not resolve, a timeout, a reset.
    case failed(String)

    /// `passed`, `portal: redirect to http://login.example/`, `failed: connection refused`, …
    public var description: String {
        switch self {
        case .passed: "passed"
        case .portal(_, let evidence): "portal: \(evidence)"
        case .intercepted(let detail): "intercepted: \(detail)"
        case .failed(let detail): "failed: \(detail)"
        }
    }

    /// Whether the answer came from something other than the network path failing.
    var answeredInPlace: Bool {
        switch self {
        case .portal, .intercepted: true
        case .passed, .failed: false
        }
    }
}
