import Foundation

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

/// Judges a probe's HTTP answer, with NetworkManager's rules as the reference.
package enum ProbeJudge {
    /// The verdict on an answer: `status`, the `Location` header, NetworkManager's
    /// `X-NetworkManager-Status` header, and the body's first bytes (`bodyLength` counts all of it,
    /// up to one byte past the limit).
    package static func judge(
        _ probe: ConnectivityProbe, status: Int, location: String?, networkManagerStatus: String?,
        bodyPrefix: [UInt8], bodyLength: Int
    ) -> ProbeVerdict {
        if networkManagerStatus?.lowercased() == "online" { return .passed }
        if (300...399).contains(status) {
            // Never followed: where it points is where to sign in.
            let target = location.flatMap { URL(string: $0, relativeTo: probe.url)?.absoluteURL }
            return .portal(
                loginURL: target,
                evidence: "HTTP \(status) redirect"
                    + (target.map { " to \($0.absoluteString)" } ?? " without a Location"))
        }
        if bodyLength > ConnectivityProbe.maximumBodySize {
            return .portal(
                loginURL: nil, evidence: "HTTP \(status) with a body over \(ConnectivityProbe.maximumBodySize) bytes")
        }
        switch probe.expectation {
        case .noContent:
            // As NetworkManager with an empty `response=`: a 204, or a 200 with an empty body.
            if status == 204 || (status == 200 && bodyLength == 0) { return .passed }
            return .portal(loginURL: nil, evidence: "HTTP \(status) where 204 was expected")
        case .status(let expected):
            if status == expected { return .passed }
            return .portal(loginURL: nil, evidence: "HTTP \(status) where \(expected) was expected")
        case .bodyPrefix(let text):
            guard status == 200 else {
                return .portal(loginURL: nil, evidence: "HTTP \(status) where 200 was expected")
            }
            if bodyPrefix.starts(with: Array(text.utf8)) { return .passed }
            return .portal(loginURL: nil, evidence: "HTTP 200 with another body (\(bodyLength) bytes)")
        }
    }
}
