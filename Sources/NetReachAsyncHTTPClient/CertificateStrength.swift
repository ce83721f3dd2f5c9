import NetReachHTTP
import SwiftASN1

/// Whether a server's certificates are strong enough: the one place that decides it, on facts read
/// from their DER (NIOSSL does not expose key sizes or signature algorithms).
///
/// The floor is that of OpenSSL's security level 2, which curl on Debian 12 runs at:
///
/// - every key on the path, the leaf's and each CA's the server sent: RSA and DSA at least 2048
///   bits, elliptic curves at least 224 (Ed25519 and Ed448 pass; kinds not known here pass, since
///   BoringSSL verifies none of them);
/// - every signature on the path below its trust anchor: no MD2, MD4, MD5 or SHA-1 (RSASSA-PSS
///   without a hash named means SHA-1). A self-issued certificate's own signature is not looked at:
///   it is a trust anchor, whose signature nobody relies on (as OpenSSL).
///
/// The path is built from the certificates the server presented, leaf first: each one's issuer is
/// the presented certificate whose subject is that issuer's name; it ends at a self-issued one or
/// where the issuer was not presented (the trust anchor is then in the trust store, and its own
/// key is not seen here). Certificates presented off the path are not judged, as OpenSSL does not.
///
/// ```swift
/// let leaf = try CertificateFacts(derEncoded: der)
/// if let reason = CertificateStrength.weakness(ofChain: [leaf]) {
///     print(reason)   // the server's RSA key has 1024 bits; at least 2048 are required
/// }
/// ```
enum CertificateStrength {
    /// The fewest bits an RSA or DSA key may have.
    static let minimumRSABits = 2048
    /// The fewest bits an elliptic-curve key may have (its curve's size).
    static let minimumECBits = 224

    /// Why the path from `presented[0]` (the leaf) is too weak, or `nil` when it is strong enough.
    static func weakness(ofChain presented: [CertificateFacts]) -> TLSFailureReason? {
        for (index, certificate) in path(from: presented).enumerated() {
            if let reason = weakness(of: certificate, isLeaf: index == 0) { return reason }
        }
        return nil
    }

    /// The certificates on the path from the leaf, as described above.
    static func path(from presented: [CertificateFacts]) -> [CertificateFacts] {
        guard var current = presented.first else { return [] }
        var path = [current]
        var remaining = Array(presented.dropFirst())
        while !current.isSelfIssued, let next = remaining.firstIndex(where: { $0.subject == current.issuer }) {
            current = remaining.remove(at: next)
            path.append(current)
        }
        return path
    }

    /// Why this one certificate is too weak (its key; its signature unless self-issued), or `nil`.
    static func weakness(of certificate: CertificateFacts, isLeaf: Bool) -> TLSFailureReason? {
        let whose = isLeaf ? "the server's" : "the \(certificate.displayName) CA certificate's"
        switch certificate.key {
        case .rsa(let bits) where bits < minimumRSABits, .dsa(let bits) where bits < minimumRSABits:
            return .keyTooWeak(
                "\(whose) \(certificate.key.algorithm) key has \(bits) bits; at least \(minimumRSABits) are required")
        case .ellipticCurve(let curve, let bits) where bits < minimumECBits:
            return .keyTooWeak(
                "\(whose) EC key (\(curve)) has \(bits) bits; at least \(minimumECBits) are required")
        default:
            break
        }
        if !certificate.isSelfIssued, let digest = certificate.weakDigest {
            let which = isLeaf ? "the server's certificate" : "the \(certificate.displayName) CA certificate"
            return .digestTooWeak("\(which) is signed with \(digest), which is too weak; a SHA-2 digest is required")
        }
        return nil
    }
}

/// What ``CertificateStrength`` needs of a certificate, read from its DER: the names that link it
/// into a path, its key, and the digest of its signature if that is a weak one.
///
/// ```swift
/// let facts = try CertificateFacts(derEncoded: certificate.toDERBytes())
/// facts.key          // .rsa(bits: 2048)
/// facts.weakDigest   // "SHA-1", or nil
/// ```
struct CertificateFacts: Sendable, Hashable {
    /// The subject and issuer names, as DER: a path links an issuer to the subject with the same bytes.
    let subject: [UInt8]
    let issuer: [UInt8]
    /// The subject's common name, if it has one.
    let commonName: String?
    let key: PublicKey
    /// `MD5`, `SHA-1`, ... when the certificate is signed with a digest too weak; `nil` otherwise.
    let weakDigest: String?

    /// A public key's kind and size.
    enum PublicKey: Sendable, Hashable {
        case rsa(bits: Int)
        case dsa(bits: Int)
        /// A named curve and its size in bits.
        case ellipticCurve(curve: String, bits: Int)
        /// Ed25519, Ed448, a curve not named, a DSA key without its parameters, or an algorithm
        /// not known here (its object identifier).
        case other(String)

        var algorithm: String {
            switch self {
            case .rsa: "RSA"
            case .dsa: "DSA"
            case .ellipticCurve: "EC"
            case .other(let name): name
            }
        }
    }

    /// `true` when subject and issuer are the same name: a root (or a certificate trusted as one).
    var isSelfIssued: Bool { subject == issuer }

    /// `'NetReach Test CA'`, or `(no common name)`.
    var displayName: String { commonName.map { "'\($0)'" } ?? "(no common name)" }

    init(subject: [UInt8], issuer: [UInt8], commonName: String?, key: PublicKey, weakDigest: String?) {
        (self.subject, self.issuer, self.commonName, self.key, self.weakDigest) =
            (subject, issuer, commonName, key, weakDigest)
    }

    /// Reads a DER certificate (RFC 5280, section 4.1).
    init(derEncoded der: [UInt8]) throws {
        let certificate = try Self.children(of: DER.parse(der))
        guard certificate.count == 3 else { throw ASN1Error.invalidASN1Object(reason: "not a certificate") }
        var fields = try Self.children(of: certificate[0])[...]
        // version [0] EXPLICIT, absent for v1.
        if fields.first?.identifier == ASN1Identifier(tagWithNumber: 0, tagClass: .contextSpecific) {
            fields = fields.dropFirst()
        }
        // serialNumber, signature, issuer, validity, subject, subjectPublicKeyInfo, ...
        guard fields.count >= 6 else { throw ASN1Error.invalidASN1Object(reason: "a short TBSCertificate") }
        let tbs = Array(fields)
        issuer = Array(tbs[2].encodedBytes)
        subject = Array(tbs[4].encodedBytes)
        commonName = Self.commonName(in: tbs[4])
        key = try Self.publicKey(tbs[5])
        weakDigest = try Self.weakDigest(signatureAlgorithm: certificate[1])
    }

    // MARK: Parsing

    private static func children(of node: ASN1Node) throws -> [ASN1Node] {
        guard case .constructed(let nodes) = node.content else {
            throw ASN1Error.unexpectedFieldType(node.identifier)
        }
        return Array(nodes)
    }

    private static func oid(_ node: ASN1Node) throws -> String {
        try ASN1ObjectIdentifier(derEncoded: node).description
    }

    /// An AlgorithmIdentifier's object identifier and its parameters, if any.
    private static func algorithm(_ node: ASN1Node) throws -> (oid: String, parameters: ASN1Node?) {
        let parts = try children(of: node)
        guard let first = parts.first else { throw ASN1Error.invalidASN1Object(reason: "an empty AlgorithmIdentifier") }
        return (try oid(first), parts.count > 1 ? parts[1] : nil)
    }

    /// The bits of an unsigned big-endian INTEGER (leading zero bytes do not count).
    private static func bits(ofInteger node: ASN1Node) throws -> Int {
        guard node.identifier == .integer, case .primitive(let bytes) = node.content else {
            throw ASN1Error.unexpectedFieldType(node.identifier)
        }
        guard let first = bytes.firstIndex(where: { $0 != 0 }) else { return 0 }
        return (bytes.endIndex - first - 1) * 8 + (8 - bytes[first].leadingZeroBitCount)
    }

    private static func publicKey(_ spki: ASN1Node) throws -> PublicKey {
        let parts = try children(of: spki)
        guard parts.count == 2 else { throw ASN1Error.invalidASN1Object(reason: "not a SubjectPublicKeyInfo") }
        let (algorithm, parameters) = try algorithm(parts[0])
        switch algorithm {
        case "1.2.840.113549.1.1.1", "1.2.840.113549.1.1.10": // rsaEncryption, RSASSA-PSS
            let key = try ASN1BitString(derEncoded: parts[1]).bytes
            let modulus = try children(of: DER.parse(key)).first
            guard let modulus else { throw ASN1Error.invalidASN1Object(reason: "an empty RSA key") }
            return .rsa(bits: try bits(ofInteger: modulus))
        case "1.2.840.10040.4.1": // DSA: the size of p in Dss-Parms { p, q, g }
            guard let parameters, parameters.identifier == .sequence, let p = try children(of: parameters).first else {
                return .other("DSA")
            }
            return .dsa(bits: try bits(ofInteger: p))
        case "1.2.840.10045.2.1": // id-ecPublicKey, with a named curve
            guard let parameters, parameters.identifier == .objectIdentifier,
                let curve = Self.curves[try oid(parameters)]
            else { return .other("EC") }
            return .ellipticCurve(curve: curve.name, bits: curve.bits)
        case "1.3.101.112": return .other("Ed25519")
        case "1.3.101.113": return .other("Ed448")
        default: return .other(algorithm)
        }
    }

    /// Named curves by object identifier: their names and sizes.
    private static let curves: [String: (name: String, bits: Int)] = [
        "1.3.132.0.8": ("secp160r1", 160), "1.3.132.0.9": ("secp160k1", 160), "1.3.132.0.30": ("secp160r2", 160),
        "1.2.840.10045.3.1.1": ("prime192v1", 192), "1.3.132.0.31": ("secp192k1", 192),
        "1.3.132.0.33": ("secp224r1", 224), "1.3.132.0.32": ("secp224k1", 224),
        "1.2.840.10045.3.1.7": ("prime256v1", 256), "1.3.132.0.10": ("secp256k1", 256),
        "1.3.132.0.34": ("secp384r1", 384), "1.3.132.0.35": ("secp521r1", 521),
        "1.3.36.3.3.2.8.1.1.1": ("brainpoolP160r1", 160), "1.3.36.3.3.2.8.1.1.3": ("brainpoolP192r1", 192),
        "1.3.36.3.3.2.8.1.1.5": ("brainpoolP224r1", 224), "1.3.36.3.3.2.8.1.1.7": ("brainpoolP256r1", 256),
        "1.3.36.3.3.2.8.1.1.9": ("brainpoolP320r1", 320), "1.3.36.3.3.2.8.1.1.11": ("brainpoolP384r1", 384),
        "1.3.36.3.3.2.8.1.1.13": ("brainpoolP512r1", 512),
    ]

    /// Signature algorithms whose digest is too weak, by object identifier.
    private static let weakSignatures: [String: String] = [
        "1.2.840.113549.1.1.2": "MD2", "1.2.840.113549.1.1.3": "MD4", "1.2.840.113549.1.1.4": "MD5",
        "1.2.840.113549.1.1.5": "SHA-1", "1.3.14.3.2.29": "SHA-1", "1.3.14.3.2.3": "MD5",
        "1.2.840.10045.4.1": "SHA-1", "1.2.840.10040.4.3": "SHA-1", "1.3.14.3.2.27": "SHA-1",
    ]

    /// Digest algorithms too weak, by object identifier (for RSASSA-PSS, which names its digest apart).
    private static let weakDigests: [String: String] = [
        "1.3.14.3.2.26": "SHA-1", "1.2.840.113549.2.5": "MD5", "1.2.840.113549.2.2": "MD2",
    ]

    private static func weakDigest(signatureAlgorithm node: ASN1Node) throws -> String? {
        let (algorithm, parameters) = try algorithm(node)
        if let weak = weakSignatures[algorithm] { return weak }
        guard algorithm == "1.2.840.113549.1.1.10" else { return nil }
        // RSASSA-PSS-params: hashAlgorithm [0] EXPLICIT AlgorithmIdentifier DEFAULT sha1.
        guard let parameters, parameters.identifier == .sequence else { return "SHA-1" }
        let hash = try children(of: parameters).first {
            $0.identifier == ASN1Identifier(tagWithNumber: 0, tagClass: .contextSpecific)
        }
        guard let hash, let identifier = try children(of: hash).first else { return "SHA-1" }
        return weakDigests[try Self.algorithm(identifier).oid]
    }

    /// The first common name (2.5.4.3) of a Name, if any.
    private static func commonName(in name: ASN1Node) -> String? {
        guard let sets = try? children(of: name) else { return nil }
        for set in sets {
            for attribute in (try? children(of: set)) ?? [] {
                guard let parts = try? children(of: attribute), parts.count == 2,
                    (try? oid(parts[0])) == "2.5.4.3", case .primitive(let value) = parts[1].content
                else { continue }
                return String(decoding: value, as: UTF8.self)
            }
        }
        return nil
    }
}
