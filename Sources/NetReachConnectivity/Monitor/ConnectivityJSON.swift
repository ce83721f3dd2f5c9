import NetReach

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A connectivity verdict's JSON: the path's object (``PathJSON``) with the verdict as its
/// `connectivity` key, as `check --json` prints it, every `watch --internet --json` line and every
/// serve `connectivity` event carries. The verdict's object: `level`, `loginURL` (a portal's, when
/// known), `ipv4` and `ipv6` (each a `level` and its `probes`), `probesSuspended` (when no probe
/// was sent); a probe: `url`, `expect`, `family`, `status` (when an answer came),
/// `latencyMilliseconds` (to the microsecond), `verdict`, and `detail`, `loginURL`, `proxy` when
/// they apply. Keys sorted and absent values left out, byte for byte as `JSONEncoder` writes the
/// same (`JSONParityTests`).
///
/// ```swift
/// ConnectivityJSON.line(verdict, at: Date())
/// // {"availableInterfaces":[...],"connectivity":{"ipv4":{"level":"full","probes":[...]},...},...}
/// ```
package enum ConnectivityJSON {
    /// The verdict's path with its `connectivity` key, and `timestamp` when `date` is given.
    package static func line(_ verdict: Connectivity, at date: Date?) -> String {
        var text = JSONBuffer(capacity: 1024)
        write(verdict, at: date, into: &text)
        return text.text
    }

    /// Appends ``line(_:at:)``'s object to `text`.
    package static func write(_ verdict: Connectivity, at date: Date?, into text: inout JSONBuffer) {
        PathJSON.write(verdict.path, at: date, into: &text) { writeVerdict(verdict, into: &$0) }
    }

    /// Appends the verdict's own object (the value of `connectivity`).
    private static func writeVerdict(_ verdict: Connectivity, into text: inout JSONBuffer) {
        text.append("{\"ipv4\":")
        write(verdict.ipv4, into: &text)
        text.append(",\"ipv6\":")
        write(verdict.ipv6, into: &text)
        text.append(",\"level\":")
        text.appendString(verdict.level.name)
        if case .portal(let login?) = verdict.level {
            text.append(",\"loginURL\":")
            text.appendString(login.absoluteString)
        }
        if let suspended = verdict.probesSuspended {
            text.append(",\"probesSuspended\":")
            text.appendString(suspended)
        }
        text.append("}")
    }

    private static func write(_ family: Connectivity.Family, into text: inout JSONBuffer) {
        text.append("{\"level\":")
        text.appendString(family.level.name)
        text.append(",\"probes\":[")
        for (position, result) in family.evidence.enumerated() {
            if position > 0 { text.append(",") }
            write(result, into: &text)
        }
        text.append("]}")
    }

    private static func write(_ result: ProbeResult, into text: inout JSONBuffer) {
        var detail: String?
        var loginURL: URL?
        let verdict: StaticString
        switch result.verdict {
        case .passed: verdict = "passed"
        case .portal(let login, let evidence): (verdict, detail, loginURL) = ("portal", evidence, login)
        case .intercepted(let why): (verdict, detail) = ("intercepted", why)
        case .failed(let why): (verdict, detail) = ("failed", why)
        }
        text.append("{")
        if let detail {
            text.append("\"detail\":")
            text.appendString(detail)
            text.append(",")
        }
        text.append("\"expect\":")
        text.appendString(result.probe.expectation.description)
        text.append(",\"family\":")
        text.appendQuoted(verbatim: result.family.rawValue)
        text.append(",\"latencyMilliseconds\":")
        // To the microsecond.
        text.append((result.latency.milliseconds * 1000).rounded() / 1000)
        if let loginURL {
            text.append(",\"loginURL\":")
            text.appendString(loginURL.absoluteString)
        }
        if let proxy = result.proxy {
            text.append(",\"proxy\":")
            text.appendString(proxy.absoluteString)
        }
        if let status = result.status {
            text.append(",\"status\":")
            text.append(status)
        }
        text.append(",\"url\":")
        text.appendString(result.probe.url.absoluteString)
        text.append(",\"verdict\":\"")
        text.append(verdict)
        text.append("\"}")
    }
}
