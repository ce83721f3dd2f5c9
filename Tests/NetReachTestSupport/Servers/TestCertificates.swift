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
/// With `weak: true`, also what a client should refuse by default (issue 47), and its strong twins;
/// all for `localhost`, `127.0.0.1` and `::1`, issued by the test CA unless said otherwise:
///
/// | File | What |
/// |---|---|
/// | `rsa1024.pem` / `.key`, `rsa2048.pem` / `.key` | RSA keys of 1024 and 2048 bits |
/// | `p192.pem` / `.key` | an EC key on P-192 |
/// | `dsa1024.pem` / `.key` | a DSA key of 1024 bits |
/// | `sha1.pem` / `.key` | signed with ECDSA and SHA-1 |
/// | `md5.pem` | signed with RSA and MD5, by `rsa-ca.pem` (ECDSA has no MD5 form) |
/// | `weak-ca.pem`, `via-weak-ca.pem` / `.key` | an intermediate CA signed with SHA-1, and a leaf it issued (SHA-256) |
/// | `via-weak-ca-chain.pem` | `via-weak-ca.pem` then `weak-ca.pem`, as a server sends them |
/// | `strong-ca.pem`, `via-strong-ca.pem` / `.key` | an intermediate CA signed with SHA-256, and a leaf it issued |
/// | `self-sha1.pem` / `.key` | self-signed with SHA-1: a trust anchor of its own |
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

    /// The DER of the first certificate in the PEM file `name`.
    package func der(_ name: String) throws -> [UInt8] {
        let pem = try String(contentsOfFile: path(name), encoding: .utf8)
        let body = pem.components(separatedBy: "-----BEGIN CERTIFICATE-----").dropFirst().first?
            .components(separatedBy: "-----END CERTIFICATE-----").first
        guard let body, let der = Data(base64Encoded: body, options: .ignoreUnknownCharacters) else {
            throw ExternalServerError.commandFailed("\(name) holds no PEM certificate")
        }
        return Array(der)
    }

    /// Makes the files, on a Dispatch thread (running `openssl` blocks); `weak`: the weak ones too.
    package static func make(weak: Bool = false) async throws -> TestCertificates {
        try await offPool { try makeNow(weak: weak) }
    }

    private static func makeNow(weak: Bool) throws -> TestCertificates {
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

        func issue(
            _ name: String, subject: String, extensions: [String], dates: [String] = ["-days", "1"],
            key: [String] = ec, issuer: String = "ca", digest: String = "sha256"
        ) throws {
            try run(
                ["req"] + key + ["-keyout", "\(name).key", "-out", "\(name).csr", "-subj", subject]
                    + extensions.flatMap { ["-addext", $0] })
            try run(
                [
                    "ca", "-batch", "-notext", "-config", "ca.cnf", "-cert", "\(issuer).pem", "-keyfile",
                    "\(issuer).key", "-md", digest, "-in", "\(name).csr", "-out", "\(name).pem",
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
        if weak {
            let server = [serverName, "extendedKeyUsage=serverAuth"]
            let ca = ["basicConstraints=critical,CA:TRUE", "keyUsage=critical,keyCertSign,cRLSign"]
            try issue("rsa1024", subject: "/CN=localhost", extensions: server, key: ["-newkey", "rsa:1024", "-nodes"])
            try issue("rsa2048", subject: "/CN=localhost", extensions: server, key: ["-newkey", "rsa:2048", "-nodes"])
            try issue(
                "p192", subject: "/CN=localhost", extensions: server,
                key: ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime192v1", "-nodes"])
            try run(["dsaparam", "-out", "dsa.param", "1024"])
            try issue(
                "dsa1024", subject: "/CN=localhost", extensions: server, key: ["-newkey", "dsa:dsa.param", "-nodes"])
            try issue("sha1", subject: "/CN=localhost", extensions: server, digest: "sha1")
            try issue("weak-ca", subject: "/CN=NetReach Weak CA", extensions: ca, digest: "sha1")
            try issue("via-weak-ca", subject: "/CN=localhost", extensions: server, issuer: "weak-ca")
            try issue("strong-ca", subject: "/CN=NetReach Strong CA", extensions: ca)
            try issue("via-strong-ca", subject: "/CN=localhost", extensions: server, issuer: "strong-ca")
            // MD5 needs an RSA issuer: ECDSA has no MD5 form.
            try run(
                ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "rsa-ca.key", "-out", "rsa-ca.pem"]
                    + ["-days", "2", "-subj", "/CN=NetReach RSA CA"] + ca.flatMap { ["-addext", $0] })
            try issue("md5", subject: "/CN=localhost", extensions: server, issuer: "rsa-ca", digest: "md5")
            try run(
                ["req", "-x509"] + ec + ["-keyout", "self-sha1.key", "-out", "self-sha1.pem", "-days", "1", "-sha1"]
                    + ["-subj", "/CN=localhost"] + server.flatMap { ["-addext", $0] })
            let chain =
                try String(contentsOfFile: directory.path("via-weak-ca.pem"), encoding: .utf8)
                + String(contentsOfFile: directory.path("weak-ca.pem"), encoding: .utf8)
            try chain.write(toFile: directory.path("via-weak-ca-chain.pem"), atomically: true, encoding: .utf8)
        }

        try FileManager.default.createDirectory(atPath: directory.path("capath"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: directory.path("ca.pem"), toPath: directory.path("capath/ca.pem"))
        try run(["rehash", "capath"])
        return TestCertificates(directory: directory)
    }
}
