import Foundation
import NetReachTestSupport
import Testing

/// Commands that follow one destination or one namespace, run inside namespace labs: `status --to`
/// resolving a name with the lab's own resolv.conf, `get` judged by its destination's path, and
/// `watch --namespace` when the namespace is deleted. Nothing leaves the lab: its resolv.conf
/// names a nameserver on its own loopback, the one HTTP request goes to a server there.
@Suite("status --to, get and watch --namespace in namespace labs (integration)", .needsNamespaceRoot)
struct DestinationCommandTests {
    /// Runs `netreach ARGUMENTS` inside the lab (`ip netns exec`), whose resolv.conf names only a
    /// nameserver on the lab's own loopback, where nothing listens: a name that is not in
    /// /etc/hosts fails at once, and no query can leave the lab.
    private static func netreachInLab(
        _ lab: NetnsLab, _ arguments: [String]
    ) async throws -> (status: Int32?, output: [String], error: String) {
        defer { EtcNetns.remove(for: lab) }
        try EtcNetns.writeResolvConf("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n", for: lab)
        let process = try NetreachProcess.start(arguments, inNamespace: lab.name)
        defer { process.kill() }
        let status = await process.exitStatus(timeout: .seconds(30))
        return (status, process.outputLines, process.standardError)
    }

    @Test func theCLIFollowsADestinationGivenAsAName() async throws {
        try await NetnsLab.withLab(NetnsLab.Setup(defaultRoutes: false)) { lab in
            let (status, output, error) = try await Self.netreachInLab(lab, ["status", "--json", "--to", "localhost"])
            #expect(status == 0, "\(error)")
            let path = output.first.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            #expect(path?["status"] as? String == "satisfied", "\(output)")
            let interfaces = path?["availableInterfaces"] as? [[String: Any]]
            #expect(interfaces?.first?["type"] as? String == "loopback", "\(output)")
        }
    }

    @Test func aNameThatDoesNotResolveIsSaidAndIsDestinationUnresolved() async throws {
        try await NetnsLab.withLab { lab in
            let (status, output, error) = try await Self.netreachInLab(
                lab, ["status", "--json", "--to", "no-such-host.invalid"])
            #expect(status == 0, "status reports the path, whatever it is: \(error)")
            #expect(output.first?.contains("\"unsatisfiedReason\":\"destinationUnresolved\"") == true, "\(output)")
            #expect(error.contains("cannot resolve the destination: no-such-host.invalid"), "\(error)")
        }
    }

    @Test func aRequestToLoopbackInANamespaceWithOnlyLoIsNotHeldBack() async throws {
        try await NetnsLab.withLab(NetnsLab.Setup(ipv4: false, defaultRoutes: false)) { lab in
            try await lab.ip("link", "del", NetnsLab.interface) // nothing left but lo
            let server = try NamespaceHTTPServer(namespace: lab.name, address: "127.0.0.1")
            defer { server.stop() }
            let get = try NetreachProcess.start(
                [
                    "get", "--wait-for-connectivity", "--json", "--timeout", "20s",
                    "http://127.0.0.1:\(server.port)/hello",
                ],
                inNamespace: lab.name)
            defer { get.kill() }
            let status = await get.exitStatus(timeout: .seconds(30))
            #expect(status == 0, "standard error: \(get.standardError)")
            #expect(!get.outputLines.contains { $0.contains("\"event\":\"waiting\"") }, "\(get.outputLines)")
            #expect(server.received.map(\.requestLine) == ["GET /hello HTTP/1.1"])
        }
    }

    @Test func watchSaysSoAndExitsTwoWhenItsNamespaceIsDeleted() async throws {
        try await NetnsLab.withLab { lab in
            let watch = try NetreachProcess.start(["watch", "--namespace", lab.name])
            defer { watch.kill() }
            await LabPoll.until("watch printed the first path") { watch.outputLines.count >= 1 }
            try await LabCommand.ip(["netns", "del", lab.name])
            let status = await watch.exitStatus(timeout: .seconds(15))
            #expect(status == 2, "standard error: \(watch.standardError)")
            #expect(watch.outputLines.last?.contains("monitor unavailable") == true, "\(watch.outputLines)")
            #expect(
                watch.standardError.contains("network namespace /var/run/netns/\(lab.name) is gone"),
                "\(watch.standardError)")
        }
    }
}
