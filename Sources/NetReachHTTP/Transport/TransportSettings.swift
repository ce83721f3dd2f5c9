import NetReach
import NetReachSystem

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// How a transport connects: whom it trusts and proves itself to over TLS, which proxy it goes
/// through, how long it may take to connect, and how large a decoded body may grow.
///
/// Both transports take the same settings and honour them the same way, or refuse them when they
/// are made: `AsyncHTTPClientTransport(settings:)` honours all of them;
/// ``URLSessionTransport/init(settings:)`` throws ``TransportSettingsError/Kind/unsupported`` for
/// what FoundationNetworking on Linux cannot do (custom trust, client certificates, turning
/// verification off, a proxy other than the environment's, a connect timeout). No setting is ever
/// silently ignored.
///
/// The defaults read the environment the way curl and OpenSSL do: `SSL_CERT_FILE` and
/// `SSL_CERT_DIR` choose the trust roots when nothing explicit is set, and `http_proxy`,
/// `https_proxy`, `all_proxy` and `no_proxy` choose the proxy (see ``ProxySettings/environment(_:)``).
///
/// ```swift
/// var settings = TransportSettings()
/// settings.tls.trustRoots = .file("/etc/my-company/ca.pem")
/// settings.tls.clientIdentity = TLSSettings.ClientIdentity(certificateChainFile: "client.pem", privateKeyFile: "client.key")
/// settings.proxy = ProxySettings(proxy: URL(string: "http://proxy.internal:3128")!, noProxy: ["localhost", ".internal"])
/// settings.connectTimeout = .seconds(5)
/// let transport = try AsyncHTTPClientTransport(settings: settings)
/// ```
public struct TransportSettings: Sendable, Hashable {
    /// Trust roots, client identity and whether certificates are checked at all.
    public var tls: TLSSettings
    /// Which proxy, if any, each request goes through. The default is the environment's.
    public var proxy: ProxySettings
    /// The longest a connection (TCP, and the TLS handshake for https) may take to be made; `nil`
    /// leaves it to the request's stall timeout. A connection not made in time fails with
    /// ``TransportError/Kind/connectTimeout``.
    public var connectTimeout: Duration?
    /// The most bytes a response body sent with `Content-Encoding: gzip` or `deflate` may decode
    /// to. Past it the body fails with ``TransportError/Kind/decodedBodyTooLarge``: a
    /// decompression bomb stops here, whatever its ratio, instead of filling memory or disk.
    /// Bodies sent without a content coding are not limited by it. The default is 1 GiB.
    public var maximumDecodedBodySize: Int64
    /// Whether the transport asks for the content codings it decodes (`Accept-Encoding: deflate,
    /// gzip`, when a request names none) and decodes them. `false` adds no `Accept-Encoding` and
    /// hands every body on as it was sent, coded or not, as curl does without `--compressed`
    /// (`netreach get -H 'Accept-Encoding:'`): a body is never decoded unasked. Only
    /// `AsyncHTTPClientTransport` honours `false`; ``URLSessionTransport/init(settings:)`` throws
    /// ``TransportSettingsError/Kind/unsupported``. The default is `true`.
    ///
    /// ```swift
    /// var settings = TransportSettings()
    /// settings.decodesContentCodings = false    // the body's bytes as the server sent them
    /// ```
    public var decodesContentCodings: Bool = true
    /// Where connections go instead of the URL's host and port (curl's `--resolve` and
    /// `--connect-to`); none by default. Only `AsyncHTTPClientTransport` honours them;
    /// ``URLSessionTransport/init(settings:)`` throws ``TransportSettingsError/Kind/unsupported``.
    public var connectionOverrides: ConnectionOverrides

    /// The default limit for ``maximumDecodedBodySize``: 1 GiB.
    public static let defaultMaximumDecodedBodySize: Int64 = 1 << 30

    /// Creates settings; every argument defaults to what curl would do with no options.
    ///
    /// ```swift
    /// let settings = TransportSettings(connectTimeout: .seconds(3))
    /// ```
    public init(
        tls: TLSSettings = TLSSettings(),
        proxy: ProxySettings = .environment(),
        connectTimeout: Duration? = nil,
        maximumDecodedBodySize: Int64 = TransportSettings.defaultMaximumDecodedBodySize,
        connectionOverrides: ConnectionOverrides = ConnectionOverrides()
    ) {
        self.tls = tls
        self.proxy = proxy
        self.connectTimeout = connectTimeout
        self.maximumDecodedBodySize = maximumDecodedBodySize
        self.connectionOverrides = connectionOverrides
    }
}

/// TLS for https requests: which certificate authorities are trusted, which certificate the client
/// presents, whether the server's certificate is checked at all, and the floors below which a
/// connection is refused (the protocol version, the strength of the server's certificates).
///
/// A handshake that fails (untrusted or expired certificate, a certificate for another host name,
/// a protocol version below ``minimumProtocolVersion``, a certificate too weak, no protocol in
/// common, a client certificate the server refuses) is ``TransportError/Kind/tlsFailure``, which
/// is provably unsent: no byte of the request is sent before the handshake completes.
///
/// The floors are those of curl on Debian 12, whose OpenSSL runs at security level 2: TLS 1.2 at
/// least, server keys of 2048 bits at least (RSA, DSA; 224 for elliptic curves), and no SHA-1 or
/// MD5 signature on any certificate of the chain below its trust anchor. Only an explicit setting
/// lowers them: ``minimumProtocolVersion`` and ``allowsWeakCertificates``.
///
/// ```swift
/// var tls = TLSSettings()
/// tls.trustRoots = .file("ca.pem")                   // curl --cacert ca.pem
/// tls.clientIdentity = .init(certificateChainFile: "me.pem", privateKeyFile: "me.key")
/// tls.minimumProtocolVersion = .tlsv13                // curl --tlsv1.3
/// ```
public struct TLSSettings: Sendable, Hashable {
    /// The certificate authorities a server's certificate must chain to.
    public var trustRoots: TrustRoots
    /// The certificate the client presents when the server asks for one (mutual TLS); `nil` for none.
    public var clientIdentity: ClientIdentity?
    /// `false` accepts any server certificate, for any host name (curl's `--insecure`). Traffic is
    /// still encrypted, but anyone on the path can read and change it.
    ///
    /// As with curl, turning verification off also turns off the certificate strength check
    /// (``allowsWeakCertificates`` is then moot), but not ``minimumProtocolVersion``.
    public var verifiesCertificates: Bool
    /// The oldest TLS version a connection may use (curl's `--tlsv1.0` ... `--tlsv1.3`); the
    /// default is TLS 1.2. A server that speaks only older versions fails with
    /// ``TLSFailureReason/protocolVersionTooOld(_:)``.
    ///
    /// ``AsyncHTTPClientTransport`` honours every version. ``URLSessionTransport`` cannot set one:
    /// libcurl's floor is OpenSSL's (TLS 1.2 with Debian's security level 2), so it takes only
    /// the default and throws ``TransportSettingsError/Kind/unsupported`` for any other.
    ///
    /// ```swift
    /// var tls = TLSSettings()
    /// tls.minimumProtocolVersion = .tlsv1   // an old appliance; curl --tlsv1.0
    /// ```
    public var minimumProtocolVersion: TLSProtocolVersion
    /// `true` accepts server certificates that are too weak by default: a key below 2048 bits (RSA,
    /// DSA) or 224 bits (elliptic curves), or a SHA-1 or MD5 signature on a certificate of the
    /// chain below its trust anchor. Such certificates fail with
    /// ``TLSFailureReason/keyTooWeak(_:)`` or ``TLSFailureReason/digestTooWeak(_:)`` otherwise.
    /// Like curl's `--ciphers DEFAULT@SECLEVEL=0`, for old devices one cannot fix.
    ///
    /// ``URLSessionTransport`` cannot lower OpenSSL's security level and throws
    /// ``TransportSettingsError/Kind/unsupported`` when this is `true`.
    ///
    /// ```swift
    /// var tls = TLSSettings(trustRoots: .file("old-printer-ca.pem"))
    /// tls.allowsWeakCertificates = true
    /// ```
    public var allowsWeakCertificates: Bool

    /// Creates TLS settings; the default trusts the system's roots (or `SSL_CERT_FILE` /
    /// `SSL_CERT_DIR`), presents no client certificate, verifies everything, and refuses TLS
    /// below 1.2 and weak certificates.
    ///
    /// ```swift
    /// let tls = TLSSettings(trustRoots: .directory("/etc/ssl/my-cas"))   // hashed, as `openssl rehash` makes
    /// ```
    public init(
        trustRoots: TrustRoots = .default, clientIdentity: ClientIdentity? = nil, verifiesCertificates: Bool = true,
        minimumProtocolVersion: TLSProtocolVersion = .tlsv12, allowsWeakCertificates: Bool = false
    ) {
        self.trustRoots = trustRoots
        self.clientIdentity = clientIdentity
        self.verifiesCertificates = verifiesCertificates
        self.minimumProtocolVersion = minimumProtocolVersion
        self.allowsWeakCertificates = allowsWeakCertificates
    }

    /// Where trusted certificate authorities come from: a PEM file of certificates, a directory of
    /// certificates named by subject hash (`openssl rehash`), both, or the default.
    ///
    /// ```swift
    /// let roots = TLSSettings.TrustRoots(file: "ca.pem", directory: "/etc/ssl/extra")   // --cacert and --capath
    /// ```
    public struct TrustRoots: Sendable, Hashable {
        /// A PEM file with one or more CA certificates (curl's `--cacert`).
        public var file: String?
        /// A directory of PEM CA certificates named by subject hash, as `openssl rehash` leaves
        /// them (curl's `--capath`).
        public var directory: String?

        /// Trusts the CA certificates in `file`, in `directory`, or both. With neither, the same as
        /// ``default``.
        public init(file: String? = nil, directory: String? = nil) {
            self.file = file
            self.directory = directory
        }

        /// What OpenSSL does with no explicit roots: `SSL_CERT_FILE` and `SSL_CERT_DIR` when either
        /// is set in the environment, the system's roots otherwise.
        public static let `default` = TrustRoots()

        /// Only the CA certificates in this PEM file.
        public static func file(_ path: String) -> TrustRoots { TrustRoots(file: path) }

        /// Only the CA certificates in this hashed directory.
        public static func directory(_ path: String) -> TrustRoots { TrustRoots(directory: path) }

        /// `true` when neither a file nor a directory is set.
        public var isDefault: Bool { file == nil && directory == nil }

        /// The roots in force: these when set, else `SSL_CERT_FILE` / `SSL_CERT_DIR` from
        /// `environment`, else ``default`` (the system's).
        ///
        /// ```swift
        /// let roots = TLSSettings.TrustRoots.default.resolved(in: ["SSL_CERT_FILE": "/tmp/ca.pem"])
        /// // roots.file == "/tmp/ca.pem"
        /// ```
        public func resolved(in environment: [String: String] = ProcessInfo.processInfo.environment) -> TrustRoots {
            guard isDefault else { return self }
            let file = environment["SSL_CERT_FILE"].flatMap { $0.isEmpty ? nil : $0 }
            let directory = environment["SSL_CERT_DIR"].flatMap { $0.isEmpty ? nil : $0 }
            return TrustRoots(file: file, directory: directory)
        }
    }

    /// A client certificate chain and its private key, both PEM files (curl's `--cert` and `--key`).
    ///
    /// ```swift
    /// let identity = TLSSettings.ClientIdentity(certificateChainFile: "client.pem")   // key in the same file
    /// ```
    public struct ClientIdentity: Sendable, Hashable {
        /// PEM file: the client's certificate first, then any intermediates.
        public var certificateChainFile: String
        /// PEM file with the private key (unencrypted); may be the certificate file itself.
        public var privateKeyFile: String

        /// Creates an identity; without `privateKeyFile` the key is read from the certificate file,
        /// as curl does.
        public init(certificateChainFile: String, privateKeyFile: String? = nil) {
            self.certificateChainFile = certificateChainFile
            self.privateKeyFile = privateKeyFile ?? certificateChainFile
        }
    }
}

/// A version of TLS, in order: ``TLSSettings/minimumProtocolVersion`` is one.
///
/// ```swift
/// TLSProtocolVersion.tlsv1 < .tlsv12          // true
/// TLSProtocolVersion.tlsv13.description      // "TLS 1.3"
/// ```
public enum TLSProtocolVersion: Int, Sendable, Hashable, Comparable, CaseIterable, Codable, CustomStringConvertible {
    /// TLS 1.0 (1999): below the default floor; SHA-1 and MD5 in its handshake.
    case tlsv1 = 10
    /// TLS 1.1 (2006): below the default floor.
    case tlsv11 = 11
    /// TLS 1.2 (2008): the default floor.
    case tlsv12 = 12
    /// TLS 1.3 (2018).
    case tlsv13 = 13

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }

    /// `TLS 1.2`.
    public var description: String { "TLS 1.\(rawValue - 10)" }
}

/// Which proxy a request goes through, with curl's rules, so that both transports (and curl on the
/// same machine) choose the same way.
///
/// ```swift
/// let proxy = ProxySettings(proxy: URL(string: "http://127.0.0.1:3128")!, noProxy: ["localhost", "10.0.0.0/8"])
/// proxy.proxy(forScheme: "https", host: "example.com")   // http://127.0.0.1:3128
/// proxy.proxy(forScheme: "http", host: "localhost")      // nil: direct
/// ```
public struct ProxySettings: Sendable, Hashable {
    /// The proxy for `http` URLs.
    public var http: URL?
    /// The proxy for `https` URLs; reached with `CONNECT`, so it sees only the host and port.
    public var https: URL?
    /// Hosts reached directly, with curl's `NO_PROXY` rules: `*` alone matches every host; a name
    /// matches itself and its subdomains (a leading dot is optional: `example.com` and
    /// `.example.com` both match `api.example.com`); an IP address matches itself, and a CIDR
    /// block (`10.0.0.0/8`, `fd00::/8`) the addresses in it. Ports are not considered.
    public var noProxy: [String]

    /// A proxy per scheme; `nil` connects directly.
    public init(http: URL? = nil, https: URL? = nil, noProxy: [String] = []) {
        self.http = http
        self.https = https
        self.noProxy = noProxy
    }

    /// One proxy for both schemes (curl's `--proxy`).
    public init(proxy: URL, noProxy: [String] = []) {
        self.init(http: proxy, https: proxy, noProxy: noProxy)
    }

    /// No proxy at all, whatever the environment says.
    public static let none = ProxySettings()

    /// The proxies the environment names, read as libcurl reads them (which is also what
    /// ``URLSessionTransport`` gets, since FoundationNetworking's libcurl reads them itself):
    ///
    /// - `http` URLs: `http_proxy` only. Upper-case `HTTP_PROXY` is ignored, because a CGI
    ///   program receives a request's `Proxy:` header as `HTTP_PROXY` ("httpoxy").
    /// - `https` URLs: `https_proxy`, else `HTTPS_PROXY`.
    /// - either, when the above are unset: `all_proxy`, else `ALL_PROXY`.
    /// - `no_proxy`, else `NO_PROXY`: a comma-separated ``noProxy`` list.
    ///
    /// A value without a scheme is an http proxy (`proxy:3128` is `http://proxy:3128`). Empty
    /// values count as unset.
    ///
    /// ```swift
    /// let proxy = ProxySettings.environment(["https_proxy": "http://127.0.0.1:3128", "no_proxy": "localhost"])
    /// ```
    public static func environment(
        _ environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> ProxySettings {
        func value(_ names: String...) -> String? {
            for name in names {
                if let value = environment[name]?.trimmingSpaces(), !value.isEmpty { return value }
            }
            return nil
        }
        let all = value("all_proxy", "ALL_PROXY")
        let http = value("http_proxy") ?? all
        let https = value("https_proxy", "HTTPS_PROXY") ?? all
        let noProxy = value("no_proxy", "NO_PROXY").map(Self.parseList) ?? []
        return ProxySettings(http: http.map(Self.proxyURL), https: https.map(Self.proxyURL), noProxy: noProxy)
    }

    /// `a, b,c` as `["a", "b", "c"]`: the form of `NO_PROXY` and curl's `--noproxy`.
    public static func parseList(_ list: String) -> [String] {
        list.split(separator: ",").map { $0.trimmingSpaces() }.filter { !$0.isEmpty }
    }

    /// The proxy for a request to `scheme://host`, or `nil` to connect directly.
    ///
    /// ```swift
    /// ProxySettings.environment().proxy(forScheme: "https", host: "[::1]")
    /// ```
    public func proxy(forScheme scheme: String, host: String) -> URL? {
        let proxy: URL?
        switch scheme.lowercased() {
        case "http": proxy = http
        case "https": proxy = https
        default: proxy = nil
        }
        guard let proxy, !bypasses(host: host) else { return nil }
        return proxy
    }

    /// `true` when `host` (a name or an IP address, brackets allowed) matches ``noProxy``.
    public func bypasses(host: String) -> Bool {
        let host = Self.normalize(host)
        let address = IPAddress(host)
        for entry in noProxy {
            let entry = entry.trimmingSpaces()
            if entry == "*" { return true }
            if let address {
                if Self.matches(address, entry: Self.normalize(entry)) { return true }
                continue
            }
            var name = Self.normalize(entry)
            if name.hasPrefix(".") { name.removeFirst() }
            guard !name.isEmpty else { continue }
            if host == name || host.hasSuffix("." + name) { return true }
        }
        return false
    }

    // MARK: Parsing

    /// A proxy URL from an environment value or an option: `host:port` gets `http://`.
    static func proxyURL(_ value: String) -> URL {
        let text = value.contains("://") ? value : "http://" + value
        return URL(string: text) ?? URL(string: "http://invalid.invalid")!
    }

    /// Lower case, without brackets or a trailing dot.
    private static func normalize(_ host: String) -> String {
        var host = host.lowercased()
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        if host.hasSuffix(".") { host.removeLast() }
        return host
    }

    /// An address against an entry: the same address, or inside the entry's CIDR block.
    private static func matches(_ address: IPAddress, entry: String) -> Bool {
        let parts = entry.split(separator: "/", maxSplits: 1).map(String.init)
        guard let first = parts.first, let network = IPAddress(normalize(first)), network.family == address.family
        else { return false }
        let bits = parts.count == 2 ? Int(parts[1]) : network.bytes.count * 8
        guard let bits, (0...network.bytes.count * 8).contains(bits) else { return false }
        for index in 0..<network.bytes.count {
            let remaining = bits - index * 8
            if remaining <= 0 { break }
            let mask: UInt8 = remaining >= 8 ? 0xFF : ~(0xFF >> UInt8(remaining))
            if address.bytes[index] & mask != network.bytes[index] & mask { return false }
        }
        return true
    }
}

/// Why a transport could not be made with the settings it was given. Thrown when the transport is
/// created, before any request, so that a setting is never silently ignored.
///
/// ```swift
/// do {
///     _ = try URLSessionTransport(settings: TransportSettings(tls: TLSSettings(trustRoots: .file("ca.pem"))))
/// } catch {
///     print(error)   // unsupported: URLSessionTransport cannot use custom trust roots: ...
/// }
/// ```
public struct TransportSettingsError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What was wrong.
    public enum Kind: String, Sendable, Hashable, Codable {
        /// A file or directory named by the settings does not exist or cannot be read.
        case unreadableFile
        /// A certificate or private key file does not hold what it should (no PEM certificate, a
        /// key that does not parse or does not match).
        case invalidCredentials
        /// A proxy URL that cannot be used (no host, or a scheme the transport cannot speak).
        case invalidProxy
        /// The transport cannot honour this setting (FoundationNetworking on Linux, mostly).
        case unsupported
    }

    /// What was wrong.
    public var kind: Kind
    /// Which setting, and why, for people.
    public var detail: String

    /// Creates a settings error.
    public init(_ kind: Kind, _ detail: String) {
        self.kind = kind
        self.detail = detail
    }

    /// The kind, then the detail: `unreadableFile: --cacert /tmp/ca.pem: no such file`.
    public var description: String { "\(kind): \(detail)" }
}

extension TransportSettings {
    /// Checks that every file the TLS settings name exists and is of the right kind (a file, or a
    /// directory for ``TLSSettings/TrustRoots/directory``), including `SSL_CERT_FILE` and
    /// `SSL_CERT_DIR` when they are in force.
    package func checkFiles(
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(TransportSettingsError) {
        let roots = tls.trustRoots.resolved(in: environment)
        let fromEnvironment = tls.trustRoots.isDefault
        if let file = roots.file {
            try Self.check(file, directory: false, what: fromEnvironment ? "SSL_CERT_FILE" : "the trust roots file")
        }
        if let directory = roots.directory {
            try Self.check(
                directory, directory: true, what: fromEnvironment ? "SSL_CERT_DIR" : "the trust roots directory")
        }
        if let identity = tls.clientIdentity {
            try Self.check(identity.certificateChainFile, directory: false, what: "the client certificate")
            try Self.check(identity.privateKeyFile, directory: false, what: "the client private key")
        }
    }

    private static func check(_ path: String, directory: Bool, what: String) throws(TransportSettingsError) {
        guard let file = SystemCall.fileStatus(path) else {
            throw TransportSettingsError(.unreadableFile, "\(what) \(path) does not exist")
        }
        if file.isDirectory != directory {
            throw TransportSettingsError(
                .unreadableFile, "\(what) \(path) is \(directory ? "not a directory" : "a directory")")
        }
        guard file.isReadable else {
            throw TransportSettingsError(.unreadableFile, "\(what) \(path) cannot be read")
        }
    }
}

/// Why a TLS handshake failed: ``TransportError/tlsFailureReason`` of a
/// ``TransportError/Kind/tlsFailure``, and the words of its one-line detail.
///
/// Each transport reads it from its own client. ``AsyncHTTPClientTransport`` (made with settings)
/// tells every case apart, as curl does: the certificate's name is checked against the URL's host
/// only, a chain that does not verify is looked at once more to say whether it expired, is not
/// valid yet, or leads to no trusted root, and a weak key or digest is named with its size or
/// algorithm. ``URLSessionTransport`` says what libcurl's message says.
///
/// ```swift
/// do {
///     _ = try await transport.send(request, body: nil, options: TransportOptions())
/// } catch let error where error.tlsFailureReason == .expired {
///     print("renew the certificate of \(request.authority ?? "")")
/// }
/// ```
public enum TLSFailureReason: Sendable, Hashable, CustomStringConvertible {
    /// The chain does not lead to a trusted root (self-signed, unknown CA).
    case untrusted
    /// The certificate (or one in its chain) has expired.
    case expired
    /// The certificate is not valid yet.
    case notYetValid
    /// The certificate does not name the host asked for.
    case hostnameMismatch
    /// Verification failed for a reason the client did not say.
    case verificationFailed
    /// No protocol version or cipher in common, or the server does not speak TLS.
    case protocolMismatch(String)
    /// The server wants a client certificate, or refused the one sent.
    case clientCertificateRejected
    /// The server speaks only TLS versions older than ``TLSSettings/minimumProtocolVersion``; the
    /// sentence names them when the transport could tell (`the server speaks TLS 1.0; at least
    /// TLS 1.2 is required`).
    case protocolVersionTooOld(String)
    /// A key in the server's certificate chain is too small (see
    /// ``TLSSettings/allowsWeakCertificates``); the sentence says whose, which and how small when
    /// the transport could tell (`the server's RSA key has 1024 bits; at least 2048 are required`).
    case keyTooWeak(String)
    /// A certificate of the server's chain is signed with SHA-1 or MD5 (see
    /// ``TLSSettings/allowsWeakCertificates``); the sentence says which when the transport could
    /// tell (`the server's certificate is signed with SHA-1, which is too weak; a SHA-2 digest is
    /// required`).
    case digestTooWeak(String)
    /// Anything else the handshake reported, in the client's own short words.
    case other(String)

    public var description: String {
        switch self {
        case .untrusted: "the server's certificate is not trusted (it does not chain to a trusted root)"
        case .expired: "the server's certificate has expired"
        case .notYetValid: "the server's certificate is not valid yet"
        case .hostnameMismatch: "the server's certificate is for another host name"
        case .verificationFailed:
            "the server's certificate could not be verified (not trusted, expired or not yet valid)"
        case .protocolMismatch(let detail): "no TLS protocol version or cipher in common with the server (\(detail))"
        case .clientCertificateRejected: "the server requires a client certificate, or refused the one sent"
        case .protocolVersionTooOld(let detail), .keyTooWeak(let detail), .digestTooWeak(let detail): detail
        case .other(let detail): detail
        }
    }

    /// `true` when the server's certificate was refused (not trusted, expired, not yet valid, for
    /// another host, unverifiable, or too weak), as opposed to a handshake that could not agree at
    /// all (a protocol version too old among them): curl exits 60 for these and 35 for the others.
    public var isCertificateRejection: Bool {
        switch self {
        case .untrusted, .expired, .notYetValid, .hostnameMismatch, .verificationFailed, .keyTooWeak, .digestTooWeak:
            true
        case .protocolMismatch, .clientCertificateRejected, .protocolVersionTooOld, .other: false
        }
    }
}
