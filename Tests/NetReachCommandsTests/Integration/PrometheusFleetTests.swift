import Foundation
import NetReachTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The fleet as operators run it: a real Prometheus scrapes two `netreach serve`, one per lab
/// namespace, with `Deploy/`'s alert rules (a short `for:`), and a real Alertmanager with
/// `Deploy/`'s inhibit rule sends to a webhook this test runs. One lab loses its default route.
@Suite(
    "Prometheus and Alertmanager over two serve (integration)", .offPool, .needsNamespaceRoot,
    .enabled(if: ExternalServer.available("prometheus", "prometheus-alertmanager")), .timeLimit(.minutes(4)))
struct PrometheusFleetTests {
    @Test func oneHostOfflineIsSeenAlertedAndItsOtherAlertInhibited() async throws {
        try await NetnsLab.withLab { down in
            try await NetnsLab.withLab { up in
                try await Self.run(down: down, up: up)
            }
        }
    }

    private static func run(down: NetnsLab, up: NetnsLab) async throws {
        let directory = try TemporaryDirectory("netreach-fleet")
        defer { directory.remove() }
        // Each serve watches its lab's internet path and a far destination beyond the gateway,
        // whose alert is the one the inhibit rule must silence.
        let far = "198.51.100.7"
        let servers = try [down, up].map { lab in
            try NetreachProcess.start([
                "serve", "--listen", "127.0.0.1:0", "--namespace", lab.name, "--to", "far=\(far)",
            ])
        }
        defer { servers.forEach { $0.kill() } }
        var targets: [String] = []
        for server in servers {
            targets.append(try await ServeClient.baseURL(of: server).replacingOccurrences(of: "http://", with: ""))
        }

        let webhook = try WebhookReceiver(directory: directory.url)
        defer { webhook.stop() }
        let alertmanagerPort = try FreePort.pick()
        let prometheusPort = try FreePort.pick()
        try Self.writeConfiguration(
            in: directory.url, targets: targets, alertmanagerPort: alertmanagerPort, webhookPort: webhook.port)

        let alertmanager = try ChildProcess(
            try ExternalServer.require("prometheus-alertmanager"),
            [
                "--config.file=\(directory.url.path)/alertmanager.yml",
                "--storage.path=\(directory.url.path)/alertmanager-data",
                "--web.listen-address=127.0.0.1:\(alertmanagerPort)", "--cluster.listen-address=",
            ])
        defer { alertmanager.kill() }
        let prometheus = try ChildProcess(
            try ExternalServer.require("prometheus"),
            [
                "--config.file=\(directory.url.path)/prometheus.yml",
                "--storage.tsdb.path=\(directory.url.path)/prometheus-data",
                "--web.listen-address=127.0.0.1:\(prometheusPort)",
            ])
        defer { prometheus.kill() }
        let api = "http://127.0.0.1:\(prometheusPort)/api/v1/query?query="
        func satisfied() async -> [String: String] {
            await Self.values(api + "netreach_path_satisfied%7Bdestination%3D%22%22%7D")
        }

        await Self.until("Prometheus has both servers' paths at 1", timeout: .seconds(90)) {
            #expect(prometheus.isRunning, "prometheus exited: \(prometheus.standardError)")
            #expect(alertmanager.isRunning, "alertmanager exited: \(alertmanager.standardError)")
            return await satisfied() == [targets[0]: "1", targets[1]: "1"]
        }

        try await down.deleteDefaultRoute()
        await Self.until("the offline host is 0, the other still 1", timeout: .seconds(60)) {
            await satisfied() == [targets[0]: "0", targets[1]: "1"]
        }
        let firing = api + "ALERTS%7Balertstate%3D%22firing%22%7D"
        await Self.until("NetReachOffline fires for the offline host", timeout: .seconds(60)) {
            await Self.alerts(firing).contains("NetReachOffline@\(targets[0])")
        }
        await Self.until("the webhook receives NetReachOffline", timeout: .seconds(60)) {
            webhook.bodies.contains { $0.contains("\"NetReachOffline\"") && $0.contains("\"firing\"") }
        }
        // The far destination's alert fires in Prometheus too, and Alertmanager suppresses it.
        await Self.until("the far destination's alert fires", timeout: .seconds(60)) {
            await Self.alerts(firing).contains("NetReachTestFarDown@\(targets[0])")
        }
        let suppressed = "http://127.0.0.1:\(alertmanagerPort)/api/v2/alerts?silenced=false&active=false&inhibited=true"
        await Self.until("Alertmanager inhibits it", timeout: .seconds(60)) {
            await Self.fetch(suppressed).contains("\"NetReachTestFarDown\"")
        }
        #expect(!webhook.bodies.contains { $0.contains("NetReachTestFarDown") }, "\(webhook.bodies)")
        let firingNow = await Self.alerts(firing)
        #expect(!firingNow.contains("NetReachOffline@\(targets[1])"), "\(firingNow)")

        try await down.addDefaultRoute()
        await Self.until("the host is back at 1", timeout: .seconds(60)) {
            return await satisfied() == [targets[0]: "1", targets[1]: "1"]
        }
        for server in servers { server.signal(SIGTERM) }
        for server in servers { #expect(await server.exitStatus() == 0, "\(server.standardError)") }
    }

    /// Prometheus's and Alertmanager's configuration: `Deploy/`'s rules with `for:` shortened,
    /// plus a test alert on the far destination; `Deploy/`'s inhibit rule with the webhook.
    private static func writeConfiguration(
        in directory: URL, targets: [String], alertmanagerPort: Int, webhookPort: Int
    ) throws {
        let deploy = DeployTests.deploy
        var rules = try String(
            contentsOf: deploy.appendingPathComponent("prometheus/netreach-rules.yml"), encoding: .utf8)
        for long in ["1m", "2m", "30s"] { rules = rules.replacingOccurrences(of: "for: \(long)", with: "for: 2s") }
        // Indented as the rules of Deploy's one group. A longer `for:` than NetReachOffline's, so
        // the inhibiting alert is surely in Alertmanager before this one arrives (as in life: a
        // host's own path alert is the quicker one).
        rules +=
            [
                "      - alert: NetReachTestFarDown",
                "        expr: netreach_path_satisfied{destination=\"far\"} == 0",
                "        for: 8s",
            ].joined(separator: "\n") + "\n"
        try rules.write(to: directory.appendingPathComponent("netreach-rules.yml"), atomically: true, encoding: .utf8)
        let prometheus = """
            global:
              scrape_interval: 1s
              evaluation_interval: 1s
            rule_files: [netreach-rules.yml]
            alerting:
              alertmanagers:
                - static_configs: [{targets: ["127.0.0.1:\(alertmanagerPort)"]}]
            scrape_configs:
              - job_name: netreach
                static_configs: [{targets: [\(targets.map { "\"\($0)\"" }.joined(separator: ", "))]}]

            """
        try prometheus.write(to: directory.appendingPathComponent("prometheus.yml"), atomically: true, encoding: .utf8)
        var alertmanager = try String(
            contentsOf: deploy.appendingPathComponent("alertmanager/alertmanager.yml"), encoding: .utf8)
        alertmanager = alertmanager.replacingOccurrences(
            of: "http://127.0.0.1:5001/alerts", with: "http://127.0.0.1:\(webhookPort)/alerts")
        alertmanager = alertmanager.replacingOccurrences(of: "group_wait: 10s", with: "group_wait: 1s")
        alertmanager = alertmanager.replacingOccurrences(of: "group_interval: 1m", with: "group_interval: 1s")
        try alertmanager.write(
            to: directory.appendingPathComponent("alertmanager.yml"), atomically: true, encoding: .utf8)
    }

    /// `instance` → value of an instant vector query ("" on any failure).
    private static func values(_ url: String) async -> [String: String] {
        guard let data = await fetch(url).data(using: .utf8),
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
    private static func alerts(_ url: String) async -> Set<String> {
        guard let data = await fetch(url).data(using: .utf8),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let result = (object["data"] as? [String: Any])?["result"] as? [[String: Any]]
        else { return [] }
        return Set(
            result.compactMap { series in
                (series["metric"] as? [String: String]).map { "\($0["alertname"] ?? "")@\($0["instance"] ?? "")" }
            })
    }

    private static func fetch(_ url: String) async -> String {
        (try? await ServeClient.get(url))?.body ?? ""
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
final class WebhookReceiver: Sendable {
    let port: Int
    private let process: ChildProcess
    private let file: URL

    init(directory: URL) throws {
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
        process = try ChildProcess("/usr/bin/python3", ["-c", script, file.path])
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

    func stop() { process.kill() }
}
