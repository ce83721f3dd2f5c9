import Foundation
import NetReachServe
import NetReachTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `Deploy/`'s DaemonSet starts on the nodes it is deployed to, IPv4 and IPv6: its container's
/// args, read from the YAML file, are rendered as the kubelet renders them (`$(NODE_IP)` from the
/// env var whose fieldRef is `status.hostIP`), and serve runs with exactly those args inside a lab
/// namespace that has that address (as the node has its own), answering the kubelet's probes there.
/// The Secrets it mounts are a directory here, put where the kubelet would mount them:
/// `Deploy/netreach/web.yml` beside a test certificate, as an operator fills them in.
@Suite(
    "Deploy/'s DaemonSet on IPv4 and IPv6 nodes (integration)", .offPool, .needsNamespaceRoot, .timeLimit(.minutes(2)))
struct DaemonSetListenTests {
    private struct Container {
        var args: [String]
        /// Env var name → the pod field it is filled from.
        var fieldRefs: [String: String]
        var containerPort: Int
        /// Where the web configuration's volume is mounted.
        var webMount: String
        /// The kubelet's probes: scheme and path.
        var probes: [(scheme: String, path: String)]
    }

    private static func container() throws -> Container {
        let text = try String(
            contentsOf: DeployTests.deploy.appendingPathComponent("kubernetes/netreach-daemonset.yaml"), encoding: .utf8
        )
        let document = try #require(try YAMLReader.parse(text).map(plain) as? [String: Any])
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
        let mounts = container["volumeMounts"] as? [[String: Any]] ?? []
        let webMount = try #require(mounts.first { $0["name"] as? String == "web" }?["mountPath"] as? String)
        let probes = ["startupProbe", "readinessProbe", "livenessProbe"].compactMap { key -> (String, String)? in
            guard let get = (container[key] as? [String: Any])?["httpGet"] as? [String: Any] else { return nil }
            return ((get["scheme"] as? String) ?? "HTTP", (get["path"] as? String) ?? "/")
        }
        return Container(
            args: try #require(container["args"] as? [String]), fieldRefs: fieldRefs, containerPort: try #require(port),
            webMount: webMount, probes: probes)
    }

    /// A node as plain values: mappings as dictionaries, lists as arrays, scalars as what they resolve to.
    private static func plain(_ node: YAMLNode) -> Any {
        switch node.content {
        case .mapping(let entries):
            return Dictionary(entries.map { ($0.key.text, plain($0.value)) }, uniquingKeysWith: { $1 })
        case .sequence(let items):
            return items.map(plain)
        case .scalar(let scalar):
            switch scalar.value {
            case .null: return NSNull()
            case .bool(let value): return value
            case .integer(let value): return value
            case .text(let value): return value
            }
        }
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
        let certificates = try await TestCertificates.make()
        defer { certificates.remove() }
        let volume = try TemporaryDirectory("netreach-secret")
        defer { volume.remove() }
        _ = try await DeployWebConfig.install(in: volume.url.path, certificates: certificates, password: "node-s3cret")
        #expect(container.probes.count == 3, "\(container.probes)")
        try await NetnsLab.withLab(setup) { node in
            let nodeIP = String(NetnsLab.address(family).prefix { $0 != "/" })
            // The kubelet's expansion, and its mount of the Secrets (here: the directory made above).
            let args = container.args.map {
                Self.expand($0, [hostIPVariable: nodeIP]).replacingOccurrences(
                    of: container.webMount, with: volume.url.path)
            }
            #expect(!args.joined().contains("$("), "unexpanded: \(args)")
            let serve = try NetreachProcess.start(args, inNamespace: node.name)
            defer { serve.kill() }
            let base = try await ServeClient.baseURL(of: serve)
            let literal = family == .ipv6 ? "[\(nodeIP)]" : nodeIP
            #expect(base == "https://\(literal):\(container.containerPort)", "\(args): \(serve.standardError)")
            // The kubelet's probes, as it sends them: HTTPS without checking the certificate, no password.
            for (scheme, path) in container.probes {
                #expect(scheme == "HTTPS", "\(path)")
                let answer = try await ServeClient.get(base + path, extra: ["-g", "-k"], namespace: node.name)
                #expect(answer.status == 200, "\(path): \(answer.body) \(serve.standardError)")
            }
            // Prometheus's scrape: the password of Deploy/netreach/web.yml's user.
            let denied = try await ServeClient.get(base + "/metrics", extra: ["-g", "-k"], namespace: node.name)
            #expect(denied.status == 401)
            let scraped = try await ServeClient.get(
                base + "/metrics", extra: ["-g", "-k", "-u", "\(DeployWebConfig.user):node-s3cret"],
                namespace: node.name)
            #expect(scraped.status == 200 && scraped.body.contains("netreach_build_info"), "\(scraped.status)")
            print("DaemonSetListenTests: \(family) node: \(args.joined(separator: " ")) → listening on \(base)")
            serve.signal(SIGTERM)
            #expect(await serve.exitStatus() == 0, "\(serve.standardError)")
        }
    }
}
