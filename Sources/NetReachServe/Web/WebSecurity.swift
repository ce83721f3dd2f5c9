import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOSSL
import NetReachSystem

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

#if canImport(Glibc)
import Glibc
#endif

/// The web configuration in force: the TLS context each new connection is given, the basic
/// authentication each request passes, the headers each response carries. Made from
/// `--web.config.file` at start and made again on SIGHUP (and `POST /-/reload`), and whenever
/// the file, or a certificate, key or CA file it names, changes: a new connection looks (at most
/// once a second) and a change is read off the event loop. exporter-toolkit reads them at every
/// handshake; either way a certificate that cert-manager renews in a Kubernetes Secret, or
/// certbot on a host, is served without a signal. A file that cannot be read, or whose
/// certificate or key cannot be loaded, changes nothing.
///
/// Whether serve speaks TLS at all is decided at start, as exporter-toolkit decides it: a reload
/// may change the certificate, the key, the client CAs and the users, but a file that would turn
/// TLS on or off is refused until serve restarts.
///
/// ```swift
/// let web = try WebSecurity(path: "/etc/netreach/web.yml")
/// let prepared = try web.prepareReload()   // on SIGHUP: read and checked, not yet applied
/// web.apply(prepared)
/// ```
package final class WebSecurity: Sendable {
    /// The file, as given.
    package let path: String
    /// Whether connections are TLS (fixed at start).
    package let usesTLS: Bool

    /// What one reading of the file made.
    package struct Settings: Sendable {
        package var configuration: WebConfiguration
        var context: NIOSSLContext?
        var authentication: BasicAuthentication
        var headers: HTTPFields
        /// The files it was made from, as they were just before they were read.
        var files: [FileStamp]
    }

    private let current: Locked<Settings>
    private let bcrypt = BlockingWork.Pool(named: "netreach-bcrypt", width: 1)
    private let changes = Locked(Changes())
    private let log: @Sendable (String) -> Void

    /// When the files were last looked at, and what a reload that failed found (not tried again
    /// until they change once more).
    private struct Changes {
        var lastLook = ContinuousClock.now
        var reading = false
        var failed: [FileStamp]?
    }

    /// Reads `path` and makes what it says; `log` is told of each reload that follows a change of
    /// the files, and why one failed.
    package init(path: String, log: @escaping @Sendable (String) -> Void = { _ in }) throws(WebConfigurationError) {
        self.path = path
        self.log = log
        let settings = try Self.make(path, bcrypt: bcrypt)
        usesTLS = settings.context != nil
        current = Locked(settings)
    }

    /// Looks whether the files changed since they were read (at most once a second; a few
    /// `stat` calls) and, if so, reads them again on a thread of its own. Called for each new
    /// connection, which is served with what is in force now.
    func followChanges(now: ContinuousClock.Instant = .now) {
        let due = changes.withLock { changes in
            guard !changes.reading, now - changes.lastLook >= .seconds(1) else { return false }
            changes.lastLook = now
            return true
        }
        guard due else { return }
        let inForce = current.withLock { $0.files }
        let seen = inForce.map { FileStamp(path: $0.path) }
        guard seen != inForce, changes.withLock({ $0.failed }) != seen else { return }
        changes.withLock { $0.reading = true }
        BlockingWork.start(named: "netreach-web") { [self] in
            defer { changes.withLock { $0.reading = false } }
            do {
                let settings = try prepareReload()
                apply(settings)
                changes.withLock { $0.failed = nil }
                log("\(path) changed, now in force: \(Self.summary(settings.configuration))")
            } catch {
                changes.withLock { $0.failed = seen }
                log("\(path) or a file it names changed, but the running web configuration is kept: \(error)")
            }
        }
    }

    /// Reads the file again and makes what it says, without applying it.
    package func prepareReload() throws(WebConfigurationError) -> Settings {
        let settings = try Self.make(path, bcrypt: bcrypt)
        guard (settings.context != nil) == usesTLS else {
            throw WebConfigurationError(
                path,
                usesTLS
                    ? "TLS cannot be turned off by a reload; restart serve to serve plain HTTP"
                    : "TLS cannot be turned on by a reload; restart serve to serve HTTPS")
        }
        return settings
    }

    /// Puts `settings` in force: for connections accepted and requests received from now on.
    package func apply(_ settings: Settings) {
        current.withLock { $0 = settings }
    }

    /// The configuration in force.
    package var configuration: WebConfiguration { current.withLock { $0.configuration } }

    /// `TLS TLS12 and up, client certificates: NoClientCert; basic authentication, 2 users`, for
    /// the log.
    package static func summary(_ configuration: WebConfiguration) -> String {
        var parts: [String] = []
        if let tls = configuration.tls {
            parts.append("TLS \(tls.minimumVersion.rawValue) and up, client certificates: \(tls.clientAuth.rawValue)")
        } else {
            parts.append("plain HTTP")
        }
        let count = configuration.users.count
        parts.append(
            count == 0 ? "no basic authentication" : "basic authentication, \(count) user\(count == 1 ? "" : "s")")
        return parts.joined(separator: "; ")
    }

    /// The handler that speaks TLS on a new connection; `nil` without TLS.
    func tlsHandler() -> NIOSSLServerHandler? {
        let (context, acceptsAny) = current.withLock {
            ($0.context, [.requestClientCert, .requireAnyClientCert].contains($0.configuration.tls?.clientAuth))
        }
        guard let context else { return nil }
        guard acceptsAny else { return NIOSSLServerHandler(context: context) }
        // RequestClientCert and RequireAnyClientCert take whatever certificate is sent, as Go's do.
        return NIOSSLServerHandler(
            context: context,
            customVerificationCallback: { _, promise in
                promise.succeed(.certificateVerified)
            })
    }

    /// The basic authentication in force.
    var authentication: BasicAuthentication { current.withLock { $0.authentication } }

    /// The headers every response carries.
    var headers: HTTPFields { current.withLock { $0.headers } }

    private static func make(_ path: String, bcrypt: BlockingWork.Pool) throws(WebConfigurationError) -> Settings {
        let stamp = FileStamp(path: path)
        let configuration = try WebConfiguration.read(path)
        let named = [configuration.tls?.certificate, configuration.tls?.key, configuration.tls?.clientCAs]
            .compactMap { pem -> String? in
                guard case .file(let file) = pem else { return nil }
                return file
            }
        let files = [stamp] + named.map { FileStamp(path: $0) }
        var headers = HTTPFields()
        for (name, value) in configuration.headers.sorted(by: { $0.key < $1.key }) {
            if let field = HTTPField.Name(name) { headers[field] = value }
        }
        let context: NIOSSLContext?
        do {
            context = try configuration.tls.map(makeContext)
        } catch let error as Failure {
            throw WebConfigurationError(path, error.description)
        } catch {
            throw WebConfigurationError(path, "TLS cannot be set up: \(error)")
        }
        return Settings(
            configuration: configuration, context: context,
            authentication: BasicAuthentication(users: configuration.users, bcrypt: bcrypt), headers: headers,
            files: files)
    }

    private struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// The server's TLS context for `tls`: its certificate and key loaded (and checked to belong
    /// together), the versions, and the client certificate rule in BoringSSL's terms.
    private static func makeContext(_ tls: WebConfiguration.TLS) throws -> NIOSSLContext {
        let chain = try certificates(tls.certificate, key: "cert_file")
        guard !chain.isEmpty else { throw Failure(description: "no certificate in the cert_file") }
        let key: NIOSSLPrivateKey
        do {
            switch tls.key {
            case .file(let file): key = try NIOSSLPrivateKey(file: file, format: .pem)
            case .text(let text): key = try NIOSSLPrivateKey(bytes: Array(text.utf8), format: .pem)
            }
        } catch {
            throw Failure(
                description: "the key_file cannot be read as a PEM private key (\(describe(tls.key))): \(error)")
        }
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
        configuration.minimumTLSVersion = version(tls.minimumVersion)
        configuration.maximumTLSVersion = version(tls.maximumVersion)
        configuration.applicationProtocols = ["http/1.1"]
        switch tls.clientAuth {
        case .noClientCert: configuration.certificateVerification = .none
        case .requestClientCert, .verifyClientCertIfGiven: configuration.certificateVerification = .optionalVerification
        case .requireAnyClientCert, .requireAndVerifyClientCert:
            configuration.certificateVerification = .noHostnameVerification
        }
        if let authorities = tls.clientCAs {
            let roots = try certificates(authorities, key: "client_ca_file")
            guard !roots.isEmpty else { throw Failure(description: "no certificate in the client_ca_file") }
            configuration.trustRoots = .certificates(roots)
            // Clients choose which certificate to send from the names the server lists, as Go's server lists them.
            configuration.sendCANameList = true
        }
        do {
            return try NIOSSLContext(configuration: configuration)
        } catch NIOSSLError.failedToLoadPrivateKey {
            // BoringSSL checks the key against the certificate's as it loads it.
            throw Failure(
                description:
                    "the key (\(describe(tls.key))) does not belong to the certificate (\(describe(tls.certificate)))")
        }
    }

    private static func certificates(_ pem: WebConfiguration.PEM, key: String) throws -> [NIOSSLCertificate] {
        do {
            switch pem {
            case .file(let file): return try NIOSSLCertificate.fromPEMFile(file)
            case .text(let text): return try NIOSSLCertificate.fromPEMBytes(Array(text.utf8))
            }
        } catch {
            throw Failure(description: "the \(key) cannot be read as PEM certificates (\(describe(pem))): \(error)")
        }
    }

    private static func describe(_ pem: WebConfiguration.PEM) -> String {
        switch pem {
        case .file(let file): file
        case .text: "given in the file"
        }
    }

    private static func version(_ version: WebConfiguration.Version) -> TLSVersion {
        switch version {
        case .tls10: .tlsv1
        case .tls11: .tlsv11
        case .tls12: .tlsv12
        case .tls13: .tlsv13
        }
    }
}

/// serve's HTTP/1.1 connections, each begun with a TLS handshake when ``WebSecurity`` says TLS:
/// Hummingbird's `TLSChannel`, except that each connection takes the TLS context in force when
/// it is accepted, so a reload's new certificate is used without a restart.
struct WebChannel: ServerChildChannel {
    typealias Value = HTTP1Channel.Value

    let base: HTTP1Channel
    let security: WebSecurity

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        security.followChanges()
        return channel.eventLoop.makeCompletedFuture {
            if let handler = security.tlsHandler() { try channel.pipeline.syncOperations.addHandler(handler) }
        }.flatMap {
            base.setup(channel: channel, logger: logger)
        }
    }

    func handle(value: Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}

/// What `stat` says of a file (following links, as a Kubernetes Secret's are swapped): enough to
/// tell that it was replaced or written.
struct FileStamp: Sendable, Equatable {
    var path: String
    /// `nil`: it could not be looked at (gone, or not allowed).
    var identity: [Int]?

    init(path: String) {
        self.path = path
        var status = stat()
        guard stat(path, &status) == 0 else {
            identity = nil
            return
        }
        identity = [
            Int(status.st_dev), Int(status.st_ino), Int(status.st_size), Int(status.st_mtim.tv_sec),
            Int(status.st_mtim.tv_nsec),
        ]
    }
}
