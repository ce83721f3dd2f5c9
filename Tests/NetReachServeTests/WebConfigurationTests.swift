import Foundation
import HummingbirdBcrypt
import NetReachSystem
import NetReachTestSupport
import Synchronization
import Testing

@testable import NetReachServe

/// `--web.config.file` read as exporter-toolkit reads it: its own test files' cases (the good and
/// the bad), and the keys netreach refuses by name. Pure: no files but the one a case writes.
@Suite("web configuration file")
struct WebConfigurationTests {
    private func parse(_ yaml: String) throws(WebConfiguration.Invalid) -> WebConfiguration {
        try WebConfiguration(yaml: yaml, directory: "/etc/netreach")
    }

    private func reason(_ yaml: String) -> String {
        do {
            _ = try parse(yaml)
            return "accepted"
        } catch {
            return error.description
        }
    }

    @Test func anEmptyFileIsPlainHTTPWithoutUsers() throws {
        for text in ["", "\n", "# nothing\n", "{}"] {
            #expect(try parse(text) == WebConfiguration(), "\(text.debugDescription)")
        }
    }

    @Test func tlsWithRelativeFilesIsReadFromTheFilesDirectory() throws {
        let web = try parse(
            """
            tls_server_config:
              cert_file: serve.crt
              key_file: /keys/serve.key
              client_auth_type: RequireAndVerifyClientCert
              client_ca_file: ca/clients.pem
              min_version: TLS13
            """)
        let tls = try #require(web.tls)
        #expect(tls.certificate == .file("/etc/netreach/serve.crt"))
        #expect(tls.key == .file("/keys/serve.key"))
        #expect(tls.clientCAs == .file("/etc/netreach/ca/clients.pem"))
        #expect(tls.clientAuth == .requireAndVerifyClientCert)
        #expect(tls.minimumVersion == .tls13)
        #expect(tls.maximumVersion == .tls13)
    }

    @Test func theDefaultsAreExporterToolkits() throws {
        let tls = try #require(try parse("tls_server_config:\n  cert: x\n  key: y\n").tls)
        #expect(tls.certificate == .text("x"))
        #expect(tls.clientAuth == .noClientCert)
        #expect(tls.minimumVersion == .tls12)
        #expect(tls.maximumVersion == .tls13)
        // RequireClientCert is exporter-toolkit's older name, still read.
        let old = try parse("tls_server_config:\n  cert: x\n  key: y\n  client_auth_type: RequireClientCert\n")
        #expect(old.tls?.clientAuth == .requireAnyClientCert)
    }

    @Test(arguments: [
        // exporter-toolkit's *.bad.yml cases, and their reasons.
        ("tls_server_config:\n  key_file: k\n", "missing one of cert or cert_file"),
        ("tls_server_config:\n  cert_file: c\n", "missing one of key or key_file"),
        ("tls_server_config:\n  client_auth_type: RequireAndVerifyClientCert\n", "missing one of cert or cert_file"),
        ("tls_server_config:\n  cert_file: c\n  key_file: k\n  client_auth_type: Bogus\n", "is not one of"),
        ("tls_server_config:\n  cert_file: c\n  key_file: k\n  client_ca_file: ca\n", "without a client_auth_type"),
        ("tls_server_config:\n  cert_file: c\n  key_file: k\n  min_version: TLS111\n", "is not one of"),
        (
            "tls_server_config:\n  cert_file: c\n  key_file: k\n  min_version: TLS13\n  max_version: TLS12\n",
            "above max_version"
        ),
        ("tls_server_config:\n  cert_file: c\n  cert: x\n  key_file: k\n", "not both"),
        ("tls_server_config:\n  min_version: TLS13\n", "TLS is off"),
        (
            "tls_server_config:\n  cert_file: c\n  key_file: k\n  cipher_suites: [TLS_RSA_WITH_RC4_128_SHA]\n",
            "cipher_suites is not supported"
        ),
        ("tls_server_config:\n  curve_preferences: [CurveP257]\n", "curve_preferences is not supported"),
        ("tls_server_config:\n  client_allowed_sans: [a]\n", "client_allowed_sans is not supported"),
        ("rate_limit:\n  burst: 1\n", "rate_limit is not supported"),
        ("tls_server_config: [a]\n", "must be a mapping"),
        ("junk\n", "must be a mapping"),
        ("tls_sever_config: {}\n", "unknown key \"tls_sever_config\""),
        ("http_server_config:\n  headers:\n    Set-Cookie: a\n", "unknown key \"Set-Cookie\""),
        ("http_server_config:\n  headers:\n    X-Frame-Options: allow\n", "must be one of deny, sameorigin"),
        ("http_server_config:\n  headers:\n    X-Content-Type-Options: sniff\n", "must be one of nosniff"),
        ("http_server_config:\n  http2: sometimes\n", "true or false"),
        ("basic_auth_users:\n  alice: alice123\n", "is not a bcrypt hash"),
        ("basic_auth_users:\n  alice: [a]\n", "must be text"),
        ("basic_auth_users: [alice]\n", "must be a mapping"),
        ("basic_auth_users:\n  \"a:b\": $2y$10$qRTBuFoULoYNA7AQ/F3ck.trZBPyjV64.oA4ZsSBCIWvXuvQlQTuu\n", "colon"),
        ("basic_auth_users:\n  a: $2x$10$qRTBuFoULoYNA7AQ/F3ck.trZBPyjV64.oA4ZsSBCIWvXuvQlQTuu\n", "$2x$"),
        ("basic_auth_users:\n  a: $2y$03$qRTBuFoULoYNA7AQ/F3ck.trZBPyjV64.oA4ZsSBCIWvXuvQlQTuu\n", "cost 3"),
        (
            "basic_auth_users:\n  a: $2y$10$qRTBuFoULoYNA7AQ/F3ck.trZBPyjV64.oA4ZsSBCIWvXuvQlQTu!\n",
            "outside bcrypt's base64"
        ),
        ("a: [\n", "not YAML"),
    ])
    func aBadFileSaysWhy(_ yaml: String, _ expected: String) {
        let said = reason(yaml)
        #expect(said.contains(expected), "\(yaml.debugDescription) → \(said)")
    }

    @Test func usersAndHeadersAreRead() throws {
        let web = try parse(
            """
            basic_auth_users:
              alice: $2y$12$1DpfPeqF9HzHJt.EWswy1exHluGfbhnn3yXhR7Xes6m3WJqFg0Wby
              carol: $2b$10$qRTBuFoULoYNA7AQ/F3ck.trZBPyjV64.oA4ZsSBCIWvXuvQlQTuu
            http_server_config:
              http2: false
              headers:
                X-Frame-Options: deny
                Strict-Transport-Security: max-age=31536000
            """)
        #expect(web.users.keys.sorted() == ["alice", "carol"])
        #expect(web.headers == ["X-Frame-Options": "deny", "Strict-Transport-Security": "max-age=31536000"])
        #expect(web.tls == nil)
    }

    /// exporter-toolkit's tlsInline shape: the certificate and key written in the file, in literal
    /// blocks; CRLF line ends as a Windows editor saves them.
    @Test(arguments: ["\n", "\r\n"])
    func inlinePEMIsReadAsWritten(lineEnd: String) throws {
        let certificate =
            "-----BEGIN CERTIFICATE-----\nMIIFsDCCA5igAwIBAgIRAMMSh5NoexSCjSvDRf1fpgMw\n-----END CERTIFICATE-----\n"
        let key =
            "-----BEGIN PRIVATE KEY-----\nMIIJQwIBADANBgkqhkiG9w0BAQEFAASCCS0wggkpAgEA\n-----END PRIVATE KEY-----\n"
        func block(_ pem: String) -> String {
            pem.split(separator: "\n").map { "    " + $0 }.joined(separator: lineEnd) + lineEnd
        }
        let text = [
            "tls_server_config:", "  cert: |", block(certificate) + "  key: |",
            block(key) + "  client_auth_type: \"RequireAnyClientCert\"", "",
        ]
        .joined(separator: lineEnd)
        let tls = try #require(try parse(text).tls)
        #expect(tls.certificate == .text(certificate))
        #expect(tls.key == .text(key))
        #expect(tls.clientAuth == .requireAnyClientCert)
    }

    @Test func aUserGivenTwiceIsRefusedAsYAMLv2StrictRefusesIt() {
        let said = reason(
            "basic_auth_users:\n  alice: $2y$10$qRTBuFoULoYNA7AQ/F3ck.trZBPyjV64.oA4ZsSBCIWvXuvQlQTuu\n  alice: x\n")
        #expect(
            said.hasPrefix("not YAML: line 3, column 3: the key \"alice\" is given twice") && said.contains("yaml.v2"),
            "\(said)")
    }

    @Test func aFileThatCannotBeReadIsAnErrorNamingIt() throws {
        #expect(throws: WebConfigurationError.self) { try WebConfiguration.read("/nonexistent/web.yml") }
        #expect(throws: WebConfigurationError.self) { try WebConfiguration.read("/tmp") }
        let directory = try TemporaryDirectory("netreach-web")
        defer { directory.remove() }
        let binary = directory.url.appendingPathComponent("web.yml")
        try Data([0xff, 0xfe, 0x00]).write(to: binary)
        do {
            _ = try WebConfiguration.read(binary.path)
            Issue.record("bytes that are not UTF-8 were read")
        } catch {
            #expect(error.description.hasPrefix(binary.path) && error.description.contains("UTF-8"), "\(error)")
        }
    }
}

/// `Authorization: Basic` checked against bcrypt hashes as exporter-toolkit checks them.
@Suite("basic authentication")
struct BasicAuthenticationTests {
    /// exporter-toolkit's own test user: `alice` / `alice123`, hashed `$2y$` (PHP's and htpasswd's
    /// name, which the bcrypt in C does not know by itself).
    static let alice = "$2y$12$1DpfPeqF9HzHJt.EWswy1exHluGfbhnn3yXhR7Xes6m3WJqFg0Wby"

    private static func header(_ user: String, _ password: String) -> String {
        "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
    }

    @Test func credentialsAreParsedAsRFC7617Says() {
        #expect(BasicAuthentication.credentials("Basic YWxpY2U6YWxpY2UxMjM=")! == ("alice", "alice123"))
        #expect(BasicAuthentication.credentials("basic YWxpY2U6YWxpY2UxMjM=")! == ("alice", "alice123"))
        // A password may hold colons; only the first separates.
        #expect(BasicAuthentication.credentials(Self.header("a", "b:c"))! == ("a", "b:c"))
        #expect(BasicAuthentication.credentials(Self.header("", ""))! == ("", ""))
        for bad in [
            "Bearer YWxpY2U6YWxpY2UxMjM=", "Basic", "Basic !!!", "Basic " + Data("nocolon".utf8).base64EncodedString(),
            "Basic " + Data([0x61, 0x3a, 0xff]).base64EncodedString(), Self.header("a", "b\0c"),
        ] {
            #expect(BasicAuthentication.credentials(bad) == nil, "\(bad)")
        }
    }

    @Test(.enabled(if: ExternalServer.available("htpasswd")))
    func aHashFromHtpasswdAndOneFromExporterToolkitBothCheck() async throws {
        var users = ["alice": Self.alice]
        let htpasswd = try ExternalServer.require("htpasswd")
        let made = try await ChildProcess.run(htpasswd, ["-nbB", "-C", "5", "prom", "s3cret"])
        let line = String(decoding: made.output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        let hash = String(try #require(line.split(separator: ":", maxSplits: 1).last))
        #expect(hash.hasPrefix("$2y$05$"), "htpasswd wrote \(line)")
        users["prom"] = hash
        users["carol"] = Bcrypt.hash("carol!", cost: 4) // $2b$, OpenBSD's name
        let check = BasicAuthentication(users: users)
        #expect(await check.verdict(authorization: Self.header("alice", "alice123")) == .allowed)
        #expect(await check.verdict(authorization: Self.header("prom", "s3cret")) == .allowed)
        #expect(await check.verdict(authorization: Self.header("carol", "carol!")) == .allowed)
        #expect(await check.verdict(authorization: Self.header("alice", "alice1234")) == .denied)
        #expect(await check.verdict(authorization: Self.header("prom", "s3cret ")) == .denied)
        #expect(await check.verdict(authorization: nil) == .denied)
        // Remembered answers stay right: the same wrong password is wrong again, the right one right.
        #expect(await check.verdict(authorization: Self.header("alice", "alice1234")) == .denied)
        #expect(await check.verdict(authorization: Self.header("alice", "alice123")) == .allowed)
    }

    /// exporter-toolkit's TestBasicAuthWithFakepassword and its cache-key collision case: the
    /// decoy hash a name not known is checked against never lets anyone in, however the name and
    /// password are cut.
    @Test func theDecoyHashAndTheRememberedAnswersCannotBeUsedToGetIn() async throws {
        let check = BasicAuthentication(users: ["alice": Bcrypt.hash("alice123", cost: 4)])
        #expect(await check.verdict(authorization: Self.header("fakeuser", "fakepassword")) == .denied)
        #expect(await check.verdict(authorization: Self.header("fakeuser", "")) == .denied)
        let aliceHash = try #require(check.knownHash("alice"))
        #expect(await check.verdict(authorization: Self.header("alice" + aliceHash, "alice123")) == .denied)
        #expect(await check.verdict(authorization: Self.header("alice", aliceHash + "alice123")) == .denied)
        #expect(await check.verdict(authorization: Self.header("alice", "alice123")) == .allowed)
    }

    @Test func withoutUsersEveryRequestIsAllowed() async {
        let check = BasicAuthentication(users: [:])
        #expect(!check.isEnabled)
        #expect(await check.verdict(authorization: nil) == .allowed)
    }

    @Test func bcryptThatCannotStartInTimeIsBusyNotAllowed() async throws {
        // The pool's one thread is held until the test lets it go.
        let pool = BlockingWork.Pool(named: "test-bcrypt", width: 1)
        let held = Atomic(false)
        let release = DispatchSemaphore(value: 0)
        let blocker = Task {
            await pool.run(until: .now + .seconds(60)) {
                held.store(true, ordering: .releasing)
                release.wait()
            }
        }
        for _ in 0..<1_000 where !held.load(ordering: .acquiring) { try await Task.sleep(for: .milliseconds(10)) }
        let isHeld = held.load(ordering: .acquiring)
        try #require(isHeld)
        let users = ["a": Bcrypt.hash("x", cost: 4)]
        let waiting = BasicAuthentication(users: users, bcrypt: pool, timeout: .milliseconds(200))
        #expect(await waiting.verdict(authorization: Self.header("a", "x")) == .busy)
        release.signal()
        _ = await blocker.value
        #expect(await waiting.verdict(authorization: Self.header("a", "x")) == .allowed)
    }

    /// A hash too costly to check within the request's wait (exporter-toolkit's own tests have a
    /// cost of 18: seconds a check): that request is busy, and the check goes on and is
    /// remembered, so a later request is answered at once. (Each try may find the one thread
    /// taken by the previous; some try starts it within its wait, and that check finishes.) The
    /// hash is exporter-toolkit's cost-12 one, made beforehand: making one here would hold a
    /// thread of the concurrency pool that other suites need.
    @Test func aCheckThatOutlastsTheWaitIsRememberedForTheNext() async throws {
        let check = BasicAuthentication(users: ["alice": Self.alice], timeout: .milliseconds(20))
        var verdicts: [BasicAuthentication.Verdict] = []
        let deadline = ContinuousClock.now + .seconds(120)
        while verdicts.last != .allowed, ContinuousClock.now < deadline {
            verdicts.append(await check.verdict(authorization: Self.header("alice", "alice123")))
            if verdicts.last == .busy { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(verdicts.first == .busy, "\(verdicts)")
        #expect(verdicts.last == .allowed, "\(verdicts.count) tries: \(verdicts.suffix(3))")
    }

    @Test(arguments: [
        (
            "$2y$10$qRTBuFoULoYNA7AQ/F3ck.trZBPyjV64.oA4ZsSBCIWvXuvQlQTuu",
            "$2b$10$qRTBuFoULoYNA7AQ/F3ck.trZBPyjV64.oA4ZsSBCIWvXuvQlQTuu"
        ),
        (
            "$2a$10$qRTBuFoULoYNA7AQ/F3ck.trZBPyjV64.oA4ZsSBCIWvXuvQlQTuu",
            "$2a$10$qRTBuFoULoYNA7AQ/F3ck.trZBPyjV64.oA4ZsSBCIWvXuvQlQTuu"
        ),
    ])
    func twoYIsTwoB(_ hash: String, _ normalized: String) {
        #expect(BcryptHash.problem(hash) == nil)
        #expect(BcryptHash.normalized(hash) == normalized)
        #expect(BcryptHash.cost(hash) == 10)
    }
}
