import ArgumentParser
import NetReachHTTP
import NetReachSystem

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// How `netreach get` connects, with curl's option names: TLS trust and client certificates,
/// proxies, the connect timeout. Included in a command with `@OptionGroup var connection: ConnectionOptions`;
/// the command then asks ``makeTransport(_:)`` for its transport, made by the executable's
/// ``Capabilities/makeTransport``.
///
/// Content codings need no option: both transports send `Accept-Encoding: deflate, gzip`, the
/// codings NetReach decodes, and decode such a body (up to 1 GiB decoded) by default, as curl does
/// with `--compressed`; `--compressed` is accepted, for people and scripts that type it for curl,
/// and changes nothing (it offers no br or zstd, which curl's does: nothing here decodes them).
///
/// ```swift
/// struct GetCommand: NetreachSubcommand {
///     @OptionGroup var connection: ConnectionOptions
///     func run(_ capabilities: Capabilities) async throws {
///         let transport = try connection.makeTransport(capabilities.makeTransport)
///     }
/// }
/// ```
struct ConnectionOptions: ParsableArguments {
    @Option(
        name: .customLong("cacert"),
        help: ArgumentHelp(
            "Trust the CA certificates in this PEM file instead of the system's (like curl --cacert). Without it, SSL_CERT_FILE and SSL_CERT_DIR are honoured.",
            valueName: "file"))
    var caCertificateFile: String?

    @Option(
        name: .customLong("capath"),
        help: ArgumentHelp(
            "Trust the CA certificates in this directory, named by subject hash as 'openssl rehash' leaves them (like curl --capath).",
            valueName: "dir"))
    var caCertificateDirectory: String?

    @Option(
        name: .customLong("cert"),
        help: ArgumentHelp(
            "Present this client certificate (PEM; the chain after it) when the server asks for one. The key is read from --key, or from this file.",
            valueName: "file"))
    var clientCertificate: String?

    @Option(
        name: .customLong("key"),
        help: ArgumentHelp("The private key (unencrypted PEM) of the --cert client certificate.", valueName: "file"))
    var clientKey: String?

    @Flag(
        name: [.customShort("k"), .customLong("insecure")],
        help:
            "Accept any server certificate, for any host name, however weak (as curl -k). The traffic is encrypted but anyone on the way can read and change it; a warning is printed. The TLS version floor stays."
    )
    var insecure = false

    @Flag var tlsMinimum: TLSMinimumOption?

    @Flag(
        name: .customLong("allow-weak-certificates"),
        help:
            "Accept server certificates with a key below 2048 bits (RSA, DSA; 224 for EC) or a SHA-1 or MD5 signature, which are refused by default with exit status 60 (as curl --ciphers DEFAULT@SECLEVEL=0 on Debian). A warning is printed."
    )
    var allowWeakCertificates = false

    @Option(
        name: .customLong("proxy"),
        help: ArgumentHelp(
            "Send requests through this http proxy, http://[user:password@]host[:port] (port 1080 if none). '' sends directly, whatever the environment says. Default: http_proxy / https_proxy / all_proxy, as curl reads them (HTTP_PROXY in upper case is ignored).",
            valueName: "url"))
    var proxy: String?

    @Option(
        name: .customLong("noproxy"),
        help: ArgumentHelp(
            "Hosts to reach directly, comma-separated: names (their subdomains too), IP addresses, CIDR blocks, or '*' for all. Default: no_proxy / NO_PROXY.",
            valueName: "list"))
    var noProxy: String?

    @Option(
        name: .customLong("connect-timeout"), parsing: .unconditional,
        help: ArgumentHelp(
            "The longest making a connection (and the TLS handshake) may take: 5s, 500ms, 1m, or seconds. Default: limited only by the request timeout.",
            valueName: "duration"),
        transform: { try WaitDuration(parsing: $0) })
    var connectTimeout: WaitDuration?

    @Option(
        name: .customLong("resolve"), parsing: .unconditionalSingleValue,
        help: ArgumentHelp(
            "Connect to ADDR for HOST:PORT (several addresses, comma-separated, tried in order; an IPv6 one in brackets or not; HOST '*' for any host), as curl --resolve: Host, the TLS server name and the certificate's name stay HOST. Also after a redirect; not through a proxy. Repeat for more; -HOST:PORT drops an earlier one, and curl's + prefix is accepted.",
            valueName: "host:port:addr[,addr]"))
    var resolve: [String] = []

    @Option(
        name: .customLong("connect-to"), parsing: .unconditionalSingleValue,
        help: ArgumentHelp(
            "Connect to HOST2:PORT2 for requests to HOST1:PORT1, as curl --connect-to (an empty HOST1 or PORT1 matches any; an empty HOST2 or PORT2 keeps the URL's; IPv6 in brackets). Host, the TLS server name and the certificate's name stay HOST1; --resolve applies to HOST2. Also after a redirect; not through a proxy. Repeat for more: the first that matches is used.",
            valueName: "host1:port1:host2:port2"))
    var connectTo: [String] = []

    @Flag(
        name: .customLong("compressed"),
        help:
            "Accepted for curl's sake: responses are always asked for in gzip or deflate, the codings netreach decodes, and decoded."
    )
    var compressed = false

    func validate() throws {
        for (option, path, directory) in [
            ("--cacert", caCertificateFile, false), ("--capath", caCertificateDirectory, true),
            ("--cert", clientCertificate, false), ("--key", clientKey, false),
        ] {
            guard let path else { continue }
            try Self.check(path, option: option, directory: directory)
        }
        if clientKey != nil && clientCertificate == nil {
            throw ValidationError("--key needs --cert: it is the private key of the client certificate.")
        }
        try ProxyChoice.validate(proxy)
        if let connectTimeout, connectTimeout.isZero {
            throw ValidationError("--connect-timeout must be more than 0.")
        }
        _ = try overrides
    }

    /// `--resolve` and `--connect-to`, read.
    private var overrides: ConnectionOverrides {
        get throws(ValidationError) {
            do throws(ConnectionOverrides.ParseError) {
                return try ConnectionOverrides(resolve: resolve, connectTo: connectTo)
            } catch {
                throw ValidationError("\(error.description).")
            }
        }
    }

    /// The settings the options say, read against `environment` for what they leave unset.
    func settings(environment: [String: String] = ProcessInfo.processInfo.environment) -> TransportSettings {
        var tls = TLSSettings()
        tls.trustRoots = TLSSettings.TrustRoots(file: caCertificateFile, directory: caCertificateDirectory)
        tls.clientIdentity = clientCertificate.map {
            TLSSettings.ClientIdentity(certificateChainFile: $0, privateKeyFile: clientKey)
        }
        tls.verifiesCertificates = !insecure
        tls.minimumProtocolVersion = tlsMinimum?.version ?? .tlsv12
        tls.allowsWeakCertificates = allowWeakCertificates

        let proxySettings = ProxyChoice.settings(proxy: proxy, noProxy: noProxy, environment: environment)
        var settings = TransportSettings(tls: tls, proxy: proxySettings, connectTimeout: connectTimeout?.duration)
        // validate() read them already.
        settings.connectionOverrides = (try? overrides) ?? ConnectionOverrides()
        return settings
    }

    /// The transport `make` makes with these options, after printing the `--insecure` warning.
    ///
    /// - Throws: `ValidationError` (exit status 64) naming the option when the file it names cannot
    ///   be used, or the setting cannot be honoured.
    func makeTransport(
        _ make: (TransportSettings) throws(TransportSettingsError) -> any HTTPTransport
    ) throws -> any HTTPTransport {
        if insecure {
            StandardStream.complain(
                "warning: --insecure: the server's certificate is not checked; anyone on the way can read and change this exchange"
            )
        }
        if let tlsMinimum, tlsMinimum.version < .tlsv12 {
            StandardStream.complain(
                "warning: --\(tlsMinimum.rawValue): \(tlsMinimum.version) is accepted; TLS before 1.2 signs its handshake with SHA-1 or MD5"
            )
        }
        if allowWeakCertificates && !insecure {
            StandardStream.complain(
                "warning: --allow-weak-certificates: a server key below 2048 bits or a SHA-1 or MD5 signature is accepted"
            )
        }
        do throws(TransportSettingsError) {
            return try make(settings())
        } catch {
            throw ValidationError(explain(error))
        }
    }

    /// A settings error in the words of the options that caused it.
    private func explain(_ error: TransportSettingsError) -> String {
        switch error.kind {
        case .unsupported:
            var given: [String] = []
            if caCertificateFile != nil { given.append("--cacert") }
            if caCertificateDirectory != nil { given.append("--capath") }
            if clientCertificate != nil { given.append("--cert") }
            if insecure { given.append("--insecure") }
            if let tlsMinimum { given.append("--\(tlsMinimum.rawValue)") }
            if allowWeakCertificates { given.append("--allow-weak-certificates") }
            if proxy != nil { given.append("--proxy") }
            if noProxy != nil { given.append("--noproxy") }
            if connectTimeout != nil { given.append("--connect-timeout") }
            if !resolve.isEmpty { given.append("--resolve") }
            if !connectTo.isEmpty { given.append("--connect-to") }
            let options = given.isEmpty ? "the environment's settings" : given.joined(separator: ", ")
            return "the HTTP client cannot honour \(options): \(error.detail)."
        case .unreadableFile, .invalidCredentials, .invalidProxy:
            return "\(error.detail)."
        }
    }

    private static func check(_ path: String, option: String, directory: Bool) throws {
        guard let file = SystemCall.fileStatus(path) else {
            throw ValidationError("\(option) \(path): no such \(directory ? "directory" : "file").")
        }
        guard file.isDirectory == directory else {
            throw ValidationError("\(option) \(path): \(directory ? "not a directory" : "a directory, not a file").")
        }
        guard file.isReadable else {
            throw ValidationError("\(option) \(path): cannot be read.")
        }
    }
}

/// curl's `--tlsv1.0` ... `--tlsv1.3`: the oldest TLS version accepted (one of them at most).
enum TLSMinimumOption: String, EnumerableFlag {
    case tlsv1 = "tlsv1.0"
    case tlsv11 = "tlsv1.1"
    case tlsv12 = "tlsv1.2"
    case tlsv13 = "tlsv1.3"

    var version: TLSProtocolVersion {
        switch self {
        case .tlsv1: .tlsv1
        case .tlsv11: .tlsv11
        case .tlsv12: .tlsv12
        case .tlsv13: .tlsv13
        }
    }

    static func name(for value: Self) -> NameSpecification { .customLong(value.rawValue) }

    static func help(for value: Self) -> ArgumentHelp? {
        switch value {
        case .tlsv1:
            "Accept TLS 1.0 and newer, as curl --tlsv1.0 (curl on Debian also needs --ciphers DEFAULT@SECLEVEL=0). By default a server that speaks nothing newer than 1.1 fails with exit status 35. A warning is printed."
        case .tlsv11: "Accept TLS 1.1 and newer, as curl --tlsv1.1. A warning is printed."
        case .tlsv12: "Accept TLS 1.2 and newer: the default."
        case .tlsv13: "Accept TLS 1.3 only, as curl --tlsv1.3."
        }
    }
}
