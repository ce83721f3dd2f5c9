import Clocks
import Dispatch
import Foundation
import NetReachConnectivity
import NetReachTesting
import Testing

@testable import NetReach

/// RFC 8908: what an API answer and a networkd link state file mean, and how the monitor uses the
/// announced API (asked first, authoritative for a portal, the probes decide otherwise).
@Suite("Captive-portal API (RFC 8908)")
struct CaptivePortalAPITests {
    @Test(
        "Answers: a boolean captive is required; https URLs only; other keys ignored",
        arguments: [
            (
                #"{"captive": true, "user-portal-url": "https://login.test/", "seconds-remaining": 300}"#,
                CaptivePortalAPI.Status(
                    isCaptive: true, userPortalURL: URL(string: "https://login.test/"), secondsRemaining: 300)
                    as CaptivePortalAPI.Status?, ""
            ),
            (
                #"{"captive": false, "bytes-remaining": 1000000, "can-extend-session": false}"#,
                CaptivePortalAPI.Status(isCaptive: false), ""
            ),
            (
                #"{"captive": true, "user-portal-url": "http://login.test/", "venue-info-url": "https://venue.test/"}"#,
                CaptivePortalAPI.Status(isCaptive: true, venueInfoURL: URL(string: "https://venue.test/")), ""
            ),
            (#"{"captive": true, "seconds-remaining": -5}"#, CaptivePortalAPI.Status(isCaptive: true), ""),
            (#"{"captive": 1}"#, nil, "\"captive\" has the wrong type"),
            (#"{"captive": "true"}"#, nil, "\"captive\" has the wrong type"),
            (#"{"user-portal-url": "https://login.test/"}"#, nil, "no \"captive\""),
            (#"[true]"#, nil, "not a JSON object"),
            (#"<html>Sign in</html>"#, nil, "not JSON"),
            ("", nil, "not JSON"),
        ])
    func answers(_ body: String, _ expected: CaptivePortalAPI.Status?, _ reason: String) {
        do {
            let status = try CaptivePortalAPI.Status(parsing: Array(body.utf8))
            #expect(status == expected, "\(body)")
        } catch {
            #expect(expected == nil, "\(body): \(error)")
            #expect(error.description.contains(reason), "\(body): \(error)")
        }
    }

    @Test(
        "Link state files: CAPTIVE_PORTAL as networkd writes it; anything else is no API",
        arguments: [
            (
                "ADMIN_STATE=configured\nOPER_STATE=routable\nCAPTIVE_PORTAL=https://portal.test/api\n",
                "https://portal.test/api"
            ),
            ("CAPTIVE_PORTAL=https://[2001:db8::1]:8443/captive\r\n", "https://[2001:db8::1]:8443/captive"),
            ("CAPTIVE_PORTAL=http://portal.test/api\n", nil), // RFC 8908: https only
            ("CAPTIVE_PORTAL=\n", nil),
            ("CAPTIVE_PORTAL=https://\n", nil),
            ("# CAPTIVE_PORTAL=https://portal.test/\nDNS=192.0.2.53\n", nil),
            ("\u{0}\u{1}binary garbage CAPTIVE_PORTAL", nil),
            ("", nil),
        ] as [(String, String?)])
    func linkState(_ text: String, _ expected: String?) {
        #expect(
            CaptivePortalAPI.announcedURL(inLinkState: text)?.absoluteString == expected, "\(text.debugDescription)")
    }

    @Test("A link without a state file, or an index that cannot be one, has no API")
    func missingFiles() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "netreach-links-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try "CAPTIVE_PORTAL=https://portal.test/api\n".write(
            to: directory.appendingPathComponent("7"), atomically: true, encoding: .utf8)
        #expect(CaptivePortalAPI.announcedURL(interfaceIndex: 7, stateDirectory: directory.path)?.host == "portal.test")
        #expect(CaptivePortalAPI.announcedURL(interfaceIndex: 8, stateDirectory: directory.path) == nil)
        #expect(CaptivePortalAPI.announcedURL(interfaceIndex: 0, stateDirectory: directory.path) == nil)
        #expect(CaptivePortalAPI.announcedURL(interfaceIndex: 7, stateDirectory: directory.path + "/none") == nil)
    }

    /// A monitor over a simulated network whose preferred interface networkd says has an API.
    static func monitor(
        _ prober: ScriptedProber, clock: TestClock<Duration>, announced: Bool = true,
        usesAPI: Bool = true
    ) throws -> (ConnectivityMonitor, PathMonitor, URL) {
        let network = SimulatedNetwork.connected(.wifi, name: "wlan0")
        let paths = PathMonitor(source: network)
        paths.start(queue: DispatchQueue(label: "paths"))
        let index = try #require(paths.currentPath.primaryInterface?.index)
        let links = FileManager.default.temporaryDirectory.appendingPathComponent("netreach-links-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: links, withIntermediateDirectories: true)
        if announced {
            try "CAPTIVE_PORTAL=https://portal.test/api\n".write(
                to: links.appendingPathComponent("\(index)"), atomically: true, encoding: .utf8)
        }
        var configuration = ConnectivityMonitor.Configuration(probes: [ConnectivityMonitorTests.probe])
        configuration.linkStateDirectory = links.path
        configuration.usesCaptivePortalAPI = usesAPI
        let monitor = ConnectivityMonitor(
            configuration: configuration, pathMonitor: paths, prober: prober, clock: clock)
        monitor.start(queue: DispatchQueue(label: "connectivity"))
        return (monitor, paths, links)
    }

    @Test("Captive: a portal with the API's login page, and no probe sent")
    func captiveIsAPortalWithoutProbes() async throws {
        let prober = ScriptedProber()
        prober.answerAPI(
            .answered(
                CaptivePortalAPI.Status(isCaptive: true, userPortalURL: URL(string: "https://login.test/")),
                latency: .milliseconds(3)))
        let clock = TestClock()
        let (monitor, paths, links) = try Self.monitor(prober, clock: clock)
        defer {
            monitor.cancel()
            paths.cancel()
            try? FileManager.default.removeItem(at: links)
        }
        let now = try await ConnectivityMonitorTests.settle(monitor, clock: clock) {
            $0.level != .unknown && $0.level != .local
        }
        #expect(now.level == .portal(loginURL: URL(string: "https://login.test/")))
        #expect(prober.total == 0, "the network's word stands")
        #expect(prober.apiAsked == [URL(string: "https://portal.test/api")!])
        #expect(now.ipv4.evidence.first?.verdict.description.contains("RFC 8908") == true, "\(now)")

        // Signed in: the API says so at the next round (1 s later), and the probes decide.
        prober.answerAPI(.answered(CaptivePortalAPI.Status(isCaptive: false), latency: .milliseconds(3)))
        await clock.advance(by: .seconds(1))
        let signedIn = try await ConnectivityMonitorTests.settle(monitor, clock: clock) { $0.level == .full }
        #expect(signedIn.level == .full)
        #expect(prober.sent(.ipv4) == 1)
        #expect(prober.apiAsked.count == 2)
    }

    @Test(
        "The API cannot be asked, or is not announced, or not wanted: the probes decide",
        arguments: [
            (true, true, 1), (false, true, 0), (true, false, 0),
        ])
    func probesDecide(announced: Bool, usesAPI: Bool, asked: Int) async throws {
        let prober = ScriptedProber(
            ipv4: .portal(loginURL: URL(string: "http://login.hotel.test/"), evidence: "HTTP 302 redirect"))
        prober.answerAPI(.failed("the API: Connection refused (errno 111)"))
        let clock = TestClock()
        let (monitor, paths, links) = try Self.monitor(prober, clock: clock, announced: announced, usesAPI: usesAPI)
        defer {
            monitor.cancel()
            paths.cancel()
            try? FileManager.default.removeItem(at: links)
        }
        let now = try await ConnectivityMonitorTests.settle(monitor, clock: clock) {
            $0.level != .unknown && $0.level != .local
        }
        #expect(now.level == .portal(loginURL: URL(string: "http://login.hotel.test/")))
        #expect(prober.sent(.ipv4) == 1)
        #expect(prober.apiAsked.count == asked)
    }
}
