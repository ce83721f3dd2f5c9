import AsyncHTTPClient
import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPCompression
import NIOPosix
import NIOSSL
import NetReach
import NetReachHTTP
import NetReachSystem
import OpenAPIRuntime

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// MARK: - Clients made from settings

extension AsyncHTTPClientTransport {
    /// Creates a transport whose clients are configured by `settings`: trust roots, client
    /// certificate, certificate verification, proxies (one client per distinct proxy, chosen per
    /// request by ``NetReachHTTP/ProxySettings/proxy(forScheme:host:)``), connect timeout and the
    /// decoded-body limit.
    ///
    /// Files are read now, so a missing or malformed one throws here rather than on the first
    /// request. The clients are shut down when the last copy of this transport (and the last
    /// transfer it started) is gone.
    ///
    /// ```swift
    /// var settings = TransportSettings()
    /// settings.tls.trustRoots = .file("/etc/my-company/ca.pem")
    /// settings.connectTimeout = .seconds(5)
    /// let transport = try AsyncHTTPClientTransport(settings: settings)
    /// ```
    ///
    /// - Throws: ``NetReachHTTP/TransportSettingsError``: a file that cannot be read, a
    ///   certificate or key that does not load, a proxy URL that is not `http://host[:port]`.
    public init(settings: TransportSettings) throws(TransportSettingsError) {
        try self.init(settings: settings, environment: ProcessInfo.processInfo.environment)
    }

    /// As ``init(settings:)``, reading `SSL_CERT_FILE` and `SSL_CERT_DIR` from `environment`
    /// instead of the process's (for tests).
    package init(settings: TransportSettings, environment: [String: String]) throws(TransportSettingsError) {
        try self.init(settings: settings, environment: environment, dnsOverride: [:])
    }

    /// As ``init(settings:)``, connecting to the addresses `dnsOverride` gives for its host names
    /// (TLS still names and checks the host): how a connectivity probe is sent over one family.
    package init(
        settings: TransportSettings, environment: [String: String] = ProcessInfo.processInfo.environment,
        dnsOverride: [String: String]
    ) throws(TransportSettingsError) {
        let clients = try ClientSet(settings: settings, environment: environment, dnsOverride: dnsOverride)
        self.client = clients.direct
        self.routing = .owned(clients)
    }
}

/// The clients of one transport made from ``NetReachHTTP/TransportSettings``: one per route
/// (direct, through the http proxy, through the https proxy), since AsyncHTTPClient sets a proxy
/// per client, and for https with verification one per route and host, since the certificate's
/// name is checked against the URL's host ([`ServerIdentity`](x-source-tag://ServerIdentity))
/// and AsyncHTTPClient tells a connection's initialiser nothing about the host.
///
/// Per-host clients are kept for the ``hostClientLimit`` hosts used last; one that falls out is
/// shut down once no transfer holds it. Shuts its other clients down when released (every
/// transfer holds it until it ends), unless it is the process-wide default.
final class ClientSet: Sendable {
    let direct: HTTPClient
    /// https through the proxy without verification (with it, a per-host client).
    let viaHTTPSProxy: HTTPClient?
    let httpProxy: HTTPClient.Configuration.Proxy?
    let httpsProxy: HTTPClient.Configuration.Proxy?
    let proxy: ProxySettings
    private let shutsDownOnDeinit: Bool
    /// The configuration every client starts from (no proxy).
    let base: HTTPClient.Configuration
    let verifiesCertificates: Bool
    /// The oldest TLS version its connections accept.
    let minimumProtocolVersion: TLSProtocolVersion
    /// Judges the strength of the server's certificates on verified connections; `nil` when
    /// verification is off or weak certificates are allowed.
    let strengthCheck: ChainStrengthCheck?
    /// What a gzip or deflate body may decode to (``NetReachHTTP/TransportSettings/maximumDecodedBodySize``);
    /// `nil` when nothing is decoded (``NetReachHTTP/TransportSettings/decodesContentCodings`` off):
    /// no `Accept-Encoding` is added and bodies come as they were sent.
    let maximumDecodedBodySize: Int64?
    /// Per route and host, most recently used last.
    let hostClients = Locked<[HostClient]>([])
    /// Clients that verify nothing and send nothing: they read a refused certificate's dates.
    private let inspectors = Locked<[String: OwnedClient]>([:])
    /// Where connections go instead of a URL's host and port (curl's `--resolve`, `--connect-to`).
    let overrides: ConnectionOverrides
    /// What this set was made from, for the sets of ``connecting(_:to:)``.
    private let settings: TransportSettings
    private let environment: [String: String]
    /// The sets of ``connecting(_:to:)``, by host and address.
    private let redirected = Locked<[String: ClientSet]>([:])

    /// How many per-host clients are kept.
    static let hostClientLimit = 32

    init(
        settings: TransportSettings, environment: [String: String], shutsDownOnDeinit: Bool = true,
        dnsOverride: [String: String] = [:]
    ) throws(TransportSettingsError) {
        try settings.checkFiles(environment: environment)
        var configuration = HTTPClient.Configuration.singletonConfiguration
        configuration.dnsOverride = dnsOverride
        configuration.tlsConfiguration = try Self.makeTLSConfiguration(settings.tls, environment: environment)
        Self.applyCommonSettings(to: &configuration)
        if let connectTimeout = settings.connectTimeout {
            configuration.timeout.connect = TimeAmount(connectTimeout)
        }
        let httpProxy = try settings.proxy.http.map(Self.makeProxy)
        let httpsProxy = try settings.proxy.https.map(Self.makeProxy)

        func makeClient(_ proxy: HTTPClient.Configuration.Proxy?) -> HTTPClient {
            var configuration = configuration
            configuration.proxy = proxy
            return HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
        }
        var directConfiguration = configuration
        if httpProxy != nil {
            // Plain http through the proxy goes on direct connections to it, in absolute form.
            directConfiguration.http1_1ConnectionDebugInitializer = AbsoluteFormProxy.connectionSetup()
        }
        direct = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: directConfiguration)
        viaHTTPSProxy = httpsProxy.map(makeClient)
        self.httpProxy = httpProxy
        self.httpsProxy = httpsProxy
        proxy = settings.proxy
        base = configuration
        verifiesCertificates = settings.tls.verifiesCertificates
        minimumProtocolVersion = settings.tls.minimumProtocolVersion
        strengthCheck =
            settings.tls.verifiesCertificates && !settings.tls.allowsWeakCertificates
            ? configuration.tlsConfiguration.map {
                ChainStrengthCheck(tls: $0, connectTimeout: configuration.timeout.connect ?? .seconds(10))
            } : nil
        maximumDecodedBodySize = settings.decodesContentCodings ? settings.maximumDecodedBodySize : nil
        self.shutsDownOnDeinit = shutsDownOnDeinit
        overrides = settings.connectionOverrides
        self.settings = settings
        self.environment = environment
    }

    /// Clients like these whose connections for `host` (as AsyncHTTPClient writes it: an IPv6
    /// address in brackets) go to `address` (or another name), made once and kept with this set.
    /// AsyncHTTPClient's DNS override keeps `host` as the TLS server name, and the certificate is
    /// still checked against the URL's host; the override is per client, hence clients of their own.
    func connecting(_ host: String, to address: String) throws(TransportError) -> ClientSet {
        let key = host + " " + address
        let made = redirected.withLock { sets -> Result<ClientSet, TransportSettingsError> in
            if let found = sets[key] { return .success(found) }
            var settings = self.settings
            settings.connectionOverrides = ConnectionOverrides()
            var dnsOverride = self.base.dnsOverride
            dnsOverride[host] = address
            do throws(TransportSettingsError) {
                let set = try ClientSet(settings: settings, environment: self.environment, dnsOverride: dnsOverride)
                sets[key] = set
                return .success(set)
            } catch {
                return .failure(error)
            }
        }
        switch made {
        case .success(let set): return set
        case .failure(let error):
            // The same settings made this set: only a file changed since could fail.
            throw TransportError(.invalidRequest, "the transport settings cannot be used any more: \(error)")
        }
    }

    deinit {
        guard shutsDownOnDeinit else { return }
        // The callback form keeps each client alive until it has shut down.
        for client in [direct, viaHTTPSProxy].compactMap({ $0 }) {
            client.shutdown { _ in }
        }
    }

    /// Why the certificate of `request`'s server did not verify: expired, not valid yet, or not
    /// trusted, read on a connection of its own that verifies nothing and sends nothing (over the
    /// same route), or `nil` if that connection did not get as far as a certificate.
    func diagnoseRefusedCertificate(_ request: HTTPRequest, deadline: NIODeadline) async -> TLSFailureReason? {
        let found = await inspect(request, deadline: deadline, name: "dates") { configuration in
            configuration.http1_1ConnectionDebugInitializer = CertificateDates.connectionProbe()
            configuration.http2ConnectionDebugInitializer = CertificateDates.connectionProbe()
        }
        return (found as? CertificateDates)?.reason()
    }

    /// Whether the server of `request`, which refused every TLS version from
    /// ``minimumProtocolVersion`` up, speaks an older one: which, read on a connection of its own
    /// that accepts TLS 1.0 and up, verifies nothing and sends nothing (over the same route); `nil`
    /// when it speaks none older (or that connection failed too).
    func diagnoseOldProtocol(_ request: HTTPRequest, deadline: NIODeadline) async -> TLSFailureReason? {
        let found = await inspect(request, deadline: deadline, name: "version") { configuration in
            configuration.tlsConfiguration?.minimumTLSVersion = .tlsv1
            configuration.http1_1ConnectionDebugInitializer = NegotiatedVersion.connectionProbe()
            configuration.http2ConnectionDebugInitializer = NegotiatedVersion.connectionProbe()
        }
        let minimum = minimumProtocolVersion
        guard let spoken = (found as? NegotiatedVersion)?.version, spoken < minimum else { return nil }
        return .protocolVersionTooOld("the server speaks \(spoken); at least \(minimum) is required")
    }

    /// What a connection of its own to `request`'s server (the same route, verifying nothing,
    /// configured further by `configure`) fails with: its initialiser's finding, which it throws
    /// so that nothing is ever sent. One such client per route and `name`, kept.
    private func inspect(
        _ request: HTTPRequest, deadline: NIODeadline, name: String,
        configure: (inout HTTPClient.Configuration) -> Void
    ) async -> (any Error)? {
        guard let scheme = request.scheme, let authority = request.authority else { return nil }
        let route = route(for: request)
        let key = name + "|" + (route.map { "\($0.host):\($0.port)" } ?? "")
        let inspector = inspectors.withLock { inspectors -> OwnedClient in
            if let found = inspectors[key] { return found }
            var configuration = base
            configuration.proxy = route
            configuration.tlsConfiguration?.certificateVerification = .none
            configure(&configuration)
            let made = OwnedClient(configuration)
            inspectors[key] = made
            return made
        }
        var probe = HTTPClientRequest(url: "\(scheme)://\(authority)/")
        probe.method = .HEAD
        do {
            _ = try await inspector.client.execute(probe, deadline: deadline)
        } catch {
            return error
        }
        return nil
    }

    /// What every client this module makes has in common: refused connections fail at once,
    /// redirects are responses, bodies arrive as they were sent (the transport decodes gzip and
    /// deflate itself, in bounded pieces: ``ContentDecoder``), and an HTTP/2 body's frames reach
    /// the client joined (``BodyCoalescer``).
    static func applyCommonSettings(to configuration: inout HTTPClient.Configuration) {
        configuration.connectionPool.retryConnectionEstablishment = false
        configuration.redirectConfiguration = .disallow
        configuration.decompression = .disabled
        configuration.http2StreamChannelDebugInitializer = BodyCoalescer.streamSetup()
    }

    private static func makeTLSConfiguration(
        _ settings: TLSSettings, environment: [String: String]
    ) throws(TransportSettingsError) -> TLSConfiguration {
        var tls = TLSConfiguration.makeClientConfiguration()
        let roots = settings.trustRoots.resolved(in: environment)
        let fromEnvironment = settings.trustRoots.isDefault
        if let file = roots.file {
            // Looked at now to report a file that is not PEM, but parsed by BoringSSL only when the
            // first https connection is made (a system bundle takes a while in a debug build), and
            // by path, which takes a bundle with duplicates where adding them one by one fails.
            try checkHoldsPEMCertificates(file, what: fromEnvironment ? "SSL_CERT_FILE" : "the trust roots file")
        }
        // A directory must be the main root: NIOSSL refuses one among the additional roots.
        switch (roots.file, roots.directory) {
        case (let file?, let directory?):
            tls.trustRoots = .file(directory)
            tls.additionalTrustRoots = [.file(file)]
        case (let file?, nil):
            tls.trustRoots = .file(file)
        case (nil, let directory?):
            tls.trustRoots = .file(directory)
        case (nil, nil):
            break
        }
        if let identity = settings.clientIdentity {
            let chain = try loadCertificates(identity.certificateChainFile, what: "the client certificate")
            tls.certificateChain = chain.map { .certificate($0) }
            do {
                tls.privateKey = .privateKey(try NIOSSLPrivateKey(file: identity.privateKeyFile, format: .pem))
            } catch {
                throw TransportSettingsError(
                    .invalidCredentials,
                    "the client private key \(identity.privateKeyFile) holds no unencrypted PEM private key")
            }
            do {
                // A context made once here reports a key that does not match its certificate now,
                // not on the first request.
                _ = try NIOSSLContext(configuration: tls)
            } catch {
                throw TransportSettingsError(
                    .invalidCredentials,
                    "the client private key \(identity.privateKeyFile) does not match the certificate \(identity.certificateChainFile)"
                )
            }
        }
        if !settings.verifiesCertificates {
            tls.certificateVerification = .none
        }
        tls.minimumTLSVersion = settings.minimumProtocolVersion.nio
        return tls
    }

    private static func checkHoldsPEMCertificates(_ path: String, what: String) throws(TransportSettingsError) {
        // Read until the first certificate's marker, not whole: a system bundle (`SSL_CERT_FILE`)
        // is hundreds of KiB, looked at on every start of the tool.
        let marker = Array("-----BEGIN CERTIFICATE-----".utf8)
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw TransportSettingsError(.unreadableFile, "\(what) \(path) cannot be read") }
        defer { close(fd) }
        var window: [UInt8] = []
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 1)
        defer { chunk.deallocate() }
        while true {
            let count: Int
            do throws(SystemError) { count = try SystemCall.read(fd, into: chunk) } catch {
                throw TransportSettingsError(.unreadableFile, "\(what) \(path) cannot be read")
            }
            guard count > 0 else {
                throw TransportSettingsError(.invalidCredentials, "\(what) \(path) holds no PEM certificate")
            }
            // The last bytes of the chunk before, so a marker split between two reads is found.
            window = Array(window.suffix(marker.count - 1)) + UnsafeRawBufferPointer(rebasing: chunk[0..<count])
            if window.withUnsafeBytes({ Self.contains(marker, in: $0) }) { return }
        }
    }

    /// Whether `needle` occurs in `bytes`, by memchr and memcmp (`Data.range(of:)` took
    /// milliseconds over a system bundle).
    private static func contains(_ needle: [UInt8], in bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress, let first = needle.first, bytes.count >= needle.count else { return false }
        let last = bytes.count - needle.count
        var offset = 0
        while offset <= last, let hit = memchr(base + offset, Int32(first), last - offset + 1) {
            offset = UnsafeRawPointer(hit) - base
            if memcmp(hit, needle, needle.count) == 0 { return true }
            offset += 1
        }
        return false
    }

    private static func loadCertificates(
        _ path: String, what: String
    ) throws(TransportSettingsError) -> [NIOSSLCertificate] {
        let certificates: [NIOSSLCertificate]
        do {
            certificates = try NIOSSLCertificate.fromPEMFile(path)
        } catch {
            throw TransportSettingsError(.invalidCredentials, "\(what) \(path) is not a PEM certificate file")
        }
        guard !certificates.isEmpty else {
            throw TransportSettingsError(.invalidCredentials, "\(what) \(path) holds no PEM certificate")
        }
        return certificates
    }

    /// An AsyncHTTPClient proxy from `http://[user:password@]host[:port]` (port 1080 by default, as curl).
    private static func makeProxy(_ url: URL) throws(TransportSettingsError) -> HTTPClient.Configuration.Proxy {
        guard (url.scheme?.lowercased() ?? "http") == "http" else {
            throw TransportSettingsError(
                .invalidProxy, "proxy \(url.absoluteString): AsyncHTTPClientTransport speaks to http:// proxies only")
        }
        guard let host = url.host, !host.isEmpty else {
            throw TransportSettingsError(.invalidProxy, "proxy \(url.absoluteString) has no host")
        }
        let bareHost = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        let authorization = url.user(percentEncoded: false).map {
            HTTPClient.Authorization.basic(username: $0, password: url.password(percentEncoded: false) ?? "")
        }
        return .server(host: bareHost, port: url.port ?? 1080, authorization: authorization)
    }
}

extension TLSProtocolVersion {
    /// NIOSSL's name for this version.
    var nio: TLSVersion {
        switch self {
        case .tlsv1: .tlsv1
        case .tlsv11: .tlsv11
        case .tlsv12: .tlsv12
        case .tlsv13: .tlsv13
        }
    }

    /// The version NIOSSL negotiated.
    init(_ version: TLSVersion) {
        switch version {
        case .tlsv1: self = .tlsv1
        case .tlsv11: self = .tlsv11
        case .tlsv12: self = .tlsv12
        case .tlsv13: self = .tlsv13
        }
    }
}
