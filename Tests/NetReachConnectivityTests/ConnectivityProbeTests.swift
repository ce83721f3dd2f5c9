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

    static func judge(
        _ expectation: ConnectivityProbe.Expectation = .noContent, status: Int, location: String? = nil,
        header: String? = nil, body: String = "", length: Int? = nil
    ) -> ProbeVerdict {
        let bytes = Array(body.utf8)
        return ProbeJudge.judge(
            ConnectivityProbe(url, expecting: expectation), status: status, location: location,
            networkManagerStatus: header, bodyPrefix: bytes, bodyLength: length ?? bytes.count)
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
        let expectation = ConnectivityProbe.Expectation.bodyPrefix("ok")
        #expect(Self.judge(expectation, status: 200, body: "ok", length: ConnectivityProbe.maximumBodySize) == .passed)
        #expect(
            Self.judge(expectation, status: 200, body: "ok", length: ConnectivityProbe.maximumBodySize + 1).isPortal)
        #expect(Self.judge(.status(200), status: 200, length: 200 * 1024).isPortal)
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
