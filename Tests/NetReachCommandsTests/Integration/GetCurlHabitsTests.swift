#if os(Linux)
import Foundation
import NetReachTestSupport
import Testing

@testable import NetReachCommands

#if canImport(Glibc)
import Glibc
#endif

/// curl's remaining habits in `netreach get` (issue 48, items 9 and 10), each beside curl on the
/// same local server in the same test, which records what each client sent
/// (Scripts/capture-server.py): the default User-Agent and Accept and the options that change
/// them, `--resolve` and `--connect-to` (the TLS server name and certificate staying the URL's
/// host, redirects included), and `--create-dirs`. Traffic only to 127.0.0.1 and ::1.
@Suite(
    "netreach get: curl's header fields, --resolve, --connect-to, --create-dirs beside curl (integration)",
    .offPool, .serialized, .enabled(if: ExternalServer.available("curl", "openssl", "python3")),
    .timeLimit(.minutes(3)))
struct GetCurlHabitsTests {
    private static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Scripts/capture-server.py").path

    // MARK: User-Agent and Accept

    @Test("User-Agent and Accept by default, and -A / -H replacing or removing them, as curl")
    func defaultFieldsAsCurl() async throws {
        let curl = try ExternalServer.require("curl")
        let netreach = try netreachPath()
        try await Self.withServer { server in
            let url = "http://127.0.0.1:\(server.port)/fields"
            // Each line: the options, then what both must send for the fields compared.
            let cases: [(options: [String], userAgent: String??, accept: String?)] = [
                ([], nil, "*/*"),
                (["-A", "script/2.1"], "script/2.1", "*/*"),
                (["--user-agent", "script/2.1", "-H", "User-Agent: header/1"], "header/1", "*/*"),
                (["-A", ""], .some(nil), "*/*"),
                (["-H", "User-Agent:"], .some(nil), "*/*"),
                (["-H", "Accept: application/json"], nil, "application/json"),
                (["-H", "Accept:"], nil, nil),
                (["-H", "accept:", "-A", "x"], "x", nil),
                (["-H", "X-Empty;", "-H", "X-Gone:"], nil, "*/*"),
            ]
            for (options, userAgent, accept) in cases {
                let ours = try await ChildProcess.run(netreach, ["get", "-q"] + options + [url])
                #expect(ours.status == 0 && ours.standardOutput == "ok\n", "\(options): \(ours.standardError)")
                let theirs = try await ChildProcess.run(curl, ["-sS"] + options + [url])
                #expect(theirs.status == 0 && theirs.standardOutput == "ok\n", "\(options): \(theirs.standardError)")
                let heads = try server.heads(count: 2)
                let (ourFields, curlFields) = (Self.fields(heads[0]), Self.fields(heads[1]))
                switch userAgent {
                case .none:
                    #expect(Self.value("User-Agent", ourFields) == "netreach/\(NetreachCommand.version)", "\(heads[0])")
                    #expect(Self.value("User-Agent", curlFields)?.hasPrefix("curl/") == true, "\(heads[1])")
                case .some(let expected):
                    #expect(Self.value("User-Agent", ourFields) == expected, "\(options): \(heads[0])")
                    #expect(Self.value("User-Agent", curlFields) == expected, "\(options): \(heads[1])")
                }
                #expect(Self.value("Accept", ourFields) == accept, "\(options): \(heads[0])")
                #expect(Self.value("Accept", curlFields) == accept, "\(options): \(heads[1])")
                // Every other field the same, but the transport's Accept-Encoding (curl sends one
                // only with --compressed) and the User-Agent's name.
                let others = { (fields: [(String, String)]) in
                    fields.filter { !["user-agent", "accept-encoding"].contains($0.0) }.map { "\($0.0): \($0.1)" }
                        .sorted()
                }
                #expect(others(ourFields) == others(curlFields), "\(options): \(heads)")
                server.clear()
            }
        }
    }

    @Test("-H 'Host:': curl sends no Host, which HTTP/1.1 forbids; get refuses it (64) and sends nothing")
    func hostRemovalIsRefused() async throws {
        let curl = try ExternalServer.require("curl")
        let netreach = try netreachPath()
        try await Self.withServer { server in
            let url = "http://127.0.0.1:\(server.port)/no-host"
            let theirs = try await ChildProcess.run(curl, ["-sS", "-H", "Host:", url])
            #expect(theirs.status == 0, "\(theirs.standardError)")
            let curlHead = try server.heads(count: 1)[0]
            #expect(Self.value("Host", Self.fields(curlHead)) == nil, "curl sent a Host: \(curlHead)")
            server.clear()
            for options in [["-H", "Host:"], ["-H", "host:", "-H", "X-Other: 1"]] {
                let ours = try await ChildProcess.run(netreach, ["get", "-q"] + options + [url])
                #expect(ours.status == 64, "\(options): \(ours.status) \(ours.standardError)")
                #expect(ours.standardError.contains("HTTP/1.1 requires one"), "\(ours.standardError)")
                #expect(server.heads().isEmpty, "a request went out: \(server.heads())")
            }
            // Another Host given as well replaces the removal, in both.
            let options = ["-H", "Host:", "-H", "Host: other.invalid"]
            let ours = try await ChildProcess.run(netreach, ["get", "-q"] + options + [url])
            #expect(ours.status == 0, "\(ours.standardError)")
            _ = try await ChildProcess.run(curl, ["-sS"] + options + [url])
            let hosts = try server.heads(count: 2).map { Self.value("Host", Self.fields($0)) }
            #expect(hosts == ["other.invalid", "other.invalid"], "\(hosts)")
        }
    }

    // MARK: --resolve and --connect-to

    @Test("--resolve to a made-up name over TLS: SNI, Host and certificate are the name's, as curl")
    func resolveOverTLS() async throws {
        let curl = try ExternalServer.require("curl")
        let netreach = try netreachPath()
        let certificates = try await TestCertificates.make()
        defer { certificates.remove() }
        let ca = certificates.path("ca.pem")
        // `other.pem` names other.invalid only; nothing resolves that name but the options.
        let tls = (certificates.path("other.pem"), certificates.path("other.key"))
        try await Self.withServer(tls: tls) { v4 in
            try await Self.withServer(address: "::1", tls: tls) { v6 in
                let cases: [(resolve: [String], port: Int, server: Server)] = [
                    (["other.invalid:\(v4.port):127.0.0.1"], v4.port, v4),
                    (["other.invalid:\(v6.port):[::1]"], v6.port, v6),
                    (["other.invalid:\(v6.port):::1"], v6.port, v6),
                    (["*:\(v4.port):127.0.0.1"], v4.port, v4),
                    // The first address refuses (nothing listens on 127.0.0.1 at the IPv6
                    // server's port): the next one is tried, as curl tries them.
                    (["other.invalid:\(v6.port):127.0.0.1,[::1]"], v6.port, v6),
                    // A later entry for the same host and port wins; -HOST:PORT drops one; + is accepted.
                    (["other.invalid:\(v4.port):[::1]", "+other.invalid:\(v4.port):127.0.0.1"], v4.port, v4),
                    (
                        ["other.invalid:\(v4.port):[::1]", "-other.invalid:\(v4.port)", "*:\(v4.port):127.0.0.1"],
                        v4.port, v4
                    ),
                ]
                for (entries, port, server) in cases {
                    let url = "https://other.invalid:\(port)/resolved"
                    let options = entries.flatMap { ["--resolve", $0] } + ["--cacert", ca]
                    let ours = try await ChildProcess.run(netreach, ["get", "-q", "--retries", "0"] + options + [url])
                    #expect(ours.status == 0 && ours.standardOutput == "ok\n", "\(entries): \(ours.standardError)")
                    let theirs = try await ChildProcess.run(curl, ["-sS"] + options + [url])
                    #expect(
                        theirs.status == 0 && theirs.standardOutput == "ok\n", "\(entries): \(theirs.standardError)")
                    let records = try server.records(count: 2)
                    #expect(records.map { $0["sni"] as? String } == ["other.invalid", "other.invalid"], "\(records)")
                    let hosts = records.map { Self.value("Host", Self.fields($0["head"] as? String ?? "")) }
                    #expect(hosts == ["other.invalid:\(port)", "other.invalid:\(port)"], "\(entries): \(records)")
                    server.clear()
                }

                // The certificate is checked against the URL's host, not the address: a
                // certificate for other.invalid does not do for localhost (curl 60).
                let url = "https://localhost:\(v4.port)/wrong-name"
                let options = ["--resolve", "localhost:\(v4.port):127.0.0.1", "--cacert", ca]
                let ours = try await ChildProcess.run(netreach, ["get", "-q", "--retries", "0"] + options + [url])
                let theirs = try await ChildProcess.run(curl, ["-sS"] + options + [url])
                #expect(theirs.status == 60, "\(theirs.standardError)")
                #expect(ours.status == 60, "\(ours.standardError)")
                #expect(ours.standardError.contains("another host name"), "\(ours.standardError)")
                #expect(v4.heads().isEmpty, "a request was sent to a server that failed the check: \(v4.heads())")
            }
        }
    }

    @Test("--connect-to, alone and with --resolve for its host, over TLS, as curl")
    func connectToOverTLS() async throws {
        let curl = try ExternalServer.require("curl")
        let netreach = try netreachPath()
        let certificates = try await TestCertificates.make()
        defer { certificates.remove() }
        let ca = certificates.path("ca.pem")
        let tls = (certificates.path("other.pem"), certificates.path("other.key"))
        try await Self.withServer(tls: tls) { server in
            let port = server.port
            let cases: [[String]] = [
                ["--connect-to", "other.invalid:443:127.0.0.1:\(port)"],
                ["--connect-to", "::127.0.0.1:\(port)"],
                ["--connect-to", "other.invalid::[::1]:1", "--connect-to", "other.invalid:443:127.0.0.1:\(port)"],
                [
                    "--connect-to", "other.invalid:443:backend.invalid:\(port)",
                    "--resolve", "backend.invalid:\(port):127.0.0.1",
                ],
            ]
            for options in cases {
                // The URL's own port, 443, is never connected to.
                let url = "https://other.invalid/connected"
                let ours = try await ChildProcess.run(
                    netreach, ["get", "-q", "--retries", "0", "--cacert", ca] + options + [url])
                let theirs = try await ChildProcess.run(curl, ["-sS", "--cacert", ca] + options + [url])
                if options[1].hasPrefix("other.invalid::[::1]") {
                    // The first entry matches and sends both to [::1]:1, refused (curl 7).
                    #expect(theirs.status == 7, "\(theirs.standardError)")
                    #expect(ours.status == 7, "\(ours.standardError)")
                    #expect(ours.standardError.contains("other.invalid:443 (at [::1]:1)"), "\(ours.standardError)")
                    continue
                }
                #expect(ours.status == 0 && ours.standardOutput == "ok\n", "\(options): \(ours.standardError)")
                #expect(theirs.status == 0 && theirs.standardOutput == "ok\n", "\(options): \(theirs.standardError)")
                let records = try server.records(count: 2)
                #expect(records.map { $0["sni"] as? String } == ["other.invalid", "other.invalid"], "\(records)")
                let hosts = records.map { Self.value("Host", Self.fields($0["head"] as? String ?? "")) }
                #expect(hosts == ["other.invalid", "other.invalid"], "\(options): \(records)")
                server.clear()
            }
        }
    }

    @Test("A redirect's connection goes where --resolve and --connect-to say too, as curl -L")
    func redirectsFollowTheOverrides() async throws {
        let curl = try ExternalServer.require("curl")
        let netreach = try netreachPath()
        try await Self.withServer { server in
            let port = server.port
            let cases: [[String]] = [
                ["--resolve", "first.invalid:\(port):127.0.0.1", "--resolve", "second.invalid:\(port):127.0.0.1"],
                ["--resolve", "*:\(port):127.0.0.1"],
                ["--connect-to", "first.invalid:\(port):127.0.0.1:", "--connect-to", "second.invalid::127.0.0.1:"],
            ]
            for options in cases {
                let url = "http://first.invalid:\(port)/redirect/http://second.invalid:\(port)/final"
                let ours = try await ChildProcess.run(netreach, ["get", "-q", "--retries", "0"] + options + [url])
                #expect(ours.status == 0 && ours.standardOutput == "ok\n", "\(options): \(ours.standardError)")
                let theirs = try await ChildProcess.run(curl, ["-sS", "-L"] + options + [url])
                #expect(theirs.status == 0 && theirs.standardOutput == "ok\n", "\(options): \(theirs.standardError)")
                let hosts = try server.heads(count: 4).map { Self.value("Host", Self.fields($0)) }
                let expected = ["first.invalid:\(port)", "second.invalid:\(port)"]
                #expect(hosts == expected + expected, "\(options): \(hosts)")
                server.clear()
            }
        }
    }

    @Test(
        "Entries that cannot be read are usage errors (64) with a sentence, before anything is sent",
        arguments: [
            (["--resolve", "garbage"], "--resolve 'garbage': no port"),
            (["--resolve", "example.com:99999:127.0.0.1"], "'99999' is not a port (1 to 65535)"),
            (["--resolve", "example.com:443:"], "no address"),
            (["--resolve", "example.com:443:not-an-address"], "'not-an-address' is not an IPv4 or IPv6 address"),
            (["--resolve", "example.com:443:[::1"], "'[::1' is not an address"),
            (["--resolve", "exa mple.com:443:127.0.0.1"], "'exa mple.com' is not a host name"),
            (["--connect-to", "garbage"], "--connect-to 'garbage': no port after the first host"),
            (["--connect-to", "a:70000:b:1"], "'70000' is not a port (1 to 65535)"),
            (["--connect-to", "a:443:b:x"], "'x' is not a port"),
            (["--connect-to", "a:443:[::1:80"], "an IPv6 address without its ']'"),
            (["--connect-to", "a:443"], "no host and port to connect to"),
        ])
    func unreadableEntries(_ options: [String], _ says: String) async throws {
        let ours = try await ChildProcess.run(try netreachPath(), ["get"] + options + ["http://127.0.0.1:1/never"])
        #expect(ours.status == 64, "\(options): \(ours.status) \(ours.standardError)")
        #expect(ours.standardError.contains(says), "\(options): \(ours.standardError)")
        #expect(!ours.standardError.contains("Fatal error"), "\(ours.standardError)")
        // curl refuses the --resolve ones too (49, its "malformed option").
        if options[0] == "--resolve", options[1] != "exa mple.com:443:127.0.0.1" {
            let curl = try ExternalServer.require("curl")
            let theirs = try await ChildProcess.run(curl, ["-sS"] + options + ["http://127.0.0.1:1/never"])
            #expect(theirs.status == 49, "curl \(options): \(theirs.status) \(theirs.standardError)")
        }
    }

    // MARK: --create-dirs

    @Test("--create-dirs makes the missing directories (mode 0750 less the umask) as curl; without it, 23")
    func createDirectoriesAsCurl() async throws {
        let curl = try ExternalServer.require("curl")
        let netreach = try netreachPath()
        let scratch = try TemporaryDirectory("netreach-create-dirs")
        defer { scratch.remove() }
        try await Self.withServer { server in
            let url = "http://127.0.0.1:\(server.port)/file"
            let ours = scratch.path("ours/a/b/file.txt")
            let theirs = scratch.path("theirs/a/b/file.txt")
            for (tool, arguments) in [
                (netreach, ["get", "-q", "-o", ours, url]), (curl, ["-sS", "-o", theirs, url]),
            ] {
                let missing = try await ChildProcess.run(tool, arguments)
                #expect(missing.status == 23, "\(tool): \(missing.status) \(missing.standardError)")
            }
            #expect(!FileManager.default.fileExists(atPath: scratch.path("ours")))
            let made = try await ChildProcess.run(netreach, ["get", "-q", "--create-dirs", "-o", ours, url])
            #expect(made.status == 0, "\(made.standardError)")
            let curled = try await ChildProcess.run(curl, ["-sS", "--create-dirs", "-o", theirs, url])
            #expect(curled.status == 0, "\(curled.standardError)")
            #expect(try String(contentsOfFile: ours, encoding: .utf8) == "ok\n")
            #expect(try String(contentsOfFile: theirs, encoding: .utf8) == "ok\n")
            for directory in ["", "/a", "/a/b"] {
                let (mine, curls) = (
                    Self.mode(scratch.path("ours" + directory)), Self.mode(scratch.path("theirs" + directory))
                )
                #expect(
                    mine == curls, "\(directory): \(String(mine, radix: 8)) against curl's \(String(curls, radix: 8))")
                #expect(mine & 0o7027 == 0, "\(directory): \(String(mine, radix: 8))")
            }
            // A file where a directory is needed: 23 with the reason, as curl.
            let blocked = scratch.path("ours/a/b/file.txt/c/out")
            let refused = try await ChildProcess.run(netreach, ["get", "-q", "--create-dirs", "-o", blocked, url])
            #expect(refused.status == 23, "\(refused.standardError)")
            #expect(refused.standardError.contains("cannot create the directory"), "\(refused.standardError)")
            let curlRefused = try await ChildProcess.run(curl, ["-sS", "--create-dirs", "-o", blocked, url])
            #expect(curlRefused.status == 23, "\(curlRefused.standardError)")
        }
    }

    // MARK: Support

    /// A capture server on `address` at a port of its own, and its log.
    final class Server: Sendable {
        let port: Int
        let log: String

        init(port: Int, log: String) {
            self.port = port
            self.log = log
        }

        /// Every request the server logged (each before it answered); not the connections that
        /// sent none, such as the second handshake of netreach's certificate strength check.
        func records() throws -> [[String: Any]] {
            let lines = ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n")
            return try lines.map { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] ?? [:] }
                .filter { ($0["head"] as? String)?.isEmpty == false }
        }

        func records(count: Int) throws -> [[String: Any]] {
            let found = try records()
            try #require(found.count == count, "the server logged \(found)")
            return found
        }

        func heads() -> [String] { ((try? records()) ?? []).map { $0["head"] as? String ?? "" } }

        func heads(count: Int) throws -> [String] { try records(count: count).map { $0["head"] as? String ?? "" } }

        func clear() { try? Data().write(to: URL(fileURLWithPath: log)) }
    }

    private static func withServer(
        address: String = "127.0.0.1", tls: (certificate: String, key: String)? = nil,
        _ body: (Server) async throws -> Void
    ) async throws {
        let scratch = try TemporaryDirectory("netreach-capture")
        defer { scratch.remove() }
        let log = scratch.path("capture.log")
        var lastError = ""
        // A port picked on 127.0.0.1 may be taken on the other family or by then: a few tries.
        for _ in 0..<5 {
            let port = try FreePort.pick()
            let options = tls.map { ["--tls", $0.certificate, $0.key] } ?? []
            let server = try ChildProcess("/usr/bin/python3", [script, address, String(port), log] + options)
            defer { server.kill() }
            guard await server.nextLine(timeout: .seconds(30)) == "ready" else {
                lastError = server.diagnosis()
                continue
            }
            try await body(Server(port: port, log: log))
            return
        }
        Issue.record("the capture server did not start: \(lastError)")
    }

    /// A head's fields, names in lower case, values trimmed.
    private static func fields(_ head: String) -> [(String, String)] {
        head.split(separator: "\r\n").dropFirst().compactMap { line in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (
                line[..<colon].lowercased(),
                line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            )
        }
    }

    private static func value(_ name: String, _ fields: [(String, String)]) -> String? {
        fields.first { $0.0 == name.lowercased() }?.1
    }

    private static func mode(_ path: String) -> mode_t {
        var info = stat()
        return stat(path, &info) == 0 ? info.st_mode & 0o7777 : 0
    }
}
#endif
