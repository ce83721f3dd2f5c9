#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Judges one probe's HTTP answer as its bytes arrive, with NetworkManager's rules
/// (`nm-connectivity.c`) as the reference: the head decides what it can (a redirect, a status
/// other than the one expected, 204 where no content is expected, NetworkManager's
/// `X-NetworkManager-Status: online`); an expected text is compared byte by byte as the body
/// arrives, so the verdict comes as soon as the text has arrived (passed) or a byte differs
/// (portal), whatever follows. A body that ends before the whole text is a portal (NetworkManager's
/// "unexpected short response"); a body cut before a verdict (the probe's deadline, a reset) is a
/// failure, so `limited`, whatever part of the text arrived (NetworkManager's "timeout").
///
/// ```swift
/// var answer = ProbeAnswer(probe, status: 200, location: nil, networkManagerStatus: nil)
/// for chunk in chunks where answer.verdict == nil { answer.receive(chunk) }
/// let verdict = answer.verdict ?? answer.end()          // or answer.cut("timed out") on an error
/// ```
package struct ProbeAnswer: Sendable, Hashable {
    package let probe: ConnectivityProbe
    package let status: Int
    /// The verdict, once the bytes so far decide it.
    package private(set) var verdict: ProbeVerdict?
    /// Body bytes received.
    package private(set) var received = 0
    /// How many bytes of the expected text have arrived, all matching.
    private var matched = 0

    /// The answer's head: `status`, the `Location` header and NetworkManager's
    /// `X-NetworkManager-Status` header.
    package init(_ probe: ConnectivityProbe, status: Int, location: String?, networkManagerStatus: String?) {
        self.probe = probe
        self.status = status
        verdict = Self.judgeHead(probe, status: status, location: location, networkManagerStatus: networkManagerStatus)
    }

    private static func judgeHead(
        _ probe: ConnectivityProbe, status: Int, location: String?, networkManagerStatus: String?
    ) -> ProbeVerdict? {
        if networkManagerStatus?.lowercased() == "online" { return .passed }
        if (300...399).contains(status) {
            // Never followed: where it points is where to sign in.
            let target = location.flatMap { URL(string: $0, relativeTo: probe.url)?.absoluteURL }
            return .portal(
                loginURL: target,
                evidence: "HTTP \(status) redirect"
                    + (target.map { " to \($0.absoluteString)" } ?? " without a Location"))
        }
        switch probe.expectation {
        case .noContent:
            // As NetworkManager with an empty `response=`: a 204 whatever it carries, or a 200
            // whose body turns out empty.
            if status == 204 { return .passed }
            if status != 200 { return .portal(loginURL: nil, evidence: "HTTP \(status) where 204 was expected") }
        case .status(let expected):
            if status != expected {
                return .portal(loginURL: nil, evidence: "HTTP \(status) where \(expected) was expected")
            }
        case .bodyPrefix(let text):
            if status != 200 { return .portal(loginURL: nil, evidence: "HTTP \(status) where 200 was expected") }
            if text.isEmpty { return .passed }
        }
        return nil
    }

    /// Takes the next bytes of the body; returns the verdict if they decide it (then stop reading).
    @discardableResult
    package mutating func receive(_ chunk: some Collection<UInt8>) -> ProbeVerdict? {
        guard verdict == nil, !chunk.isEmpty else { return verdict }
        if case .bodyPrefix(let text) = probe.expectation {
            let expected = Array(text.utf8)
            let compared = min(chunk.count, expected.count - matched)
            if !chunk.prefix(compared).elementsEqual(expected[matched..<(matched + compared)]) {
                received += chunk.count
                verdict = .portal(
                    loginURL: nil,
                    evidence:
                        "HTTP 200 with another body (it differs from the expected text at byte \(firstDifference(chunk, expected) + 1))"
                )
                return verdict
            }
            matched += compared
            received += chunk.count
            if matched == expected.count { verdict = .passed }
            return verdict
        }
        received += chunk.count
        if received > ConnectivityProbe.maximumBodySize {
            verdict = .portal(
                loginURL: nil, evidence: "HTTP \(status) with a body over \(ConnectivityProbe.maximumBodySize) bytes")
        }
        return verdict
    }

    /// The index in the whole body of the first byte of `chunk` that is not the expected one.
    private func firstDifference(_ chunk: some Collection<UInt8>, _ expected: [UInt8]) -> Int {
        var index = matched
        for byte in chunk {
            if index >= expected.count || byte != expected[index] { break }
            index += 1
        }
        return index
    }

    /// The body ended whole: the verdict.
    package mutating func end() -> ProbeVerdict {
        if let verdict { return verdict }
        let decided: ProbeVerdict
        switch probe.expectation {
        case .noContent:
            decided =
                received == 0 ? .passed : .portal(loginURL: nil, evidence: "HTTP \(status) where 204 was expected")
        case .status:
            decided = .passed
        case .bodyPrefix:
            decided = .portal(
                loginURL: nil,
                evidence: "HTTP 200 whose body ends after \(received) bytes, before the expected text")
        }
        verdict = decided
        return decided
    }

    /// The body stopped with an error (`reason`) before it ended: the verdict so far, or a failure
    /// if there was none yet.
    package mutating func cut(_ reason: String) -> ProbeVerdict {
        if let verdict { return verdict }
        let arrived: String
        if case .bodyPrefix(let text) = probe.expectation {
            arrived = "after \(matched) of the \(text.utf8.count) bytes of the expected text"
        } else {
            arrived = "after \(received) bytes of HTTP \(status)"
        }
        let decided = ProbeVerdict.failed("the body stopped \(arrived): \(reason)")
        verdict = decided
        return decided
    }
}
