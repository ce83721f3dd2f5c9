import Foundation
import NetReachTestSupport
import Testing

/// `netreach get` against nginx serving what curl on Debian refuses (issue 47), beside curl in the
/// same test: the same exit status, a sentence naming the reason on standard error, and the options
/// that lower each floor (`--tlsv1.0`, `--allow-weak-certificates`) doing what curl's
/// `--tlsv1.0 --ciphers DEFAULT@SECLEVEL=0` does.
@Suite(
    "netreach get: TLS floor and certificate strength beside curl (integration)", .offPool, .serialized,
    .enabled(if: ExternalServer.available("nginx", "openssl", "curl")), .timeLimit(.minutes(3)))
struct GetTLSFloorTests {
    @Test("Refused as curl refuses them, with curl's exit status and the reason in a sentence")
    func refusedAsCurlRefuses() async throws {
        let curl = try ExternalServer.require("curl")
        let netreach = try netreachPath()
        try await withLegacyNginx { nginx, certificates in
            let ca = certificates.path("ca.pem")
            let cases: [(port: Int, exit: Int32, says: String)] = [
                (
                    nginx.tlsv1, 35,
                    "TLS handshake with 127.0.0.1 failed: the server speaks TLS 1.0; at least TLS 1.2 is required"
                ),
                (nginx.rsa1024, 60, "the server's RSA key has 1024 bits; at least 2048 are required"),
                (nginx.sha1, 60, "the server's certificate is signed with SHA-1, which is too weak"),
                (
                    nginx.weakIntermediate, 60,
                    "the 'NetReach Weak CA' CA certificate is signed with SHA-1, which is too weak"
                ),
            ]
            for (port, exit, says) in cases {
                let url = "https://127.0.0.1:\(port)/get-\(port)"
                let theirs = try await ChildProcess.run(curl, ["-sS", "-o", "/dev/null", "--cacert", ca, url])
                let ours = try await ChildProcess.run(netreach, ["get", "--retries", "0", "--cacert", ca, url])
                #expect(theirs.status == exit, "curl on \(port): \(theirs.status) \(theirs.standardError)")
                #expect(ours.status == exit, "get on \(port): \(ours.status) \(ours.standardError)")
                #expect(ours.standardError.contains(says), "get on \(port): \(ours.standardError)")
                #expect(ours.standardOutput.isEmpty)
            }
            #expect(nginx.accessLog().allSatisfy { !$0.contains("/get-") }, "\(nginx.accessLog())")
        }
    }

    @Test(
        "--tlsv1.0 and --allow-weak-certificates make each work, as curl --tlsv1.0 --ciphers DEFAULT@SECLEVEL=0; each warns"
    )
    func loweringOptions() async throws {
        let curl = try ExternalServer.require("curl")
        let netreach = try netreachPath()
        try await withLegacyNginx { nginx, certificates in
            let ca = certificates.path("ca.pem")
            for port in [nginx.tlsv1, nginx.rsa1024, nginx.sha1, nginx.weakIntermediate, nginx.tlsv13] {
                let url = "https://127.0.0.1:\(port)/lowered"
                let theirs = try await ChildProcess.run(
                    curl, ["-sS", "--tlsv1.0", "--ciphers", "DEFAULT@SECLEVEL=0", "--cacert", ca, url])
                let ours = try await ChildProcess.run(
                    netreach, ["get", "--tlsv1.0", "--allow-weak-certificates", "--cacert", ca, url])
                #expect(
                    theirs.status == 0 && theirs.standardOutput == "ok\n", "curl on \(port): \(theirs.standardError)")
                #expect(ours.status == 0 && ours.standardOutput == "ok\n", "get on \(port): \(ours.standardError)")
                #expect(ours.standardError.contains("warning: --tlsv1.0"), "\(ours.standardError)")
                #expect(ours.standardError.contains("warning: --allow-weak-certificates"), "\(ours.standardError)")
            }
            // TLS 1.3 only needs nothing, and --tlsv1.3 works on it.
            let url = "https://127.0.0.1:\(nginx.tlsv13)/tls13"
            for options in [[], ["--tlsv1.3"]] {
                let ours = try await ChildProcess.run(netreach, ["get"] + options + ["--cacert", ca, url])
                #expect(
                    ours.status == 0 && !ours.standardError.contains("warning"), "\(options): \(ours.standardError)")
            }
        }
    }

    @Test("-k accepts weak certificates but not TLS 1.0, as curl -k")
    func insecure() async throws {
        let curl = try ExternalServer.require("curl")
        let netreach = try netreachPath()
        try await withLegacyNginx { nginx, _ in
            let cases: [(port: Int, exit: Int32)] = [
                (nginx.rsa1024, 0), (nginx.sha1, 0), (nginx.weakIntermediate, 0), (nginx.tlsv1, 35),
            ]
            for (port, exit) in cases {
                let url = "https://127.0.0.1:\(port)/insecure"
                let theirs = try await ChildProcess.run(curl, ["-sS", "-o", "/dev/null", "-k", url])
                let ours = try await ChildProcess.run(netreach, ["get", "--retries", "0", "-k", url])
                #expect(theirs.status == exit, "curl on \(port): \(theirs.standardError)")
                #expect(ours.status == exit, "get on \(port): \(ours.standardError)")
            }
        }
    }

    @Test("Two TLS versions at once are refused before anything is sent")
    func oneVersionAtMost() async throws {
        let ours = try await ChildProcess.run(
            try netreachPath(), ["get", "--tlsv1.0", "--tlsv1.3", "https://127.0.0.1:1/never"])
        #expect(ours.status == 64, "\(ours.standardError)")
    }
}
