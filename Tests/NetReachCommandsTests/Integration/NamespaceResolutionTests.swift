#if os(Linux)
import Foundation
import NetReachTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `--namespace NAME --to HOST` (status, wait) and serve's `/probe?namespace=`: HOST is resolved
/// inside the namespace, as `ip netns exec NAME` would (its `/etc/netns/NAME/hosts` and
/// `resolv.conf`), never by the machine's resolver.
///
/// The commands run in a private mount namespace whose `/etc/hosts` names the host as an
/// address the lab has no route to, and whose `/etc/resolv.conf` names a DNS server this test
/// holds on 127.0.0.77 and counts queries at: what the machine's side would answer is wrong, and
/// any query it sent would be seen. The machine's own files are never touched.
@Suite("Names of a namespace are resolved inside it (integration)", .offPool, .serialized, .needsNamespaceRoot)
struct NamespaceResolutionTests {
    /// In the lab's hosts file: its own loopback, a path the lab has.
    static let labAnswer = "127.0.0.99"

    @Test func statusWaitAndProbeResolveInsideTheNamespace() async throws {
        try await NetnsLab.withLab(NetnsLab.Setup(ipv4: false, defaultRoutes: false)) { lab in
            let etc = EtcNetns.directory(for: lab)
            try EtcNetns.writeResolvConf("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n", for: lab)
            defer { EtcNetns.remove(for: lab) }
            try "\(Self.labAnswer) app.nrtest\n".write(toFile: etc + "/hosts", atomically: true, encoding: .utf8)

            // The machine's side, as the commands will see it.
            let counter = try DNSQueryCounter(address: "127.0.0.77")
            defer { counter.close() }
            let hosts = lab.directory + "/machine-hosts"
            let resolvConf = lab.directory + "/machine-resolv.conf"
            try "10.200.0.1 app.nrtest\n".write(toFile: hosts, atomically: true, encoding: .utf8)
            try "nameserver 127.0.0.77\noptions timeout:1 attempts:1\n".write(
                toFile: resolvConf, atomically: true, encoding: .utf8)
            let netreach = try NetreachProcess.executable().path
            func onMachineSide(_ command: [String]) -> (String, [String]) {
                (
                    "/usr/bin/unshare",
                    [
                        "-m", "--propagation", "private", "sh", "-c",
                        #"mount --bind "$1" /etc/hosts && mount --bind "$2" /etc/resolv.conf && shift 2 && exec "$@""#,
                        "sh", hosts, resolvConf,
                    ] + command
                )
            }

            // The machine's side alone (no namespace) has the other answer, and asks its server.
            let (tool, here) = onMachineSide([netreach, "status", "--json", "--to", "missing.nrtest"])
            let machine = try await ChildProcess.run(tool, here, timeout: .seconds(60))
            #expect(machine.standardOutput.contains("\"unsatisfied\""), "\(machine.standardOutput)")
            #expect(counter.queries > 0, "the machine-side stand-in is not the resolver the commands use")
            let askedBefore = counter.queries

            let (statusTool, statusArguments) = onMachineSide([
                netreach, "status", "--json", "--namespace", lab.name, "--to", "app.nrtest",
            ])
            let status = try await ChildProcess.run(statusTool, statusArguments, timeout: .seconds(60))
            #expect(status.status == 0, "\(status.standardError)")
            #expect(status.standardOutput.contains("\"status\":\"satisfied\""), "\(status.standardOutput)")
            #expect(status.standardOutput.contains("\"name\":\"lo\""), "\(status.standardOutput)")

            let (waitTool, waitArguments) = onMachineSide([
                netreach, "wait", "--namespace", lab.name, "--to", "app.nrtest", "--timeout", "20s",
            ])
            let waited = try await ChildProcess.run(waitTool, waitArguments, timeout: .seconds(60))
            #expect(waited.status == 0, "\(waited.standardError)")

            let (serveTool, serveArguments) = onMachineSide([
                netreach, "serve", "--listen", "127.0.0.1:0", "--namespace", lab.name,
            ])
            let serve = try ChildProcess(serveTool, serveArguments)
            defer { serve.kill() }
            let base = try await ServeClient.baseURL(of: serve)
            let probe = try await ServeClient.get(base + "/probe?target=app.nrtest&namespace=\(lab.name)")
            #expect(probe.status == 200, "\(probe.body)")
            #expect(probe.body.contains("probe_success 1"), "\(probe.body)")

            #expect(
                counter.queries == askedBefore, "\(counter.queries - askedBefore) queries reached the machine's side")
        }
    }
}

/// A UDP socket on `address`:53 that counts the datagrams it receives and answers none.
final class DNSQueryCounter: @unchecked Sendable {
    // @unchecked: `descriptor` is set once; `count` is guarded by `lock`.
    private let descriptor: Int32
    private let lock = NSLock()
    private var count = 0
    private var closed = false

    init(address: String) throws {
        descriptor = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var socketAddress = sockaddr_in()
        socketAddress.sin_family = sa_family_t(AF_INET)
        socketAddress.sin_port = in_port_t(53).bigEndian
        inet_pton(AF_INET, address, &socketAddress.sin_addr)
        let bound = withUnsafePointer(to: &socketAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard descriptor >= 0, bound == 0 else {
            throw ExternalServerError.commandFailed("cannot bind \(address):53: errno \(errno)")
        }
        let counter = self
        Thread { counter.receive() }.start()
    }

    var queries: Int { lock.withLock { count } }

    func close() {
        lock.withLock { closed = true }
        shutdown(descriptor, Int32(SHUT_RDWR))
    }

    private func receive() {
        var buffer = [UInt8](repeating: 0, count: 1500)
        while true {
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 100) >= 0 else { break }
            if lock.withLock({ closed }) { break }
            guard poller.revents & Int16(POLLIN) != 0 else { continue }
            if recv(descriptor, &buffer, buffer.count, 0) > 0 { lock.withLock { count += 1 } }
        }
        Glibc.close(descriptor)
    }
}
#endif
