import Dispatch
import Foundation
import NetReach
import NetReachAsyncHTTPClient
import NetReachConnectivity
import NetReachHTTP
import NetReachTestSupport
import Testing

/// Probes sent by AsyncHTTPClientProber to servers on loopback, each answer judged as
/// NetworkManager would (with this project's departures), seen from both ends.
@Suite("AsyncHTTPClientProber against loopback servers", .offPool, .timeLimit(.minutes(2)))
struct AsyncHTTPClientProberTests {
    static let prober = AsyncHTTPClientProber(settings: TransportSettings(proxy: .environment([:])))

    /// The probe timeout where the server answers: the answer, not a clock, ends these probes, so
    /// a busy machine (5 s was not enough on a loaded CI run) only makes them slower.
    static let patience: Duration = .seconds(60)

    /// A prober that trusts the test CA (and still no proxy).
    static func prober(trusting certificates: TestCertificates) -> AsyncHTTPClientProber {
        AsyncHTTPClientProber(
            settings: TransportSettings(
                tls: TLSSettings(trustRoots: .file(certificates.path("ca.pem"))), proxy: .environment([:])))
    }

    static func probe(
        _ url: String, _ expectation: ConnectivityProbe.Expectation = .noContent,
        family: IPAddress.Family = .ipv4, timeout: Duration = Self.patience
    ) async throws -> ProbeResult {
        let probe = ConnectivityProbe(try #require(URL(string: url)), expecting: expectation)
        return await prober.probe(probe, over: family, timeout: timeout)
    }

    @Test("204 passes, over IPv4 and over IPv6")
    func noContentPasses() async throws {
        for host in ["127.0.0.1", "::1"] {
            let server = try await FaultInjectingServer.start(host: host)
            let result = try await Self.probe(
                "http://\(server.authority)/status/204", family: host == "::1" ? .ipv6 : .ipv4)
            #expect(result.verdict == .passed, "\(result)")
            #expect(result.status == 204)
            #expect(result.family == (host == "::1" ? .ipv6 : .ipv4))
            #expect(server.received(path: "/status/204").count == 1)
            try await server.shutdown()
        }
    }

    @Test("A name is resolved for the family asked, and TLS-less Host stays the name")
    func nameResolvedPerFamily() async throws {
        let server = try await FaultInjectingServer.start(host: "127.0.0.1")
        defer { Task { try await server.shutdown() } }
        let port = try #require(server.authority.split(separator: ":").last)
        // localhost is in /etc/hosts: no query leaves the machine.
        let result = try await Self.probe("http://localhost:\(port)/status/204")
        #expect(result.verdict == .passed, "\(result)")
        #expect(server.received(path: "/status/204").first?.headers["host"] == "localhost:\(port)")
    }

    @Test("A redirect is a portal whose Location is the login URL, and it is not followed")
    func redirectIsAPortal() async throws {
        let server = try await FaultInjectingServer.start()
        defer { Task { try await server.shutdown() } }
        let result = try await Self.probe(
            "http://\(server.authority)/redirect?status=302&to=http%3A%2F%2F127.0.0.1%3A9%2Flogin")
        #expect(
            result.verdict
                == .portal(
                    loginURL: URL(string: "http://127.0.0.1:9/login"),
                    evidence: "HTTP 302 redirect to http://127.0.0.1:9/login"), "\(result)")
        #expect(result.status == 302)
        #expect(server.received(path: "/ok").isEmpty)
    }

    @Test("Another body is a portal; the expected text passes; more than 100 KiB is a portal")
    func bodies() async throws {
        let server = try await FaultInjectingServer.start()
        defer { Task { try await server.shutdown() } }
        #expect(
            try await Self.probe("http://\(server.authority)/ok").verdict
                == .portal(loginURL: nil, evidence: "HTTP 200 where 204 was expected"))
        #expect(try await Self.probe("http://\(server.authority)/ok", .bodyPrefix("ok")).verdict == .passed)
        let big = try await Self.probe("http://\(server.authority)/big?bytes=204800", .status(200))
        guard case .portal(nil, let evidence) = big.verdict else {
            Issue.record("a 200 KiB answer should be a portal: \(big)")
            return
        }
        #expect(evidence.contains("102400"), "\(evidence)")
    }

    @Test(
        "An expected text judged as it arrives: a prefix held past the timeout fails (limited), the whole text passes at once"
    )
    func textArrivingSlowly() async throws {
        let server = try await FaultInjectingServer.start()
        defer { Task { try await server.shutdown() } }
        // "line 0\n", then nothing: the probe's deadline cuts the body after a prefix of the text.
        // The deadline must come after the head and the first line: on a busy run 800 ms did not
        // always reach them, so a probe cut before them is asked again with a longer deadline.
        var attempt: ProbeResult?
        for timeout in [Duration.milliseconds(800), .seconds(4), .seconds(15)] {
            let result = try await Self.probe(
                "http://\(server.authority)/drip?count=5&ms=50&stallAfter=1", .bodyPrefix("line 0\nline 1\n"),
                timeout: timeout)
            attempt = result
            if case .failed(let detail) = result.verdict, detail.contains("after 7 of") { break }
        }
        let cut = try #require(attempt)
        #expect(cut.status == 200)
        guard case .failed(let detail) = cut.verdict else {
            Issue.record("a prefix cut by the deadline is no portal: \(cut)")
            return
        }
        #expect(detail.contains("after 7 of the 14 bytes of the expected text"), "\(detail)")
        // The text arrives whole while more lines are still to come: passed, without waiting for them.
        let passed = try await Self.probe(
            "http://\(server.authority)/drip?count=5&ms=50&stallAfter=2", .bodyPrefix("line 0\nline 1\n"))
        #expect(passed.verdict == .passed, "\(passed)")
        #expect(passed.latency < Self.patience, "decided before the stalled rest")
        let wrong = try await Self.probe(
            "http://\(server.authority)/drip?count=5&ms=50&stallAfter=1", .bodyPrefix("line 9"))
        #expect(wrong.verdict.isPortal, "a differing byte decides at once: \(wrong)")
    }

    @Test(
        "Through an http proxy: the probe goes where requests go, and the evidence names the proxy",
        .enabled(if: ExternalServer.available("tinyproxy")))
    func throughAProxy() async throws {
        let server = try await FaultInjectingServer.start()
        defer { Task { try await server.shutdown() } }
        let proxy = try await TinyproxyServer.start()
        defer { Task { await proxy.stop() } }
        let prober = AsyncHTTPClientProber(
            settings: TransportSettings(proxy: .environment(["http_proxy": proxy.url.absoluteString])))
        let probe = ConnectivityProbe(try #require(URL(string: "http://\(server.authority)/status/204")))
        let result = await prober.probe(probe, over: .ipv4, timeout: Self.patience)
        #expect(result.verdict == .passed, "\(result)")
        #expect(result.proxy == proxy.url)
        #expect(result.description.contains("through proxy \(proxy.url.absoluteString)"), "\(result)")
        #expect(proxy.requests().contains { $0.contains("\(server.authority)/status/204") }, "\(proxy.requests())")
        // Over IPv6, the proxy at 127.0.0.1 cannot be reached: the family is the proxy connection's.
        let overIPv6 = await prober.probe(probe, over: .ipv6, timeout: Self.patience)
        guard case .failed(let why) = overIPv6.verdict else {
            Issue.record("\(overIPv6)")
            return
        }
        #expect(why.contains("proxy"), "\(why)")
        // A proxy that refuses is the proxy's failure, named.
        let refusing = AsyncHTTPClientProber(
            settings: TransportSettings(proxy: ProxySettings(proxy: URL(string: "http://127.0.0.1:9")!)))
        let refused = await refusing.probe(probe, over: .ipv4, timeout: Self.patience)
        guard case .failed(let detail) = refused.verdict else {
            Issue.record("\(refused)")
            return
        }
        #expect(detail.contains("proxy"), "\(detail)")
        #expect(refused.proxy?.absoluteString == "http://127.0.0.1:9")
    }

    @Test("No answer is failed: refused, closed, held open past the timeout")
    func noAnswer() async throws {
        let server = try await FaultInjectingServer.start()
        let authority = server.authority
        let closed = try await Self.probe("http://\(authority)/close-before-response")
        guard case .failed = closed.verdict else {
            Issue.record("closed: \(closed)")
            return
        }
        let held = try await Self.probe("http://\(authority)/slow-headers?ms=10000", timeout: .milliseconds(300))
        guard case .failed = held.verdict else {
            Issue.record("held: \(held)")
            return
        }
        #expect(held.latency < .seconds(3), "\(held)")
        try await server.shutdown()
        let refused = try await Self.probe("http://\(authority)/status/204")
        guard case .failed(let detail) = refused.verdict else {
            Issue.record("refused: \(refused)")
            return
        }
        #expect(refused.status == nil)
        #expect(!detail.isEmpty)
    }

    @Test(
        "An https probe whose certificate is not trusted is intercepted, not offline",
        .enabled(if: ExternalServer.available("nginx", "openssl")))
    func untrustedCertificateIsIntercepted() async throws {
        try await withNginx { nginx, certificates in
            let untrusted = try await Self.probe("https://127.0.0.1:\(nginx.trusted)/generate_204", .status(200))
            guard case .intercepted(let detail) = untrusted.verdict else {
                Issue.record("expected intercepted: \(untrusted)")
                return
            }
            #expect(detail.contains("127.0.0.1"), "\(detail)")
            // With the CA trusted, the same probe reaches nginx.
            let trusting = Self.prober(trusting: certificates)
            let probe = ConnectivityProbe(
                URL(string: "https://127.0.0.1:\(nginx.trusted)/generate_204")!, expecting: .status(200))
            let trusted = await trusting.probe(probe, over: .ipv4, timeout: Self.patience)
            #expect(trusted.status != nil, "\(trusted)")
        }
    }

    @Test(
        "An https probe checks the certificate against the probe URL's host, not the address it connected to",
        .enabled(if: ExternalServer.available("nginx", "openssl")))
    func probeChecksTheURLsHost() async throws {
        try await withNginx { nginx, certificates in
            let trusting = Self.prober(trusting: certificates)
            // The probe connects to 127.0.0.1 either way; only the URL's host differs.
            let byName = ConnectivityProbe(
                URL(string: "https://localhost:\(nginx.addressOnly)/generate_204")!, expecting: .status(200))
            let result = await trusting.probe(byName, over: .ipv4, timeout: Self.patience)
            guard case .intercepted(let detail) = result.verdict else {
                Issue.record("an address-only certificate for a name should be intercepted: \(result)")
                return
            }
            #expect(detail.contains("another host name") && detail.contains("localhost"), "\(detail)")
            let byAddress = ConnectivityProbe(
                URL(string: "https://127.0.0.1:\(nginx.addressOnly)/generate_204")!, expecting: .status(200))
            #expect(await trusting.probe(byAddress, over: .ipv4, timeout: Self.patience).verdict == .passed)
        }
    }

    @Test(
        "RFC 8908: the API's answer, asked for as application/captive+json over trusted https only",
        .enabled(if: ExternalServer.available("nginx", "openssl")))
    func captivePortalAPI() async throws {
        try await withNginx { nginx, certificates in
            let trusting = Self.prober(trusting: certificates)
            let base = "https://127.0.0.1:\(nginx.trusted)"
            guard
                case .answered(let captive, _) = await trusting.captivePortalStatus(
                    at: URL(string: "\(base)/captive")!, timeout: Self.patience)
            else {
                Issue.record("the API was not answered")
                return
            }
            #expect(
                captive
                    == CaptivePortalAPI.Status(
                        isCaptive: true, userPortalURL: URL(string: "https://login.test/portal"), secondsRemaining: 30),
                "an http venue-info-url is left out")
            guard
                case .answered(let free, _) = await trusting.captivePortalStatus(
                    at: URL(string: "\(base)/not-captive")!, timeout: Self.patience)
            else {
                Issue.record("the API was not answered")
                return
            }
            #expect(!free.isCaptive)
            let failures: [(String, AsyncHTTPClientProber, String)] = [
                ("\(base)/captive-number", trusting, "\"captive\" has the wrong type"),
                ("\(base)/other", trusting, "not JSON"),
                ("\(base)/captive", Self.prober, "127.0.0.1"), // not trusted: a TLS failure
                ("http://127.0.0.1:\(nginx.plain)/captive", trusting, "not https"),
            ]
            for (url, prober, reason) in failures {
                let answer = await prober.captivePortalStatus(at: URL(string: url)!, timeout: Self.patience)
                guard case .failed(let why) = answer else {
                    Issue.record("\(url): \(answer)")
                    continue
                }
                #expect(why.contains(reason), "\(url): \(why)")
            }
        }
    }

    @Test(
        "RFC 8908 end to end: networkd announced an API that says captive; the monitor says portal with its login page, and sends no probe",
        .enabled(if: ExternalServer.available("nginx", "openssl")))
    func captivePortalAPIIsAuthoritative() async throws {
        let server = try await FaultInjectingServer.start()
        defer { Task { try await server.shutdown() } }
        let paths = PathMonitor()
        paths.start(queue: DispatchQueue(label: "paths"))
        defer { paths.cancel() }
        guard paths.currentPath.supportsIPv4, let interface = paths.currentPath.primaryInterface else { return }
        try await withNginx { nginx, certificates in
            let links = FileManager.default.temporaryDirectory.appendingPathComponent(
                "netreach-links-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: links, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: links) }
            // As systemd-networkd writes it.
            try
                "# This is private data. Do not parse.\nADMIN_STATE=configured\nOPER_STATE=routable\nCAPTIVE_PORTAL=https://127.0.0.1:\(nginx.trusted)/captive\n"
                .write(to: links.appendingPathComponent("\(interface.index)"), atomically: true, encoding: .utf8)
            var configuration = ConnectivityMonitor.Configuration(
                probes: [ConnectivityProbe(URL(string: "http://\(server.authority)/status/204")!)])
            configuration.families = [.ipv4]
            configuration.linkStateDirectory = links.path
            let prober = Self.prober(trusting: certificates)
            let monitor = ConnectivityMonitor(configuration: configuration, pathMonitor: paths, prober: prober)
            monitor.start(queue: DispatchQueue(label: "connectivity"))
            defer { monitor.cancel() }
            var level = ConnectivityLevel.unknown
            for await connectivity in monitor.updates where connectivity.level != .unknown {
                level = connectivity.level
                break
            }
            #expect(level == .portal(loginURL: URL(string: "https://login.test/portal")), "\(monitor.current)")
            #expect(
                monitor.current.ipv4.evidence.first?.verdict.description.contains("RFC 8908") == true,
                "\(monitor.current)")
            #expect(server.received(path: "/status/204").isEmpty, "the network's word stands: no probe")
        }
    }

    @Test("End to end: a ConnectivityMonitor on this machine's path, probing loopback, says full")
    func monitorEndToEnd() async throws {
        let server = try await FaultInjectingServer.start()
        defer { Task { try await server.shutdown() } }
        let paths = PathMonitor()
        paths.start(queue: DispatchQueue(label: "paths"))
        defer { paths.cancel() }
        guard paths.currentPath.supportsIPv4 else {
            // A machine without an IPv4 default route: the monitor would say local, rightly.
            return
        }
        var configuration = ConnectivityMonitor.Configuration(
            probes: [ConnectivityProbe(URL(string: "http://\(server.authority)/status/204")!)])
        configuration.families = [.ipv4]
        let monitor = ConnectivityMonitor(configuration: configuration, pathMonitor: paths, prober: Self.prober)
        monitor.start(queue: DispatchQueue(label: "connectivity"))
        defer { monitor.cancel() }
        var level = ConnectivityLevel.unknown
        for await connectivity in monitor.updates where connectivity.level != .unknown {
            level = connectivity.level
            break
        }
        #expect(level == .full, "\(monitor.current)")
        #expect(server.received(path: "/status/204").count == 1)
    }
}

extension ProbeVerdict {
    fileprivate var isPortal: Bool {
        if case .portal = self { return true }
        return false
    }
}
