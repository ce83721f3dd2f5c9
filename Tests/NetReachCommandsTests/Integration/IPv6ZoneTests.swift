#if os(Linux)
import Foundation
import NetReachTestSupport
import Testing

/// A URL with an IPv6 zone (`http://[fe80::1%25veth0]:8080/`): the zone picks the interface to
/// connect through and never goes on the wire (RFC 6874, RFC 9110 §7.2), compared byte for byte
/// with what curl sends to the same server. The server listens on a link-local address in the
/// lab's peer namespace; `get` and curl run in the lab's namespace, where `veth0` leads to it.
@Suite("netreach get: an IPv6 zone never reaches the wire (integration)", .offPool, .needsNamespaceRoot)
struct IPv6ZoneTests {
    private static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Scripts/capture-server.py").path

    @Test func hostIsSentWithoutTheZoneAsCurlSendsIt() async throws {
        try await Self.withLinkLocalServer { lab, log in
            let url = "http://[fe80::1%25\(NetnsLab.interface)]:8080/page"
            let ours = try await Self.inLab(lab, [try NetreachProcess.executable().path, "get", "-q", url])
            #expect(ours.status == 0, "\(ours.standardError)")
            let curl = try await Self.inLab(lab, ["/usr/bin/curl", "-sS", "-g", url])
            #expect(curl.status == 0, "\(curl.standardError)")

            let heads = try Self.heads(log, count: 2)
            #expect(Self.field("Host", in: heads[0]) == "[fe80::1]:8080", "\(heads[0])")
            #expect(Self.field("Host", in: heads[0]) == Self.field("Host", in: heads[1]), "curl sent \(heads[1])")
            for head in heads { #expect(!head.contains(NetnsLab.interface), "\(head)") }
        }
    }

    @Test func httpsSendsNoServerNameAndNoZoneAsCurl() async throws {
        let certificates = try await TestCertificates.make()
        defer { certificates.remove() }
        try await Self.withLinkLocalServer(
            tls: (certificates.path("server.pem"), certificates.path("server.key"))
        ) { lab, log in
            let url = "https://[fe80::1%25\(NetnsLab.interface)]:8080/page"
            let ours = try await Self.inLab(
                lab, [try NetreachProcess.executable().path, "get", "-q", "--insecure", url])
            #expect(ours.status == 0, "\(ours.standardError)")
            let curl = try await Self.inLab(lab, ["/usr/bin/curl", "-sS", "-g", "-k", url])
            #expect(curl.status == 0, "\(curl.standardError)")

            let records = try Self.records(log, count: 2)
            // An address is never a TLS server name (RFC 6066), with or without its zone.
            #expect(records.allSatisfy { $0["sni"] as? String == nil }, "\(records)")
            let heads = records.compactMap { $0["head"] as? String }
            #expect(heads.map { Self.field("Host", in: $0) } == ["[fe80::1]:8080", "[fe80::1]:8080"], "\(heads)")
        }
    }

    @Test func aProxySeesNoZoneInTheRequestLine() async throws {
        try await NetnsLab.withLab { lab in
            let log = lab.directory + "/proxy.log"
            // The capture server answers as a proxy would: what it reads is what a proxy is told.
            let proxy = try ChildProcess(
                "/usr/sbin/ip", ["netns", "exec", lab.name, "/usr/bin/python3", Self.script, "::1", "3128", log])
            defer { proxy.kill() }
            #expect(await proxy.nextLine(timeout: .seconds(30)) == "ready", "\(proxy.standardError)")
            let url = "http://[fe80::1%25\(NetnsLab.interface)]:8080/page"
            let ours = try await Self.inLab(
                lab, [try NetreachProcess.executable().path, "get", "-q", "--proxy", "http://[::1]:3128", url])
            #expect(ours.status == 0, "\(ours.standardError)")
            let curl = try await Self.inLab(lab, ["/usr/bin/curl", "-sS", "-g", "-x", "http://[::1]:3128", url])
            #expect(curl.status == 0, "\(curl.standardError)")

            let heads = try Self.heads(log, count: 2)
            let lines = heads.map { $0.split(separator: "\r\n").first.map(String.init) ?? "" }
            #expect(lines == ["GET http://[fe80::1]:8080/page HTTP/1.1", "GET http://[fe80::1]:8080/page HTTP/1.1"])
            #expect(heads.map { Self.field("Host", in: $0) } == ["[fe80::1]:8080", "[fe80::1]:8080"], "\(heads)")

            // https would go through CONNECT, which AsyncHTTPClient writes with the zone: refused,
            // nothing sent, where curl sends `CONNECT [fe80::1]:8443`.
            let tunnelled = try await Self.inLab(
                lab,
                [
                    try NetreachProcess.executable().path, "get", "-q", "--insecure", "--proxy", "http://[::1]:3128",
                    "https://[fe80::1%25\(NetnsLab.interface)]:8443/",
                ])
            #expect(tunnelled.status == 64, "\(tunnelled.status) \(tunnelled.standardError)")
            #expect(tunnelled.standardError.contains("IPv6 zone"), "\(tunnelled.standardError)")
            #expect(try Self.records(log).count == 2, "the proxy was sent something")
        }
    }

    // MARK: Support

    /// A lab whose peer holds fe80::1 on veth1 and whose own side holds fe80::2 on veth0, with the
    /// capture server listening on [fe80::1%veth1]:8080 (TLS with `tls`); `body` gets the lab and
    /// the server's log.
    private static func withLinkLocalServer(
        tls: (certificate: String, key: String)? = nil, _ body: (NetnsLab, String) async throws -> Void
    ) async throws {
        try await NetnsLab.withLab(NetnsLab.Setup(ipv4: false, defaultRoutes: false)) { lab in
            try await lab.peerIP("addr", "add", "fe80::1/64", "dev", NetnsLab.peerInterface, "nodad")
            try await lab.ip("addr", "add", "fe80::2/64", "dev", NetnsLab.interface, "nodad")
            try await lab.waitForCarrier()
            let log = lab.directory + "/capture.log"
            let options = tls.map { ["--tls", $0.certificate, $0.key] } ?? []
            let server = try ChildProcess(
                "/usr/sbin/ip",
                [
                    "netns", "exec", lab.peerName, "/usr/bin/python3", script, "fe80::1%\(NetnsLab.peerInterface)",
                    "8080", log,
                ]
                    + options)
            defer { server.kill() }
            #expect(await server.nextLine(timeout: .seconds(30)) == "ready", "\(server.standardError)")
            try await body(lab, log)
        }
    }

    private static func inLab(_ lab: NetnsLab, _ command: [String]) async throws -> ChildProcess.Finished {
        try await ChildProcess.run("/usr/sbin/ip", ["netns", "exec", lab.name] + command, timeout: .seconds(60))
    }

    /// Every record the server logged (each before it answered, so a client that has its
    /// response has its record there).
    private static func records(_ log: String) throws -> [[String: Any]] {
        let lines = ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n")
        return try lines.map { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] ?? [:] }
    }

    /// The records of the `count` requests made, and no others.
    private static func records(_ log: String, count: Int) throws -> [[String: Any]] {
        let records = try records(log)
        try #require(records.count == count, "the server logged \(records)")
        return records
    }

    private static func heads(_ log: String, count: Int) throws -> [String] {
        try records(log, count: count).map { $0["head"] as? String ?? "" }
    }

    /// The value of header field `name` in a request head, or nil.
    private static func field(_ name: String, in head: String) -> String? {
        for line in head.split(separator: "\r\n").dropFirst() {
            let parts = line.split(separator: ":", maxSplits: 1)
            if parts.count == 2, parts[0].lowercased() == name.lowercased() {
                return parts[1].trimmingCharacters(in: .whitespaces)
            }
        }
        return nil
    }
}
#endif
