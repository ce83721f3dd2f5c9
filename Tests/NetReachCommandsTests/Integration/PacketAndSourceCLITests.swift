import Foundation
import NetReach
import NetReachTestSupport
import Testing

/// `wait`, `watch` and `status` with a source the kernel cannot use yet (DAD running) and with
/// policy rules that split traffic by protocol and port (`--port`, `--protocol`). The references:
/// `ip addr` (the DAD state), a UDP `connect()`'s source, and `ip route get ... ipproto P sport S
/// dport D`, in the same lab.
@Suite("netreach with the app's packet and a usable source (integration)", .offPool, .needsNamespaceRoot, .serialized)
struct PacketAndSourceCLITests {
    private static func dadState(in lab: NetnsLab) async throws -> String {
        let line = try await lab.ip("-6", "-o", "addr", "show", "dev", "veth0", "scope", "global")
        if line.contains("dadfailed") { return "dadfailed" }
        return line.contains("tentative") ? "tentative" : ""
    }

    @Test func waitBlocksWhileDADRunsAndWatchShowsItsEnd() async throws {
        try await NetnsLab.withLab(.init(ipv4: false, ipv6: false, defaultRoutes: false)) { lab in
            let watch = try NetreachProcess.start(["watch", "--namespace", lab.name])
            defer { watch.kill() }
            let wait = try NetreachProcess.start(["wait", "--timeout", "600s", "--namespace", lab.name])
            defer { wait.kill() }
            await LabPoll.until("watch prints the current path") { watch.outputLines.count >= 1 }
            // DAD of 8 probes a second apart, for both addresses from link-up, as on a host just
            // plugged in; the gateway on the peer needs none.
            try await lab.setSysctl("net/ipv6/conf/veth0/dad_transmits", "8")
            try await lab.setSysctl("net/ipv6/neigh/veth0/retrans_time_ms", "1000")
            try await lab.peerIP("addr", "add", NetnsLab.ipv6Gateway + "/64", "dev", "veth1", "nodad")
            try await lab.setLink(up: false)
            try await lab.ip("addr", "add", "2001:db8:123::2/64", "dev", "veth0")
            try await lab.setLink(up: true)
            try await lab.ip("-6", "route", "add", "default", "via", NetnsLab.ipv6Gateway, "dev", "veth0")
            // The kernel hands a connect() ::1 now: no connection would complete.
            #expect(try await lab.connectedSource(RouteTruth.lookupAddress(.ipv6)) == .success("::1"))
            let deadline = ContinuousClock.now + .seconds(40)
            while try await Self.dadState(in: lab) == "tentative", ContinuousClock.now < deadline {
                #expect(wait.isRunning, "wait exited during DAD: \(wait.outputLines) \(wait.standardError)")
                try await Task.sleep(for: .milliseconds(20))
            }
            let ended = ContinuousClock.now
            try #require(try await Self.dadState(in: lab) == "", "DAD did not end within 40 s")
            #expect(await wait.exitStatus(timeout: .seconds(60)) == 0, "standard error: \(wait.standardError)")
            print("wait exited \(ContinuousClock.now - ended) after `ip addr` showed DAD ended")
            #expect(wait.outputLines.first?.contains("satisfied veth0") == true, "\(wait.outputLines)")
            await LabPoll.until("watch prints the satisfied path") {
                watch.outputLines.last?.contains(" satisfied ") == true
            }
            print("watch printed satisfied \(ContinuousClock.now - ended) after `ip addr` showed DAD ended")
            // Before it: the tentative address, said as "no address".
            let lines = watch.outputLines
            #expect(lines.dropLast().last?.hasSuffix("unsatisfied (no address)") == true, "\(lines)")
            #expect(try await lab.connectedSource(RouteTruth.lookupAddress(.ipv6)) == .success("2001:db8:123::2"))
        }
    }

    /// A lab whose TCP to 443 leaves through a second uplink standing for a VPN (veth2, table 100,
    /// `ipproto tcp dport 443`) and everything else through veth0; `body` gets the kernel's device
    /// for each packet (`tcp/443`, `udp/53`), asked with `ip route get` from the namespace's first
    /// local port, as NetReach asks.
    private func withTCP443ThroughVPN(
        _ body: (NetnsLab, _ target: String, _ devices: [String: String]) async throws -> Void
    ) async throws {
        try await NetnsLab.withLab { lab in
            try await lab.addUplink("veth2", peer: "veth3", address: "10.124.0.2/24")
            try await lab.ip("-4", "route", "add", "default", "via", "10.124.0.1", "dev", "veth2", "table", "100")
            try await lab.ip("-4", "rule", "add", "ipproto", "tcp", "dport", "443", "table", "100")
            let target = RouteTruth.lookupAddress(.ipv4)
            let port = try await lab.firstLocalPort()
            var devices: [String: String] = [:]
            for (packet, transport, destinationPort) in [("tcp/443", "tcp", "443"), ("udp/53", "udp", "53")] {
                let kernel = try await lab.ip([
                    "-4", "route", "get", target, "sport", "\(port)", "ipproto", transport, "dport", destinationPort,
                ])
                devices[packet] =
                    kernel.contains("dev veth2") ? "veth2" : kernel.contains("dev veth0") ? "veth0" : kernel
            }
            try #require(devices == ["tcp/443": "veth2", "udp/53": "veth0"], "ip route get: \(devices)")
            try await body(lab, target, devices)
        }
    }

    @Test func statusNamesTheVPNForTCP443AndTheUplinkForUDP53() async throws {
        try await withTCP443ThroughVPN { lab, _, devices in
            for (arguments, packet) in [([String](), "tcp/443"), (["--protocol", "udp", "--port", "53"], "udp/53")] {
                let device = try #require(devices[packet])
                let status = try NetreachProcess.start(["status", "--namespace", lab.name] + arguments)
                defer { status.kill() }
                #expect(await status.exitStatus() == 0, "standard error: \(status.standardError)")
                let primary = status.outputLines.first { $0.hasPrefix("interfaces:") }?
                    .split(separator: " ").dropFirst().first
                #expect(primary?.hasPrefix(device) == true, "status \(arguments): \(status.outputLines)")
            }
        }
    }

    /// serve's destinations ask about their own traffic: the file's `port:`/`protocol:` keys and the
    /// flags, against `ip route get ... ipproto P dport D` in the same lab. The internet path stays
    /// a web client's.
    @Test func serveNamesTheVPNForTCP443AndTheUplinkForUDP53() async throws {
        // The kernel's answers, which serve's must be.
        try await withTCP443ThroughVPN { lab, target, device in
            let scratch = try TemporaryDirectory("netreach-serve-traffic")
            defer { scratch.remove() }
            let config = scratch.path("serve.yaml")
            try "to:\n  web: \(target)\n  dns: {host: \(target), protocol: udp, port: 53}\n".write(
                toFile: config, atomically: true, encoding: .utf8)
            // Each run: its options, then each destination with the traffic it must be the path of.
            let runs: [([String], [(name: String, traffic: String)])] = [
                (["--config", config], [("web", "tcp/443"), ("dns", "udp/53")]),
                (["--to", "flagged=\(target)", "--protocol", "udp", "--port", "53"], [("flagged", "udp/53")]),
            ]
            for (arguments, destinations) in runs {
                let serve = try NetreachProcess.start(
                    ["serve", "--listen", "127.0.0.1:0", "--namespace", lab.name] + arguments)
                defer { serve.kill() }
                let base = try await ServeClient.baseURL(of: serve)
                await ServeClient.until("ready", base, "/readyz") { $0.status == 200 }
                let metrics = try await ServeClient.get(base + "/metrics").body
                for (name, traffic) in destinations {
                    let labels = #"namespace="\#(lab.name)",destination="\#(name)""#
                    let expected = try #require(device[traffic])
                    #expect(
                        metrics.contains(
                            #"netreach_path_route_info{\#(labels),family="ipv4",interface="\#(expected)""#),
                        "\(arguments) \(name): \(metrics)")
                    let parts = traffic.split(separator: "/")
                    #expect(
                        metrics.contains(
                            #"netreach_path_traffic_info{\#(labels),protocol="\#(parts[0])",port="\#(parts[1])"} 1.0"#),
                        "\(arguments) \(name)")
                    let answer = try await ServeClient.get(base + "/api/v1/path?to=\(name)&namespace=\(lab.name)")
                    let object = try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any]
                    let interfaces = object?["availableInterfaces"] as? [[String: Any]]
                    #expect(
                        interfaces?.first?["name"] as? String == expected, "\(arguments) \(name): \(answer.body)")
                }
                // The internet path is a web client's whatever the destinations' traffic.
                #expect(
                    metrics.contains(
                        #"netreach_path_route_info{namespace="\#(lab.name)",destination="",family="ipv4",interface="veth2""#
                    ), "\(arguments): \(metrics)")
                #expect(
                    metrics.contains(
                        #"netreach_path_traffic_info{namespace="\#(lab.name)",destination="",protocol="tcp",port="443"} 1.0"#
                    ))
            }
        }
    }

    @Test func aBadPortOrProtocolIsAUsageError() async throws {
        for arguments in [
            ["--port", "0"], ["--port", "70000"], ["--protocol", "sctp"], ["--port", "1", "--port", "2"],
        ] {
            let status = try NetreachProcess.start(["status"] + arguments)
            defer { status.kill() }
            #expect(await status.exitStatus() == 64, "\(arguments): \(status.standardError)")
        }
    }
}

extension NetnsLab {
    /// `ip -n LAB ARGUMENTS...` from an array.
    fileprivate func ip(_ arguments: [String]) async throws -> String {
        try await LabCommand.ip(["-n", name] + arguments)
    }
}
