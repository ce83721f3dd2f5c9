import Foundation
import Testing

@testable import NetReachConnectivity

@Suite("ConnectivityProbe: --probe URL[=EXPECT] and NETREACH_PROBE_URLS")
struct ConnectivityProbeTests {
    @Test(
        "URL and expectation",
        arguments: [
            ("http://192.0.2.1/generate_204", "http://192.0.2.1/generate_204", ConnectivityProbe.Expectation.noContent),
            ("http://192.0.2.1/generate_204=204", "http://192.0.2.1/generate_204", .noContent),
            ("http://192.0.2.1/ok=200", "http://192.0.2.1/ok", .status(200)),
            (
                "https://[2001:db8::1]:8443/check=NetworkManager is online", "https://[2001:db8::1]:8443/check",
                .bodyPrefix("NetworkManager is online")
            ),
            // The query's own name=value is not an expectation …
            ("http://192.0.2.1/check?a=b", "http://192.0.2.1/check?a=b", .noContent),
            ("http://192.0.2.1/check?a=b&c=d", "http://192.0.2.1/check?a=b&c=d", .noContent),
            // … but an '=' after a complete pair is.
            ("http://192.0.2.1/check?a=b=200", "http://192.0.2.1/check?a=b", .status(200)),
            ("http://192.0.2.1/check?flag=success", "http://192.0.2.1/check?flag=success", .noContent),
            // Three digits that are not a status are text.
            ("http://192.0.2.1/x=999", "http://192.0.2.1/x", .bodyPrefix("999")),
        ] as [(String, String, ConnectivityProbe.Expectation)])
    func parses(text: String, url: String, expectation: ConnectivityProbe.Expectation) throws {
        let probe = try ConnectivityProbe(parsing: text)
        #expect(probe.url.absoluteString == url)
        #expect(probe.expectation == expectation)
    }

    @Test(
        "Not a probe: a clear error",
        arguments: [
            "ftp://192.0.2.1/file", "192.0.2.1/generate_204", "http://", "http:///path", "not a url", "",
            "http://192.0.2.1/x=", "file:///etc/passwd",
        ])
    func rejects(text: String) {
        #expect(throws: ConnectivityProbeError.self) { try ConnectivityProbe(parsing: text) }
    }

    @Test("NETREACH_PROBE_URLS: commas or newlines, spaces trimmed, texts may hold spaces")
    func environment() throws {
        #expect(try ConnectivityProbe.fromEnvironment([:]).isEmpty)
        #expect(try ConnectivityProbe.fromEnvironment(["NETREACH_PROBE_URLS": " "]).isEmpty)
        let probes = try ConnectivityProbe.fromEnvironment([
            "NETREACH_PROBE_URLS":
                "http://192.0.2.1/204, http://[2001:db8::1]/check=NetworkManager is online\nhttps://192.0.2.2/ok=200,"
        ])
        #expect(
            probes.map(\.url.absoluteString) == [
                "http://192.0.2.1/204", "http://[2001:db8::1]/check", "https://192.0.2.2/ok",
            ])
        #expect(probes.map(\.expectation) == [.noContent, .bodyPrefix("NetworkManager is online"), .status(200)])
        #expect(throws: ConnectivityProbeError.self) {
            try ConnectivityProbe.fromEnvironment(["NETREACH_PROBE_URLS": "http://192.0.2.1/204, gopher://x/"])
        }
    }
}

@Suite("Judging a probe's answer (NetworkManager's rules)")
struct ProbeJudgeTests {
    static let url = URL(string: "http://probe.test/generate_204")!

    /// The verdict on an answer whose body arrives whole as `body` (then, up to `length`, filler).
    static func judge(
        _ expectation: ConnectivityProbe.Expectation = .noContent, status: Int, location: String? = nil,
        header: String? = nil, body: String = "", length: Int? = nil
    ) -> ProbeVerdict {
        var answer = ProbeAnswer(
            ConnectivityProbe(url, expecting: expectation), status: status, location: location,
            networkManagerStatus: header)
        answer.receive(Array(body.utf8))
        let filler = (length ?? body.utf8.count) - body.utf8.count
        if filler > 0 { answer.receive([UInt8](repeating: UInt8(ascii: "x"), count: filler)) }
        return answer.verdict ?? answer.end()
    }

    @Test func aNoContentProbePassesOn204OrAnEmpty200() {
        #expect(Self.judge(status: 204) == .passed)
        #expect(Self.judge(status: 200) == .passed) // NetworkManager accepts an empty 200 too
        #expect(
            Self.judge(status: 200, body: "x") == .portal(loginURL: nil, evidence: "HTTP 200 where 204 was expected"))
        #expect(Self.judge(status: 200, body: "<html>Welcome to Hotel Wi-Fi</html>").isPortal)
        #expect(Self.judge(status: 503).isPortal)
    }

    @Test func aRedirectIsAPortalAndItsLocationTheLoginURL() {
        #expect(
            Self.judge(status: 302, location: "http://login.hotel.test/?from=probe")
                == .portal(
                    loginURL: URL(string: "http://login.hotel.test/?from=probe"),
                    evidence: "HTTP 302 redirect to http://login.hotel.test/?from=probe"))
        // A relative Location is resolved against the probe's URL.
        guard case .portal(let login?, _) = Self.judge(status: 307, location: "/login") else {
            Issue.record("a 307 should be a portal with a login URL")
            return
        }
        #expect(login.absoluteString == "http://probe.test/login")
        guard case .portal(nil, _) = Self.judge(status: 301) else {
            Issue.record("a redirect without Location is still a portal")
            return
        }
    }

    @Test func aBodyPrefixProbeNeeds200AndTheText() {
        let expectation = ConnectivityProbe.Expectation.bodyPrefix("NetworkManager is online")
        #expect(Self.judge(expectation, status: 200, body: "NetworkManager is online\n") == .passed)
        #expect(Self.judge(expectation, status: 200, body: "NetworkManager is").isPortal)
        #expect(Self.judge(expectation, status: 200, body: "<html>Sign in</html>").isPortal)
        #expect(Self.judge(expectation, status: 204).isPortal)
    }

    @Test func moreThan100KiBIsAPortalWhateverItSays() {
        #expect(Self.judge(.status(200), status: 200, length: ConnectivityProbe.maximumBodySize) == .passed)
        #expect(Self.judge(.status(200), status: 200, length: 200 * 1024).isPortal)
        #expect(Self.judge(status: 200, length: 200 * 1024).isPortal)
        // As NetworkManager: an expected text decides as soon as it has arrived; the rest is not read.
        let expectation = ConnectivityProbe.Expectation.bodyPrefix("ok")
        #expect(
            Self.judge(expectation, status: 200, body: "ok", length: ConnectivityProbe.maximumBodySize + 1) == .passed)
    }

    static let online = ConnectivityProbe(url, expecting: .bodyPrefix("NetworkManager is online"))

    @Test(
        "The expected text decides byte by byte as it arrives: passed once it is all there, portal at the first wrong byte"
    )
    func anExpectedTextIsComparedAsItArrives() {
        var answer = ProbeAnswer(Self.online, status: 200, location: nil, networkManagerStatus: nil)
        #expect(answer.verdict == nil)
        for piece in ["Net", "work", "Manager is onl"] { #expect(answer.receive(Array(piece.utf8)) == nil) }
        #expect(answer.receive(Array("ine and more".utf8)) == .passed)
        var wrong = ProbeAnswer(Self.online, status: 200, location: nil, networkManagerStatus: nil)
        #expect(wrong.receive(Array("Network".utf8)) == nil)
        #expect(
            wrong.receive(Array("Mangler".utf8))
                == .portal(
                    loginURL: nil, evidence: "HTTP 200 with another body (it differs from the expected text at byte 11)"
                ))
    }

    @Test("A body cut by the deadline is no portal: a prefix of the text, or nothing, is a failure (limited)")
    func aBodyCutBeforeAVerdictIsAFailure() {
        var answer = ProbeAnswer(Self.online, status: 200, location: nil, networkManagerStatus: nil)
        answer.receive(Array("NetworkManager is".utf8))
        #expect(
            answer.cut("the transfer was not over by its deadline")
                == .failed(
                    "the body stopped after 17 of the 24 bytes of the expected text: the transfer was not over by its deadline"
                ))
        var empty200 = ProbeAnswer(ConnectivityProbe(Self.url), status: 200, location: nil, networkManagerStatus: nil)
        guard case .failed = empty200.cut("connection reset") else {
            Issue.record("a 200 whose body was cut is not known to be empty")
            return
        }
        // Decided before the cut: the cut changes nothing.
        var decided = ProbeAnswer(Self.online, status: 200, location: nil, networkManagerStatus: nil)
        decided.receive(Array("NetworkManager is online".utf8))
        #expect(decided.cut("timed out") == .passed)
        var redirect = ProbeAnswer(Self.online, status: 302, location: "/login", networkManagerStatus: nil)
        #expect(redirect.cut("timed out").isPortal)
    }

    @Test("A body that ends before the whole text is a portal (NetworkManager's unexpected short response)")
    func aShortBodyIsAPortal() {
        var answer = ProbeAnswer(Self.online, status: 200, location: nil, networkManagerStatus: nil)
        answer.receive(Array("NetworkManager".utf8))
        #expect(
            answer.end()
                == .portal(loginURL: nil, evidence: "HTTP 200 whose body ends after 14 bytes, before the expected text")
        )
    }

    @Test func networkManagersOnlineHeaderPasses() {
        #expect(Self.judge(status: 200, header: "online") == .passed)
        #expect(Self.judge(status: 200, header: "offline", body: "offline").isPortal)
    }

    @Test func anExpectedStatusPassesWithAnyBody() {
        #expect(Self.judge(.status(200), status: 200, body: "anything") == .passed)
        #expect(Self.judge(.status(200), status: 204).isPortal)
    }
}

extension ProbeVerdict {
    var isPortal: Bool {
        if case .portal = self { return true }
        return false
    }
}
