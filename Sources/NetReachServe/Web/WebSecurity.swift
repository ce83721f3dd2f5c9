import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOSSL
import NetReachSystem

/// The web configuration in force: the TLS context each new connection is given, the basic
/// authentication each request passes, the headers each response carries. Made from
/// `--web.config.file` at start and made again on SIGHUP (and `POST /-/reload`); a file that
/// cannot be read, or whose certificate or key cannot be loaded, changes nothing.
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
    }

    private let current: Locked<Settings>
    private let bcrypt = BlockingWork.Pool(named: "netreach-bcrypt", width: 1)

    /// Reads `path` and makes what it says.
    package init(path: String) throws(WebConfigurationError) {
        self.path = path
        let settings = try Self.make(path, bcrypt: bcrypt)
        usesTLS = settings.context != nil
        current = Locked(settings)
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

    /// `TLS (client certificates: RequireAndVerifyClientCert), 2 users`, for the log.
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
        let configuration = try WebConfiguration.read(path)
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
            authentication: BasicAuthentication(users: configuration.users, bcrypt: bcrypt), headers: headers)
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
        channel.eventLoop.makeCompletedFuture {
            if let handler = security.tlsHandler() { try channel.pipeline.syncOperations.addHandler(handler) }
        }.flatMap {
            base.setup(channel: channel, logger: logger)
        }
    }

    func handle(value: Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}
