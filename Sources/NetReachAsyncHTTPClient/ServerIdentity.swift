import AsyncHTTPClient
import NIOCore
import NIOSSL
import NetReachHTTP

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The host a URL names, and whether a server's certificate is issued for it: the check curl
/// makes, against the URL's host and nothing else.
///
/// NIOSSL's own check also accepts a certificate whose IP entry is the address the socket happens
/// to be connected to, even when the URL names a host: whoever can point a name at an address
/// they hold a certificate for (public CAs issue IP certificates) would pass it. So clients made
/// from settings verify the chain with NIOSSL and the name here (RFC 6125, as curl):
///
/// - a host name matches the certificate's DNS entries only, case-insensitively and without a
///   trailing dot; `*` stands for exactly one whole left-most label, and only with two labels or
///   more after it (`*.example.com`, never `*.com` or `f*.example.com`);
/// - an IP address (`127.0.0.1`, `::1`) matches the certificate's IP entries only, byte for byte;
/// - a certificate with no subjectAltName names nothing (no fallback to the subject's common
///   name, as browsers and Go since 2020).
///
/// ```swift
/// let identity = ServerIdentity(host: "localhost")
/// let accepted = identity.isNamed(by: certificate)   // false for a certificate for IP:127.0.0.1 only
/// ```
struct ServerIdentity: Sendable, Hashable {
    /// The host as the URL gives it, without brackets (`::1`) and without a zone.
    let host: String
    private let expected: Expected

    private enum Expected: Sendable, Hashable {
        /// Lower case, no trailing dot.
        case name(String)
        /// The address's 4 or 16 bytes.
        case address([UInt8])
    }

    init(host: String) {
        self.host = host
        if let bytes = Self.addressBytes(host) {
            expected = .address(bytes)
        } else {
            var name = host.lowercased()
            if name.hasSuffix(".") { name.removeLast() }
            expected = .name(name)
        }
    }

    /// Whether `certificate` is issued for this host.
    func isNamed(by certificate: NIOSSLCertificate) -> Bool {
        for entry in certificate._subjectAlternativeNames() {
            switch (entry.nameType, expected) {
            case (.dnsName, .name(let name)):
                if Self.matches(pattern: String(decoding: entry.contents, as: UTF8.self), name: name) { return true }
            case (.ipAddress, .address(let bytes)):
                if Array(entry.contents) == bytes { return true }
            default:
                continue
            }
        }
        return false
    }

    /// `pattern` (a certificate's DNS entry) against `name` (lower case, no trailing dot).
    static func matches(pattern: String, name: String) -> Bool {
        var pattern = pattern.lowercased()
        if pattern.hasSuffix(".") { pattern.removeLast() }
        guard !pattern.isEmpty, !name.isEmpty else { return false }
        guard pattern.hasPrefix("*.") else { return pattern == name && !pattern.contains("*") }
        let suffix = pattern.dropFirst(2)
        // A wildcard needs two labels after it, and stands for one whole label: never for a dot.
        guard suffix.split(separator: ".", omittingEmptySubsequences: false).count >= 2,
            !suffix.contains("*"),
            let dot = name.firstIndex(of: "."), dot != name.startIndex
        else { return false }
        return name[name.index(after: dot)...] == suffix
    }

    /// The bytes of an IPv4 or IPv6 literal (a zone, `%eth0`, is dropped), or `nil` for a name.
    static func addressBytes(_ host: String) -> [UInt8]? {
        let literal = host.split(separator: "%", maxSplits: 1).first.map(String.init) ?? host
        var v4 = in_addr()
        if inet_pton(AF_INET, literal, &v4) == 1 {
            return withUnsafeBytes(of: &v4) { Array($0) }
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, literal, &v6) == 1 {
            return withUnsafeBytes(of: &v6) { Array($0) }
        }
        return nil
    }

    // MARK: Checking connections

    /// A connection initialiser for AsyncHTTPClient that fails the connection, before any request
    /// is written to it, unless the server's certificate names this host.
    /// Set as `http1_1ConnectionDebugInitializer` and `http2ConnectionDebugInitializer`.
    @Sendable func checkConnection(_ channel: Channel) -> EventLoopFuture<Void> {
        channel.eventLoop.submit {
            let handler = try channel.pipeline.syncOperations.handler(type: NIOSSLClientHandler.self)
            guard let leaf = handler.peerCertificate, isNamed(by: leaf) else {
                throw Mismatch(host: host)
            }
        }
    }

    /// The certificate does not name the host.
    struct Mismatch: Error, Sendable, CustomStringConvertible {
        let host: String
        var description: String { "the server's certificate does not name \(host)" }
    }
}

/// What a certificate that failed verification says about its dates, read on a second connection
/// that verifies nothing and sends nothing: BoringSSL only says "verify failed", curl says why.
struct CertificateDates: Error, Sendable {
    let notValidBefore: time_t
    let notValidAfter: time_t

    /// Why a chain that did not verify was refused, judged at `now` (seconds since 1970): expired,
    /// not valid yet, or (its dates being fine) not leading to a trusted root.
    func reason(now: time_t = time(nil)) -> TLSFailureReason {
        if now > notValidAfter { return .expired }
        if now < notValidBefore { return .notYetValid }
        return .untrusted
    }

    /// A connection initialiser that reads the server's certificate dates and fails the connection
    /// with them, so that nothing is ever sent on it.
    static func connectionProbe() -> @Sendable (Channel) -> EventLoopFuture<Void> {
        { channel in
            channel.eventLoop.submit {
                let handler = try channel.pipeline.syncOperations.handler(type: NIOSSLClientHandler.self)
                guard let leaf = handler.peerCertificate else { throw ChannelError.inappropriateOperationForState }
                throw CertificateDates(notValidBefore: leaf.notValidBefore, notValidAfter: leaf.notValidAfter)
            }
        }
    }
}

/// The TLS version a server chose on a connection that accepts all of them, read on a second
/// connection that verifies nothing and sends nothing: BoringSSL only says "unsupported protocol".
struct NegotiatedVersion: Error, Sendable {
    let version: TLSProtocolVersion?

    /// A connection initialiser that reads the negotiated version and fails the connection with it,
    /// so that nothing is ever sent on it.
    static func connectionProbe() -> @Sendable (Channel) -> EventLoopFuture<Void> {
        { channel in
            channel.eventLoop.submit {
                let handler = try channel.pipeline.syncOperations.handler(type: NIOSSLClientHandler.self)
                throw NegotiatedVersion(version: handler.tlsVersion.map(TLSProtocolVersion.init))
            }
        }
    }
}
