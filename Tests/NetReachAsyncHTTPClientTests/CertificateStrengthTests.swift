import Foundation
import NetReachHTTP
import NetReachTestSupport
import Testing

@testable import NetReachAsyncHTTPClient

/// ``CertificateStrength``, the one judge of "strong enough", on certificates made by `openssl` for
/// the test: each case is the certificates a server would present, leaf first, and the verdict.
@Suite("Certificate strength", .offPool, .enabled(if: ExternalServer.available("openssl")), .timeLimit(.minutes(2)))
struct CertificateStrengthTests {
    @Test("Keys below 2048 bits (224 for EC) and SHA-1 or MD5 signatures below the anchor are too weak")
    func table() async throws {
        let certificates = try await TestCertificates.make(weak: true)
        defer { certificates.remove() }
        let shaTooWeak = "which is too weak; a SHA-2 digest is required"
        let cases: [(presented: [String], reason: TLSFailureReason?)] = [
            (["server.pem"], nil),
            (["server.pem", "ca.pem"], nil),
            (["rsa2048.pem"], nil),
            (["rsa1024.pem"], .keyTooWeak("the server's RSA key has 1024 bits; at least 2048 are required")),
            (["dsa1024.pem"], .keyTooWeak("the server's DSA key has 1024 bits; at least 2048 are required")),
            (["p192.pem"], .keyTooWeak("the server's EC key (prime192v1) has 192 bits; at least 224 are required")),
            (["sha1.pem"], .digestTooWeak("the server's certificate is signed with SHA-1, \(shaTooWeak)")),
            (["md5.pem", "rsa-ca.pem"], .digestTooWeak("the server's certificate is signed with MD5, \(shaTooWeak)")),
            (
                ["via-weak-ca.pem", "weak-ca.pem"],
                .digestTooWeak("the 'NetReach Weak CA' CA certificate is signed with SHA-1, \(shaTooWeak)")
            ),
            // With the root sent along too: the root's own signature is not looked at, the rest is.
            (
                ["via-weak-ca.pem", "weak-ca.pem", "ca.pem"],
                .digestTooWeak("the 'NetReach Weak CA' CA certificate is signed with SHA-1, \(shaTooWeak)")
            ),
            (["via-strong-ca.pem", "strong-ca.pem", "ca.pem"], nil),
            // A weak certificate sent off the path is not on it, so not judged (as OpenSSL).
            (["via-strong-ca.pem", "strong-ca.pem", "sha1.pem"], nil),
            // Self-signed: a trust anchor of its own, whose signature nobody relies on.
            (["self-sha1.pem"], nil),
        ]
        for (presented, reason) in cases {
            let facts = try presented.map { try CertificateFacts(derEncoded: certificates.der($0)) }
            #expect(CertificateStrength.weakness(ofChain: facts) == reason, "\(presented)")
            #expect(reason?.isCertificateRejection ?? true, "curl exits 60 for these")
        }
    }

    @Test("The path runs from the leaf by issuer names and ends at a self-issued certificate")
    func path() {
        func certificate(_ subject: String, _ issuer: String, bits: Int = 2048) -> CertificateFacts {
            CertificateFacts(
                subject: Array(subject.utf8), issuer: Array(issuer.utf8), commonName: subject, key: .rsa(bits: bits),
                weakDigest: nil)
        }
        let leaf = certificate("leaf", "inter")
        let inter = certificate("inter", "root")
        let root = certificate("root", "root")
        let stranger = certificate("stranger", "root", bits: 512)
        // Out of order, with a stranger: the path is leaf, inter, root.
        #expect(CertificateStrength.path(from: [leaf, stranger, root, inter]) == [leaf, inter, root])
        #expect(CertificateStrength.weakness(ofChain: [leaf, stranger, root, inter]) == nil)
        // An issuer not sent (in the trust store) ends the path.
        #expect(CertificateStrength.path(from: [leaf, root]) == [leaf])
        #expect(CertificateStrength.path(from: []) == [])
        // A loop of names ends too.
        let a = certificate("a", "b")
        let b = certificate("b", "a")
        #expect(CertificateStrength.path(from: [a, b]) == [a, b])
        #expect(
            CertificateStrength.weakness(ofChain: [
                certificate("leaf", "weak"), certificate("weak", "root", bits: 1024),
            ])
                == .keyTooWeak("the 'weak' CA certificate's RSA key has 1024 bits; at least 2048 are required"))
    }

    @Test("What is not a certificate is refused, not guessed at")
    func garbage() {
        #expect(throws: (any Error).self) { try CertificateFacts(derEncoded: []) }
        #expect(throws: (any Error).self) { try CertificateFacts(derEncoded: [0x30, 0x03, 0x02, 0x01, 0x01]) }
    }

}
