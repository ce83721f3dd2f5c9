import Foundation
import NetReachTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// What `Deploy/` gives operators, checked with the tools that will read it: Prometheus's and
/// Alertmanager's own checkers (and the alert rules' unit tests), systemd's, and Kubernetes's
/// schema.
@Suite(
    "Deploy/ checked by promtool, amtool and systemd-analyze", .offPool,
    .enabled(if: ExternalServer.available("promtool", "amtool", "systemd-analyze", "kubernetes-validate")))
struct DeployTests {
    static let deploy = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Deploy")

    private func run(_ tool: String, _ arguments: [String], in directory: String) async throws -> ChildProcess.Finished
    {
        try await ChildProcess.run(ExternalServer.require(tool), arguments, directory: directory, timeout: .seconds(60))
    }

    @Test func thePrometheusConfigurationAndRulesAreValid() async throws {
        let directory = Self.deploy.appendingPathComponent("prometheus").path
        let config = try await run("promtool", ["check", "config", "prometheus.yml"], in: directory)
        #expect(config.status == 0, "\(config.standardOutput)\(config.standardError)")
        let rules = try await run("promtool", ["check", "rules", "netreach-rules.yml"], in: directory)
        #expect(rules.status == 0, "\(rules.standardOutput)\(rules.standardError)")
        #expect(rules.standardOutput.contains("5 rules found"))
    }

    @Test func theAlertRulesFireOnTheirSeriesAfterTheirForAndNotOnOthers() async throws {
        let directory = Self.deploy.appendingPathComponent("prometheus").path
        let tested = try await run("promtool", ["test", "rules", "netreach-rules.test.yml"], in: directory)
        #expect(tested.status == 0, "\(tested.standardOutput)\(tested.standardError)")
        #expect(tested.standardOutput.contains("SUCCESS"))
    }

    @Test func theAlertmanagerConfigurationIsValidWithItsInhibitRule() async throws {
        let directory = Self.deploy.appendingPathComponent("alertmanager").path
        let checked = try await run("amtool", ["check-config", "alertmanager.yml"], in: directory)
        #expect(checked.status == 0, "\(checked.standardOutput)\(checked.standardError)")
        #expect(checked.standardOutput.contains("1 inhibit rules"))
    }

    /// Against Kubernetes's own schema, strict: a misspelt field fails, as the API server would
    /// refuse it. The kubelet's probes are the server's /readyz and /livez.
    @Test func theDaemonSetValidatesAgainstKubernetesSchema() async throws {
        let directory = Self.deploy.appendingPathComponent("kubernetes").path
        let validated = try await run("kubernetes-validate", ["--strict", "netreach-daemonset.yaml"], in: directory)
        #expect(validated.status == 0, "\(validated.standardOutput)\(validated.standardError)")
        let text = try String(contentsOfFile: directory + "/netreach-daemonset.yaml", encoding: .utf8)
        #expect(text.contains("hostNetwork: true"))
        #expect(text.contains("path: /readyz"))
    }

    /// `systemd-analyze verify` needs ExecStart's program to exist: the units are checked with
    /// the netreach under test in /usr/bin/netreach's place. `--man=no`: the man page is not
    /// installed here.
    @Test(arguments: ["netreach.service", "netreach-wait-online.service"])
    func theSystemdUnitsVerify(_ unit: String) async throws {
        let executable = try NetreachProcess.executable().path
        let directory = try TemporaryDirectory("netreach-units")
        defer { directory.remove() }
        let text = try String(contentsOf: Self.deploy.appendingPathComponent("systemd/\(unit)"), encoding: .utf8)
        try text.replacingOccurrences(of: "/usr/bin/netreach", with: executable)
            .write(to: directory.url.appendingPathComponent(unit), atomically: true, encoding: .utf8)
        let verified = try await run("systemd-analyze", ["verify", "--man=no", unit], in: directory.url.path)
        #expect(verified.status == 0, "\(verified.standardOutput)\(verified.standardError)")
        #expect(verified.standardError.isEmpty, "\(verified.standardError)")

        // ExecStart's flags are ones netreach takes.
        let execStart = try #require(text.split(separator: "\n").first { $0.hasPrefix("ExecStart=") })
        let arguments = execStart.split(separator: " ").dropFirst().map(String.init)
        let help = try await ChildProcess.run(executable, arguments + ["--help"])
        #expect(help.status == 0, "\(arguments): \(help.standardError)")
    }
}

/// Where scripts/build-release.sh puts the executable.
enum ReleaseBuild {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
    static let binary = root.appendingPathComponent(".build-release/release/netreach")
    static var isBuilt: Bool { FileManager.default.isExecutableFile(atPath: binary.path) }
}
