import Foundation

/// A throwaway certificate authority and the certificates the TLS tests need, made with the
/// `openssl` command in a temporary directory (EC P-256 keys: quick to make).
///
/// | File | What |
/// |---|---|
/// | `ca.pem` | the test CA (trust it to trust the rest) |
/// | `capath/` | `ca.pem` under its subject hash, as `openssl rehash` names it |
/// | `server.pem` / `server.key` | for `localhost`, `127.0.0.1` and `::1`, valid now |
/// | `other.pem` / `other.key` | for `other.invalid` only |
/// | `expired.pem` / `expired.key` | for `localhost` and `127.0.0.1`, valid only in January 2020 |
/// | `future.pem` / `future.key` | for `localhost` and `127.0.0.1`, valid only from 2099 |
/// | `ip-only.pem` / `ip-only.key` | for the address `127.0.0.1` only (no DNS name) |
/// | `name-only.pem` / `name-only.key` | for the name `localhost` only (no IP address) |
/// | `client.pem` / `client.key` | a client certificate (`CN=netreach-client`) |
///
/// ```swift
/// let certificates = try await TestCertificates.make()
/// defer { certificates.remove() }
/// settings.tls.trustRoots = .file(certificates.path("ca.pem"))
/// ```
package struct TestCertificates {
    package let directory: TemporaryDirectory

    package func path(_ name: String) -> String { directory.path(name) }

    package func remove() { directory.remove() }

    /// Makes the files, on a Dispatch thread (running `openssl` blocks).
    package static func make() async throws -> TestCertificates {
        try await offPool { try makeNow() }
    }

    private static func makeNow() throws -> TestCertificates {
        let openssl = try ExternalServer.require("openssl")
        let directory = try TemporaryDirectory("netreach-certs")
        let run = { (arguments: [String]) throws in try runCommand(openssl, arguments, in: directory.url) }
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        try run(
            ["req", "-x509"] + ec + [
                "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=NetReach Test CA",
                "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            ])
        try """
        [ ca ]
        default_ca = test_ca
        [ test_ca ]
        database = index.txt
        new_certs_dir = issued
        serial = serial
        default_md = sha256
        policy = any
        unique_subject = no
        copy_extensions = copy
        [ any ]
        commonName = supplied
        """.write(toFile: directory.path("ca.cnf"), atomically: true, encoding: .utf8)
        try "".write(toFile: directory.path("index.txt"), atomically: true, encoding: .utf8)
        try "01\n".write(toFile: directory.path("serial"), atomically: true, encoding: .utf8)
        try FileManager.default.createDirectory(atPath: directory.path("issued"), withIntermediateDirectories: true)

        func issue(_ name: String, subject: String, extensions: [String], dates: [String] = ["-days", "1"]) throws {
            try run(
                ["req"] + ec + ["-keyout", "\(name).key", "-out", "\(name).csr", "-subj", subject]
                    + extensions.flatMap { ["-addext", $0] })
            try run(
                [
                    "ca", "-batch", "-notext", "-config", "ca.cnf", "-cert", "ca.pem", "-keyfile", "ca.key",
                    "-in", "\(name).csr", "-out", "\(name).pem",
                ] + dates)
        }
        let serverName = "subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1"
        try issue("server", subject: "/CN=localhost", extensions: [serverName, "extendedKeyUsage=serverAuth"])
        try issue(
            "other", subject: "/CN=other.invalid",
            extensions: ["subjectAltName=DNS:other.invalid", "extendedKeyUsage=serverAuth"])
        try issue(
            "expired", subject: "/CN=localhost", extensions: [serverName, "extendedKeyUsage=serverAuth"],
            dates: ["-startdate", "20200101000000Z", "-enddate", "20200102000000Z"])
        try issue(
            "future", subject: "/CN=localhost", extensions: [serverName, "extendedKeyUsage=serverAuth"],
            dates: ["-startdate", "20990101000000Z", "-enddate", "20990102000000Z"])
        try issue(
            "ip-only", subject: "/CN=127.0.0.1",
            extensions: ["subjectAltName=IP:127.0.0.1", "extendedKeyUsage=serverAuth"])
        try issue(
            "name-only", subject: "/CN=localhost",
            extensions: ["subjectAltName=DNS:localhost", "extendedKeyUsage=serverAuth"])
        try issue("client", subject: "/CN=netreach-client", extensions: ["extendedKeyUsage=clientAuth"])

        try FileManager.default.createDirectory(atPath: directory.path("capath"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: directory.path("ca.pem"), toPath: directory.path("capath/ca.pem"))
        try run(["rehash", "capath"])
        return TestCertificates(directory: directory)
    }
}
