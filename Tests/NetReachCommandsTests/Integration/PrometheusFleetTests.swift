import Foundation
import NetReachTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The fleet as operators run it: a real Prometheus scrapes a `netreach serve` over TLS with a
/// password (`Deploy/netreach/web.yml`) with `Deploy/`'s own scrape jobs (`netreach`, and the `/probe` job with its relabelling), alert rules (`for:`
/// shortened: a test-only copy) and a real Alertmanager with `Deploy/`'s inhibit rule sends to a
/// webhook this test runs. serve runs inside a lab namespace (so the lab's path is the host's own,
/// `namespace=""`) with `--all-namespaces`, which includes a second lab isolated by design (no
/// route); Prometheus, Alertmanager and the webhook run in the lab too, on its loopback. First the
/// host is healthy: the isolated namespace's alert arrives and silences nothing; then the host's
/// own default route goes: its other alerts, the `/probe` job's included, are inhibited.
@Suite(
    "Prometheus and Alertmanager over serve (integration)", .offPool, .needsNamespaceRoot,
    .enabled(if: ExternalServer.available("prometheus", "prometheus-alertmanager", "htpasswd", "openssl")),
    .timeLimit(.minutes(4)))
struct PrometheusFleetTests {
    /// Where the host's destinations are: beyond the lab's gateway, never sent to.
    static let far = "198.51.100.7"
    static let vpn = "198.51.100.8"

    @Test func anIsolatedNamespaceAlertsAloneAndTheHostsOwnPathInhibitsItsOtherAlerts() async throws {
        try await NetnsLab.withLab { host in
            try await NetnsLab.withLab(.init(ipv4: false, defaultRoutes: false)) { isolated in
                try await Self.run(host: host, isolated: isolated)
            }
        }
    }

    private static func run(host: NetnsLab, isolated: NetnsLab) async throws {
        let directory = try TemporaryDirectory("netreach-fleet")
        defer { directory.remove() }
        let inHost = host.name
        // far: a destination of the host, whose alert the host's own path inhibits; vpn-db: one
        // that leaves over veth0, not a tunnel, so NetReachRouteLeftVPN fires on the healthy host.
        // serve as Deploy/ sets it up: TLS and a password, from Deploy/netreach/web.yml.
        let certificates = try await TestCertificates.make()
        defer { certificates.remove() }
        let web = try await DeployWebConfig.install(
            in: directory.url.path, certificates: certificates, password: "fleet-s3cret")
        try "fleet-s3cret\n".write(toFile: directory.path("password"), atomically: true, encoding: .utf8)
        let serve = try NetreachProcess.start(
            [
                "serve", "--listen", "127.0.0.1:0", "--all-namespaces", "--to", "far=\(far)", "--to", "vpn-db=\(vpn)",
                "--web.config.file", web,
            ],
            inNamespace: inHost)
        defer { serve.kill() }
        let target = try await ServeClient.baseURL(of: serve).replacingOccurrences(of: "https://", with: "")
        // What prometheus.yml's relabelling makes of it, in both jobs.
        let hostLabel = "127.0.0.1"

        let webhook = try WebhookReceiver(directory: directory.url, namespace: inHost)
        defer { webhook.stop() }
        let alertmanagerPort = try FreePort.pick()
        let prometheusPort = try FreePort.pick()
        try Self.writeConfiguration(
            in: directory.url, target: target, alertmanagerPort: alertmanagerPort, webhookPort: webhook.port,
            caFile: certificates.path("ca.pem"), passwordFile: directory.path("password"))

        let alertmanager = try ChildProcess(
            LabCommand.ipExecutable,
            [
                "netns", "exec", inHost, try ExternalServer.require("prometheus-alertmanager"),
                "--config.file=\(directory.url.path)/alertmanager.yml",
                "--storage.path=\(directory.url.path)/alertmanager-data",
                "--web.listen-address=127.0.0.1:\(alertmanagerPort)", "--cluster.listen-address=",
            ])
        defer { alertmanager.kill() }
        let prometheus = try ChildProcess(
            LabCommand.ipExecutable,
            [
                "netns", "exec", inHost, try ExternalServer.require("prometheus"),
                "--config.file=\(directory.url.path)/prometheus.yml",
                "--storage.tsdb.path=\(directory.url.path)/prometheus-data",
                "--web.listen-address=127.0.0.1:\(prometheusPort)",
            ])
        defer { prometheus.kill() }
        let api = "http://127.0.0.1:\(prometheusPort)/api/v1/query?query="
        func ownPath() async -> [String: String] {
            await Self.values(api + "netreach_path_satisfied%7Bnamespace%3D%22%22%2Cdestination%3D%22%22%7D", inHost)
        }
        let firing = api + "ALERTS%7Balertstate%3D%22firing%22%7D"
        let inhibitedURL =
            "http://127.0.0.1:\(alertmanagerPort)/api/v2/alerts?silenced=false&active=false&inhibited=true"

        await Self.until("Prometheus has the host's own path at 1", timeout: .seconds(90)) {
            #expect(prometheus.isRunning, "prometheus exited: \(prometheus.standardError)")
            #expect(alertmanager.isRunning, "alertmanager exited: \(alertmanager.standardError)")
            return await ownPath() == [target: "1"]
        }

        // 1. The host is healthy; the isolated namespace is down for good. Its own alert arrives,
        // and the host's other alert (the route that left the VPN) is not inhibited by it.
        let isolatedAlert = ["alertname": "NetReachNamespaceOffline", "namespace": isolated.name, "host": hostLabel]
        await Self.until("the webhook receives the isolated namespace's alert", timeout: .seconds(60)) {
            webhook.received.contains { $0.firing && $0.matches(isolatedAlert) }
        }
        let leftVPN = ["alertname": "NetReachRouteLeftVPN", "destination": "vpn-db", "host": hostLabel]
        await Self.until("the webhook receives the healthy host's other alert", timeout: .seconds(60)) {
            webhook.received.contains { $0.firing && $0.matches(leftVPN) }
        }
        let inhibitedWhileHealthy = await Self.alertLabels(inhibitedURL, inHost)
        #expect(inhibitedWhileHealthy.isEmpty, "inhibited by an isolated namespace: \(inhibitedWhileHealthy)")
        #expect(!webhook.received.contains { $0.labels["alertname"] == "NetReachOffline" }, "\(webhook.received)")
        let firingWhileHealthy = await Self.alerts(firing, inHost)
        #expect(!firingWhileHealthy.contains("NetReachOffline@\(target)"), "\(firingWhileHealthy)")
        Self.log("healthy host, isolated namespace down: webhook received", webhook.received)

        // 2. The host's own path goes: NetReachOffline arrives, and its destinations' alerts, of the
        // netreach job (far) and of the /probe job (instance = the target), are inhibited.
        let notifiedBefore = webhook.received.count
        try await host.deleteDefaultRoute()
        await Self.until("the host's own path is 0", timeout: .seconds(60)) { await ownPath() == [target: "0"] }
        await Self.until("the webhook receives NetReachOffline", timeout: .seconds(60)) {
            webhook.received.contains { $0.firing && $0.matches(["alertname": "NetReachOffline", "host": hostLabel]) }
        }
        let consequences = [
            ["alertname": "NetReachDestinationUnreachable", "job": "netreach", "destination": "far"],
            ["alertname": "NetReachDestinationUnreachable", "job": "netreach-path", "instance": far],
        ]
        await Self.until("both destination alerts fire in Prometheus", timeout: .seconds(60)) {
            let now = await Self.alerts(firing, inHost)
            return now.contains("NetReachDestinationUnreachable@\(target)")
                && now.contains("NetReachDestinationUnreachable@\(far)")
        }
        await Self.until("Alertmanager inhibits both", timeout: .seconds(60)) {
            let inhibited = await Self.alertLabels(inhibitedURL, inHost)
            return consequences.allSatisfy { expected in inhibited.contains { Self.labels($0, match: expected) } }
        }
        let inhibited = await Self.alertLabels(inhibitedURL, inHost)
        #expect(
            !webhook.received.contains { $0.labels["alertname"] == "NetReachDestinationUnreachable" },
            "\(webhook.received)")
        Self.log("host's own path down: webhook received", Array(webhook.received.dropFirst(notifiedBefore)))
        Self.log(
            "host's own path down: Alertmanager inhibited",
            inhibited.map { WebhookReceiver.Alert(firing: true, labels: $0) })

        try await host.addDefaultRoute()
        await Self.until("the host is back at 1", timeout: .seconds(60)) { await ownPath() == [target: "1"] }
        serve.signal(SIGTERM)
        #expect(await serve.exitStatus() == 0, "\(serve.standardError)")
    }

    private static func labels(_ labels: [String: String], match expected: [String: String]) -> Bool {
        expected.allSatisfy { labels[$0.key] == $0.value }
    }

    private static func log(_ what: String, _ alerts: [WebhookReceiver.Alert]) {
        print("PrometheusFleetTests: \(what):")
        for alert in alerts {
            let labels = alert.labels.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            print("  \(alert.firing ? "firing" : "resolved") {\(labels.joined(separator: ", "))}")
        }
    }

    /// `Deploy/`'s files, as few changes made as a test needs, each checked to apply (a change to
    /// the file must not leave the test testing something else): Prometheus's scrape jobs aimed at
    /// the one serve (the /probe job at the far destination) with 1 s scrapes and evaluations; the
    /// rules with `for:` shortened (a test-only copy), the consequences' longer than
    /// NetReachOffline's, so the inhibiting alert is surely in Alertmanager before them (as in life:
    /// a host's own path alert is the quicker one); Alertmanager sending to the webhook at once.
    private static func writeConfiguration(
        in directory: URL, target: String, alertmanagerPort: Int, webhookPort: Int, caFile: String,
        passwordFile: String
    ) throws {
        let deploy = DeployTests.deploy
        func edit(_ file: String, _ changes: [(String, String)]) throws -> String {
            var text = try String(contentsOf: deploy.appendingPathComponent(file), encoding: .utf8)
            for (old, new) in changes {
                try #require(text.contains(old), "\(file) no longer has \(old)")
                text = text.replacingOccurrences(of: old, with: new)
            }
            return text
        }
        var rules = try edit("prometheus/netreach-rules.yml", [])
        let shortened = [
            "NetReachOffline": "2s", "NetReachNamespaceOffline": "2s", "NetReachRouteLeftVPN": "2s",
            "NetReachCaptivePortal": "2s", "NetReachDestinationUnreachable": "10s",
        ]
        for (alert, duration) in shortened {
            let start = try #require(rules.range(of: "- alert: \(alert)\n"), "no \(alert)")
            let forLine = try #require(
                rules.range(
                    of: #"for: [0-9]+[smh]"#, options: .regularExpression, range: start.upperBound..<rules.endIndex))
            rules.replaceSubrange(forLine, with: "for: \(duration)")
        }
        try rules.write(to: directory.appendingPathComponent("netreach-rules.yml"), atomically: true, encoding: .utf8)
        let prometheus = try edit(
            "prometheus/prometheus.yml",
            [
                ("scrape_interval: 15s", "scrape_interval: 1s"),
                ("evaluation_interval: 15s", "evaluation_interval: 1s"),
                ("\"127.0.0.1:9093\"", "\"127.0.0.1:\(alertmanagerPort)\""),
                ("[\"host-a.example:9817\", \"host-b.example:9817\"]", "[\"\(target)\"]"),
                ("[\"10.20.0.5\", \"db.internal.example\"]", "[\"\(far)\"]"),
                ("replacement: host-a.example:9817", "replacement: \(target)"),
                ("/etc/prometheus/netreach-ca.pem", caFile),
                ("/etc/prometheus/netreach-password", passwordFile),
            ])
        try prometheus.write(to: directory.appendingPathComponent("prometheus.yml"), atomically: true, encoding: .utf8)
        let alertmanager = try edit(
            "alertmanager/alertmanager.yml",
            [
                ("http://127.0.0.1:5001/alerts", "http://127.0.0.1:\(webhookPort)/alerts"),
                ("group_wait: 10s", "group_wait: 1s"), ("group_interval: 1m", "group_interval: 1s"),
            ])
        try alertmanager.write(
            to: directory.appendingPathComponent("alertmanager.yml"), atomically: true, encoding: .utf8)
    }

    /// The labels of each alert an Alertmanager `/api/v2/alerts` query returns.
    private static func alertLabels(_ url: String, _ namespace: String) async -> [[String: String]] {
        guard let data = await fetch(url, namespace).data(using: .utf8),
            let result = try? JSONSerialization.jsonObject(with: data) as? [[String: Any]]
        else { return [] }
        return result.compactMap { $0["labels"] as? [String: String] }
    }

    /// `instance` → value of an instant vector query ("" on any failure).
    private static func values(_ url: String, _ namespace: String) async -> [String: String] {
        guard let data = await fetch(url, namespace).data(using: .utf8),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let result = (object["data"] as? [String: Any])?["result"] as? [[String: Any]]
        else { return [:] }
        var values: [String: String] = [:]
        for series in result {
            guard let instance = (series["metric"] as? [String: String])?["instance"],
                let value = (series["value"] as? [Any])?.last as? String
            else { continue }
            values[instance] = value
        }
        return values
    }

    /// `alertname@instance` of each series an ALERTS query returns.
    private static func alerts(_ url: String, _ namespace: String) async -> Set<String> {
        guard let data = await fetch(url, namespace).data(using: .utf8),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let result = (object["data"] as? [String: Any])?["result"] as? [[String: Any]]
        else { return [] }
        return Set(
            result.compactMap { series in
                (series["metric"] as? [String: String]).map { "\($0["alertname"] ?? "")@\($0["instance"] ?? "")" }
            })
    }

    /// The body at `url`, asked from inside `namespace` ("" on any failure).
    private static func fetch(_ url: String, _ namespace: String) async -> String {
        (try? await ServeClient.get(url, namespace: namespace))?.body ?? ""
    }

    /// Asks `condition` every 200 ms until it holds or `timeout` passes (then records an issue).
    private static func until(
        _ what: String, timeout: Duration, sourceLocation: SourceLocation = #_sourceLocation,
        _ condition: () async -> Bool
    ) async {
        let deadline = ContinuousClock.now + timeout
        // Ends early when the test is cancelled (its time limit): the sleep's error is not swallowed.
        while ContinuousClock.now < deadline, !Task.isCancelled {
            if await condition() { return }
            try? await Task.sleep(for: .milliseconds(200))
        }
        Issue.record("timed out after \(timeout) waiting until \(what)", sourceLocation: sourceLocation)
    }
}

/// An HTTP server on 127.0.0.1 (Python's) that keeps the body of every POST: Alertmanager's webhook.
/// With `namespace`, it runs inside that namespace (on its loopback).
final class WebhookReceiver: Sendable {
    /// One alert of a notification.
    struct Alert: Sendable, CustomStringConvertible {
        var firing: Bool
        var labels: [String: String]

        func matches(_ expected: [String: String]) -> Bool { expected.allSatisfy { labels[$0.key] == $0.value } }
        var description: String { "\(firing ? "firing" : "resolved") \(labels)" }
    }

    let port: Int
    private let process: ChildProcess
    private let file: URL

    init(directory: URL, namespace: String? = nil) throws {
        file = directory.appendingPathComponent("webhook.jsonl")
        let script = """
            import http.server, sys
            class Handler(http.server.BaseHTTPRequestHandler):
                def do_POST(self):
                    body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                    with open(sys.argv[1], "ab") as out:
                        out.write(body.replace(b"\\n", b" ") + b"\\n")
                    self.send_response(200)
                    self.end_headers()
                def log_message(self, *arguments):
                    pass
            server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
            print(server.server_address[1], flush=True)
            server.serve_forever()
            """
        let command = ["/usr/bin/python3", "-c", script, file.path]
        process = try ChildProcess(
            namespace == nil ? command[0] : LabCommand.ipExecutable,
            namespace.map { ["netns", "exec", $0] + command } ?? Array(command.dropFirst()))
        var port: Int?
        let deadline = ContinuousClock.now + .seconds(30)
        while port == nil, ContinuousClock.now < deadline, process.isRunning {
            port = process.outputLines.first.flatMap { Int($0) }
            if port == nil { usleep(10_000) }
        }
        guard let port else {
            process.kill()
            throw ExternalServerError.didNotStart("webhook receiver: \(process.standardError)")
        }
        self.port = port
    }

    /// Every body received so far, one per element.
    var bodies: [String] {
        ((try? String(contentsOf: file, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    /// Every alert of every notification received so far, in order.
    var received: [Alert] {
        bodies.flatMap { body -> [Alert] in
            guard let object = try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any],
                let alerts = object["alerts"] as? [[String: Any]]
            else { return [] }
            return alerts.map {
                Alert(firing: $0["status"] as? String == "firing", labels: $0["labels"] as? [String: String] ?? [:])
            }
        }
    }

    func stop() { process.kill() }
}
