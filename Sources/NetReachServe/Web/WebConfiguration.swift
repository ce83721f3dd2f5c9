import NetReachSystem

/// `serve --web.config.file FILE`: TLS and basic authentication, in the web configuration file
/// every Prometheus exporter reads (exporter-toolkit's), so one file serves node_exporter and
/// netreach alike and Prometheus's scrape settings (`scheme: https`, `tls_config`, `basic_auth`)
/// work unchanged.
///
/// ```yaml
/// tls_server_config:
///   cert_file: serve.crt             # relative paths are relative to this file
///   key_file: serve.key
///   client_auth_type: RequireAndVerifyClientCert   # default NoClientCert
///   client_ca_file: clients.pem
///   min_version: TLS12               # the default; TLS10 ... TLS13
/// http_server_config:
///   headers:
///     Strict-Transport-Security: max-age=31536000
/// basic_auth_users:
///   prometheus: $2y$10$mDwo.lAisC94iLAyP81MCesa29IzH37oigHC/42V2pdJlUprsJPze
/// ```
///
/// Read as exporter-toolkit reads it: a key it does not know is an error, TLS is on when
/// `tls_server_config` names any certificate, key, client CA or client auth type, and the
/// passwords are bcrypt hashes (`$2a$`, `$2b$` or `$2y$`, as `htpasswd -B` writes them). The keys
/// exporter-toolkit knows and netreach does not do (`cipher_suites`, `curve_preferences`,
/// `client_allowed_sans`, `rate_limit`) are refused by name rather than ignored: each would make
/// the server stricter than it would be.
///
/// ```swift
/// let web = try WebConfiguration.read("/etc/netreach/web.yml")
/// print(web.tls == nil ? "plain HTTP" : "TLS", web.users.keys.sorted())
/// ```
package struct WebConfiguration: Sendable, Equatable {
    /// `tls_server_config`; `nil`: plain HTTP.
    package var tls: TLS?
    /// `basic_auth_users`: each user's bcrypt hash, as written; empty: no authentication.
    package var users: [String: String] = [:]
    /// `http_server_config.headers`: added to every response.
    package var headers: [String: String] = [:]

    /// The server's certificate and key, and what it asks of clients.
    package struct TLS: Sendable, Equatable {
        /// `cert_file` or `cert`: the certificate, then any intermediates, in PEM.
        package var certificate: PEM
        /// `key_file` or `key`: the certificate's private key, in PEM.
        package var key: PEM
        /// `client_auth_type`.
        package var clientAuth = ClientAuth.noClientCert
        /// `client_ca_file` or `client_ca`: the authorities a client's certificate is checked
        /// against; `nil`: the system's.
        package var clientCAs: PEM?
        /// `min_version`: TLS 1.2 unless the file says otherwise, as exporter-toolkit.
        package var minimumVersion = Version.tls12
        /// `max_version`.
        package var maximumVersion = Version.tls13
    }

    /// PEM text, from a file or written in the configuration itself.
    package enum PEM: Sendable, Equatable {
        case file(String)
        case text(String)
    }

    /// `client_auth_type`, with Go's `crypto/tls` meaning of each name.
    package enum ClientAuth: String, Sendable, CaseIterable {
        /// No certificate is asked for.
        case noClientCert = "NoClientCert"
        /// Asked for, not required, not checked.
        case requestClientCert = "RequestClientCert"
        /// Required, not checked.
        case requireAnyClientCert = "RequireAnyClientCert"
        /// Checked when one is sent.
        case verifyClientCertIfGiven = "VerifyClientCertIfGiven"
        /// Required and checked against the client CAs.
        case requireAndVerifyClientCert = "RequireAndVerifyClientCert"
    }

    /// `min_version` and `max_version`.
    package enum Version: String, Sendable, CaseIterable, Comparable {
        case tls10 = "TLS10"
        case tls11 = "TLS11"
        case tls12 = "TLS12"
        case tls13 = "TLS13"

        package static func < (lhs: Version, rhs: Version) -> Bool {
            allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
        }
    }

    /// No TLS, no users, no headers: what serve does without the flag.
    package init() {}

    /// A configuration file larger than this is refused: it is a few lines.
    static let maximumSize = 1 << 20

    /// Reads and checks the file at `path`; relative file names in it are taken from its directory.
    package static func read(_ path: String) throws(WebConfigurationError) -> WebConfiguration {
        let text: String
        do {
            text = try SystemCall.readConfigurationText(path, limit: maximumSize)
        } catch {
            switch error {
            case .cannotRead(let reason): throw .init(path, reason)
            case .notText: throw .init(path, "not UTF-8 text")
            }
        }
        do {
            return try WebConfiguration(yaml: text, directory: path.directoryName)
        } catch {
            throw .init(path, error.description)
        }
    }

    /// Parses the file's text; `directory` is where relative file names point.
    package init(yaml text: String, directory: String) throws(Invalid) {
        let root: YAMLNode?
        do {
            root = try YAMLReader.parse(text)
        } catch {
            throw Invalid("not YAML: \(error)")
        }
        // An empty file is a valid one: nothing configured, as exporter-toolkit.
        guard let root, !root.isNull else { return }
        let top = try Self.mapping(
            root, at: nil, keys: ["tls_server_config", "http_server_config", "basic_auth_users"])
        if let node = top["tls_server_config"] {
            tls = try Self.tls(node, directory: directory)
        }
        if let node = top["http_server_config"] {
            headers = try Self.headers(node)
        }
        if let node = top["basic_auth_users"] {
            users = try Self.users(node)
        }
    }

    /// Why the text is not a valid web configuration; its description is the sentence.
    package struct Invalid: Error, Sendable, CustomStringConvertible {
        package var description: String
        init(_ description: String) { self.description = description }
    }

    /// What exporter-toolkit reads and netreach refuses, and why.
    private static let unsupported: [String: String] = [
        "rate_limit": "is not supported by netreach serve (its --max-connections bounds clients)",
        "cipher_suites": "is not supported by netreach serve (TLS 1.2's suites are BoringSSL's defaults)",
        "curve_preferences": "is not supported by netreach serve",
        "client_allowed_sans": "is not supported by netreach serve; use a client CA of its own",
    ]

    /// `node` as a mapping whose keys are all in `keys`; the values by key.
    private static func mapping(
        _ node: YAMLNode, at parent: String?, keys: [String]
    ) throws(Invalid) -> [String: YAMLNode] {
        let place = parent.map { "\($0): " } ?? ""
        if node.scalar?.text.isEmpty == true || node.isNull { return [:] }
        guard let mapping = node.mapping else { throw Invalid("\(place)must be a mapping of keys to values") }
        var values: [String: YAMLNode] = [:]
        for entry in mapping {
            let key = entry.key.text
            let value = entry.value
            if let reason = unsupported[key] { throw Invalid("\(place)\(key) \(reason)") }
            guard keys.contains(key) else {
                throw Invalid("\(place)unknown key \"\(key)\"; the keys are \(keys.joined(separator: ", "))")
            }
            guard values[key] == nil else { throw Invalid("\(place)\(key) is given twice") }
            values[key] = value
        }
        return values
    }

    private static func text(_ node: YAMLNode?, _ key: String, in parent: String) throws(Invalid) -> String? {
        guard let node, !node.isNull else { return nil }
        guard let scalar = node.scalar else { throw Invalid("\(parent): \(key) must be text") }
        return scalar.text.isEmpty ? nil : scalar.text
    }

    private static func tls(_ node: YAMLNode, directory: String) throws(Invalid) -> TLS? {
        let here = "tls_server_config"
        let values = try mapping(
            node, at: here,
            keys: [
                "cert_file", "key_file", "cert", "key", "client_ca_file", "client_ca", "client_auth_type",
                "min_version", "max_version", "prefer_server_cipher_suites",
            ])
        func pem(file fileKey: String, text textKey: String) throws(Invalid) -> PEM? {
            let file = try text(values[fileKey], fileKey, in: here)
            let inline = try text(values[textKey], textKey, in: here)
            if file != nil, inline != nil { throw Invalid("\(here): give \(fileKey) or \(textKey), not both") }
            if let file { return .file(file.hasPrefix("/") ? file : directory + "/" + file) }
            return inline.map(PEM.text)
        }
        let certificate = try pem(file: "cert_file", text: "cert")
        let key = try pem(file: "key_file", text: "key")
        let clientCAs = try pem(file: "client_ca_file", text: "client_ca")
        let authName = try text(values["client_auth_type"], "client_auth_type", in: here)
        if let bool = values["prefer_server_cipher_suites"], bool.bool == nil {
            throw Invalid("\(here): prefer_server_cipher_suites must be true or false")
        }
        // exporter-toolkit's rule: any of these turns TLS on; then a certificate and key are needed.
        guard certificate != nil || key != nil || clientCAs != nil || authName != nil else {
            for versionKey in ["min_version", "max_version"] where values[versionKey] != nil {
                throw Invalid("\(here): \(versionKey) is given but TLS is off (no cert_file or key_file)")
            }
            return nil
        }
        guard let certificate else { throw Invalid("\(here): missing one of cert or cert_file") }
        guard let key else { throw Invalid("\(here): missing one of key or key_file") }
        var tls = TLS(certificate: certificate, key: key, clientCAs: clientCAs)
        if let authName {
            // exporter-toolkit still reads RequireClientCert, an older name of RequireAnyClientCert.
            guard let auth = authName == "RequireClientCert" ? .requireAnyClientCert : ClientAuth(rawValue: authName)
            else {
                throw Invalid(
                    "\(here): client_auth_type \"\(authName)\" is not one of "
                        + ClientAuth.allCases.map(\.rawValue).joined(separator: ", "))
            }
            tls.clientAuth = auth
        }
        if clientCAs != nil, tls.clientAuth == .noClientCert {
            throw Invalid("\(here): client CAs are given without a client_auth_type that asks for a certificate")
        }
        for (versionKey, keyPath) in [("min_version", \TLS.minimumVersion), ("max_version", \TLS.maximumVersion)] {
            guard let name = try text(values[versionKey], versionKey, in: here) else { continue }
            guard let version = Version(rawValue: name) else {
                throw Invalid(
                    "\(here): \(versionKey) \"\(name)\" is not one of "
                        + Version.allCases.map(\.rawValue).joined(separator: ", "))
            }
            tls[keyPath: keyPath] = version
        }
        guard tls.minimumVersion <= tls.maximumVersion else {
            throw Invalid(
                "\(here): min_version \(tls.minimumVersion.rawValue) is above max_version \(tls.maximumVersion.rawValue)"
            )
        }
        return tls
    }

    /// exporter-toolkit's list: the headers it lets a file set, and the values it allows (none
    /// listed: any).
    private static let allowedHeaders: [String: [String]] = [
        "Strict-Transport-Security": [],
        "X-Content-Type-Options": ["nosniff"],
        "X-Frame-Options": ["deny", "sameorigin"],
        "X-XSS-Protection": [],
        "Content-Security-Policy": [],
    ]

    private static func headers(_ node: YAMLNode) throws(Invalid) -> [String: String] {
        let here = "http_server_config"
        // http2 is accepted for the files written for Go exporters; serve speaks HTTP/1.1.
        let values = try mapping(node, at: here, keys: ["headers", "http2"])
        if let http2 = values["http2"], http2.bool == nil { throw Invalid("\(here): http2 must be true or false") }
        guard let node = values["headers"] else { return [:] }
        let headers = try mapping(node, at: "\(here).headers", keys: allowedHeaders.keys.sorted())
        var result: [String: String] = [:]
        for (name, valueNode) in headers {
            guard let value = try text(valueNode, name, in: "\(here).headers") else { continue }
            guard value.allSatisfy({ $0 != "\r" && $0 != "\n" }) else {
                throw Invalid("\(here).headers: \(name) must be one line")
            }
            let allowed = allowedHeaders[name] ?? []
            guard allowed.isEmpty || allowed.contains(value) else {
                throw Invalid(
                    "\(here).headers: \(name) must be one of \(allowed.joined(separator: ", ")), not \"\(value)\"")
            }
            result[name] = value
        }
        return result
    }

    private static func users(_ node: YAMLNode) throws(Invalid) -> [String: String] {
        let here = "basic_auth_users"
        if node.isNull || node.scalar?.text.isEmpty == true { return [:] }
        guard let mapping = node.mapping else {
            throw Invalid("\(here) must be a mapping of user names to bcrypt hashes")
        }
        var users: [String: String] = [:]
        for entry in mapping {
            let name = entry.key.text
            guard !name.isEmpty else { throw Invalid("\(here): a user name must be text") }
            guard !name.contains(":") else {
                throw Invalid("\(here): user \"\(name)\" has a colon, which basic authentication cannot send")
            }
            guard users[name] == nil else { throw Invalid("\(here): user \"\(name)\" is given twice") }
            guard let hash = entry.value.scalar?.text else {
                throw Invalid("\(here): \(name)'s password hash must be text")
            }
            if let problem = BcryptHash.problem(hash) { throw Invalid("\(here): \(name)'s password hash \(problem)") }
            users[name] = hash
        }
        return users
    }
}

/// Why `--web.config.file` cannot be used: the file, and the reason.
package struct WebConfigurationError: Error, Sendable, CustomStringConvertible {
    package var path: String
    package var reason: String

    init(_ path: String, _ reason: String) {
        self.path = path
        self.reason = reason
    }

    package var description: String { "\(path): \(reason)" }
}

/// What a bcrypt hash in `basic_auth_users` must look like: `$2a$`, `$2b$` or `$2y$`, a cost of
/// 04 to 31, and 53 characters of bcrypt's base64 (22 of salt, 31 of hash).
enum BcryptHash {
    private static let alphabet = Set("./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")

    /// Why `hash` is not a bcrypt hash netreach can check; `nil` when it is.
    static func problem(_ hash: String) -> String? {
        let characters = Array(hash)
        guard characters.count == 60, characters[0] == "$", characters[1] == "2", characters[3] == "$",
            characters[6] == "$", let cost = Int(String(characters[4...5])), characters[4...5].allSatisfy(\.isASCII)
        else {
            return "is not a bcrypt hash ($2y$10$ and 53 more characters, as htpasswd -B writes)"
        }
        switch characters[2] {
        case "a", "b", "y": break
        case "x": return "is a $2x$ hash (crypt_blowfish's old bug, kept for compatibility): make a new one"
        default: return "has an unknown bcrypt version $2\(characters[2])$"
        }
        guard (4...31).contains(cost) else { return "has cost \(cost); bcrypt's costs are 04 to 31" }
        guard characters[7...].allSatisfy(alphabet.contains) else { return "has a character outside bcrypt's base64" }
        return nil
    }

    /// `hash` as the bcrypt in C checks it: `$2y$` (PHP's and htpasswd's name) is `$2b$`, the
    /// same algorithm under OpenBSD's name, which is the only one it knows besides `$2a$`.
    static func normalized(_ hash: String) -> String {
        hash.hasPrefix("$2y$") ? "$2b$" + hash.dropFirst(4) : hash
    }

    /// The cost a valid hash names.
    static func cost(_ hash: String) -> Int {
        Int(hash.dropFirst(4).prefix(2)) ?? 10
    }
}
