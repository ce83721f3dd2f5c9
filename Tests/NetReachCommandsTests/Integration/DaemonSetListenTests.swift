import Foundation
import NetReachTestSupport
import Testing
import Yams

#if canImport(Glibc)
import Glibc
#endif

/// `Deploy/`'s DaemonSet starts on the nodes it is deployed to, IPv4 and IPv6: its container's
/// args, read from the YAML file, are rendered as the kubelet renders them (`$(NODE_IP)` from the
/// env var whose fieldRef is `status.hostIP`), and serve runs with exactly those args inside a lab
/// namespace that has that address (as the node has its own), answering the kubelet's probes there.
@Suite(
    "Deploy/'s DaemonSet on IPv4 and IPv6 nodes (integration)", .offPool, .needsNamespaceRoot, .timeLimit(.minutes(2)))
struct DaemonSetListenTests {
    private struct Container {
        var args: [String]
        /// Env var name → the pod field it is filled from.
        var fieldRefs: [String: String]
        var containerPort: Int
    }

    private static func container() throws -> Container {
        let text = try String(
            contentsOf: DeployTests.deploy.appendingPathComponent("kubernetes/netreach-daemonset.yaml"), encoding: .utf8
        )
        let document = try #require(try Yams.load(yaml: text) as? [String: Any])
        let spec = try #require(((document["spec"] as? [String: Any])?["template"] as? [String: Any])?["spec"])
        let containers = try #require((spec as? [String: Any])?["containers"] as? [[String: Any]])
        let container = try #require(containers.first { $0["name"] as? String == "netreach" })
        var fieldRefs: [String: String] = [:]
        for variable in container["env"] as? [[String: Any]] ?? [] {
            let fieldRef = (variable["valueFrom"] as? [String: Any])?["fieldRef"] as? [String: Any]
            if let name = variable["name"] as? String, let path = fieldRef?["fieldPath"] as? String {
                fieldRefs[name] = path
            }
        }
        let port = (container["ports"] as? [[String: Any]])?.first?["containerPort"] as? Int
        return Container(
            args: try #require(container["args"] as? [String]), fieldRefs: fieldRefs, containerPort: try #require(port))
    }

    /// The kubelet's expansion of a container's args: `$(NAME)` becomes the value of the env var
    /// NAME when there is one, and stays as written when not; `$$` is a literal `$`.
    static func expand(_ text: String, _ variables: [String: String]) -> String {
        var result = ""
        var rest = Substring(text)
        while let dollar = rest.firstIndex(of: "$") {
            result += rest[..<dollar]
            let after = rest[rest.index(after: dollar)...]
            if after.hasPrefix("$") {
                result += "$"
                rest = after.dropFirst()
            } else if after.hasPrefix("("), let close = after.firstIndex(of: ")"),
                let value = variables[String(after[after.index(after: after.startIndex)..<close])]
            {
                result += value
                rest = after[after.index(after: close)...]
            } else {
                result += "$"
                rest = after
            }
        }
        return result + rest
    }

    @Test func theKubeletsExpansionIsAsDocumented() {
        #expect(Self.expand("[$(NODE_IP)]:9817", ["NODE_IP": "fd00::7"]) == "[fd00::7]:9817")
        #expect(Self.expand("$(MISSING):1", [:]) == "$(MISSING):1")
        #expect(Self.expand("$$(NODE_IP)", ["NODE_IP": "x"]) == "$(NODE_IP)")
    }

    /// The render serve used to get, `fd00::7:9817`, is ambiguous (`fd00::7` port 9817, or the
    /// address fd00::7:9817 with no port) and refused before anything starts; bracketed, it is not.
    @Test func aBareIPv6AddressAndPortIsRefusedAsAmbiguous() async throws {
        let serve = try NetreachProcess.start(["serve", "--listen", "fd00::7:9817"])
        defer { serve.kill() }
        #expect(await serve.exitStatus() == 64, "\(serve.standardError)")
        #expect(serve.standardError.contains("IPv6 in brackets"), "\(serve.standardError)")
    }

    @Test(arguments: [NetnsLab.Family.ipv6, .ipv4])
    func theDaemonSetsArgsStartServeOnTheNodesAddress(_ family: NetnsLab.Family) async throws {
        let container = try Self.container()
        let hostIPVariable = try #require(
            container.fieldRefs.first { $0.value == "status.hostIP" }?.key, "no env var from status.hostIP")
        let setup = NetnsLab.Setup(ipv4: family == .ipv4, ipv6: family == .ipv6)
        try await NetnsLab.withLab(setup) { node in
            let nodeIP = String(NetnsLab.address(family).prefix { $0 != "/" })
            let args = container.args.map { Self.expand($0, [hostIPVariable: nodeIP]) }
            #expect(!args.joined().contains("$("), "unexpanded: \(args)")
            let serve = try NetreachProcess.start(args, inNamespace: node.name)
            defer { serve.kill() }
            let base = try await ServeClient.baseURL(of: serve)
            let literal = family == .ipv6 ? "[\(nodeIP)]" : nodeIP
            #expect(base == "http://\(literal):\(container.containerPort)", "\(args): \(serve.standardError)")
            // The kubelet's probes: startup and readiness on /readyz, liveness on /livez.
            for path in ["/livez", "/readyz"] {
                let answer = try await ServeClient.get(base + path, extra: ["-g"], namespace: node.name)
                #expect(answer.status == 200, "\(path): \(answer.body) \(serve.standardError)")
            }
            print("DaemonSetListenTests: \(family) node: \(args.joined(separator: " ")) → listening on \(base)")
            serve.signal(SIGTERM)
            #expect(await serve.exitStatus() == 0, "\(serve.standardError)")
        }
    }
}
