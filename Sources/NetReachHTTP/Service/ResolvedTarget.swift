import HTTPTypes
import NetReachSystem

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Where one request goes, worked out once: the URL that ``Response`` and ``WaitingEvent`` carry, and
/// the scheme, authority and request target of the head handed to the transport.
///
/// Foundation's URL parsing costs microseconds per call here, which is most of what the service
/// adds to a request on loopback (Benchmarks/RESULTS.md, section 7). So the base URL is split once,
/// when the service is made, and a plain path such as `/v1/items?page=2` is joined to it as text:
/// one URL parse per request instead of three. Anything unusual (dot segments, a fragment, a
/// scheme- or network-path reference, characters that need encoding) goes the general way, through
/// `URL(string:relativeTo:)` and `URLComponents`; both ways give the same result (tested).
///
/// One origin, whichever part is read: the authority handed to the transport, the host a transport
/// connects to (Foundation's `URL.host` of `scheme://authority/...`) and ``url`` always name the
/// same host and port, because ``url`` is built from ``authority`` and the authority is read from the
/// URL's text by ``Origin`` and checked against Foundation's reading. A URL whose reading is in any
/// doubt resolves to `nil` (the service throws `invalidURL`):
///
/// - a host with any `%` in it: Foundation connects to the *decoded* host, so
///   `http://evil.test%2F.trusted.example/x` would reach `evil.test/.trusted.example` while naming
///   another; no legitimate host needs percent-encoding;
/// - a host that is not ASCII after Foundation's reading, an IP literal that is not an IPv6 address
///   (IPvFuture, `[::1::2]`), a zone identifier with anything but unreserved characters;
/// - a port outside 1...65535 (`:0`, `:65536`, twenty digits); an empty port (`http://a:/`) is no port;
/// - a `.path` target with a `%` not followed by two hex digits (`%zz`, `%4`, `100%`): Foundation
///   would send it as `%25zz`, which is a guess at what was meant;
/// - user info that cannot become Basic credentials (see ``BasicCredentials``).
///
/// Internationalized host names: `URL(string:)` in swift-foundation (Linux) already applies IDNA
/// (UTS #46) when it parses, so `https://bücher.example/` has the text, `URL.host` and
/// `URLComponents.encodedHost` `xn--bcher-kva.example`, and that ASCII form is what is sent. Only
/// `URLComponents.host` decodes it back to `bücher.example`, which is why the authority is never
/// built from it. A Unicode host that reaches ``Origin`` unconverted (percent-encoded UTF-8 such as
/// `b%C3%BCcher.example`) is rejected rather than converted here: converting correctly needs the
/// UTS #46 mapping as well as Punycode, and a second converter that disagrees with Foundation's would
/// itself split the origin.
struct ResolvedTarget: Sendable, Equatable {
    /// `scheme://authority` followed by ``pathAndQuery`` and the fragment, if any: what ``Response``
    /// and ``WaitingEvent`` carry. Never holds user info, so it can be logged.
    var url: URL
    /// `http` or `https`, lowercase.
    var scheme: String
    /// `host[:port]`: an ASCII host (an IDN as Punycode, an IPv6 address in brackets with any zone
    /// as `%25zone`) and a port in 1...65535. Never holds user info.
    var authority: String
    /// Path and query, percent-encoded, as the head's `:path`; never empty, starts with `/`.
    var pathAndQuery: String
    /// The user info of the URL that names the host, percent-decoded, for a Basic `Authorization`
    /// header; `nil` without user info. A relative path joined to a base with user info keeps the
    /// base's credentials; a network-path reference (`//other.test/x`) or an absolute URL does not.
    var credentials: BasicCredentials? = nil

    /// A user name and password taken from a URL's user info (`http://user:pa%40ss@host/` gives
    /// `user` and `pa@ss`), for a Basic `Authorization` header (RFC 7617). A missing password is
    /// empty (`http://user@host/`); user info with neither (`http://@host/`, `http://:@host/`) is
    /// no credentials at all.
    ///
    /// User info that Basic cannot carry makes the URL unresolvable: a user name with a `:` (the
    /// server would split it there), a control character in either part (RFC 7617 §2), or
    /// percent-encoding that is not UTF-8.
    ///
    /// Its descriptions never show the password, so logging a ``ResolvedTarget`` does not leak it.
    struct BasicCredentials: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
        var user: String
        var password: String

        init(user: String, password: String) {
            self.user = user
            self.password = password
        }

        /// Reads user info as it stands in a URL (`user:pa%40ss`): split at the first `:`, each part
        /// percent-decoded; `nil` if Basic cannot carry it.
        init?(userInfo: Substring) {
            let colon = userInfo.firstIndex(of: ":")
            let rawUser = colon.map { userInfo[..<$0] } ?? userInfo
            let rawPassword = colon.map { userInfo[userInfo.index(after: $0)...] } ?? ""
            guard let user = rawUser.percentDecoded(), let password = rawPassword.percentDecoded(),
                !user.contains(":"), !Self.hasControlCharacter(user), !Self.hasControlCharacter(password)
            else { return nil }
            self.init(user: user, password: password)
        }

        private static func hasControlCharacter(_ text: String) -> Bool {
            text.unicodeScalars.contains { $0.properties.generalCategory == .control }
        }

        var description: String { "BasicCredentials(user: \(user.debugDescription), password: <redacted>)" }
        var debugDescription: String { description }
    }

    /// The service's base URL, split once.
    struct Base: Sendable {
        let url: URL
        /// `nil` when the base cannot be joined as text (user info, not http(s), no host, anything
        /// ``Origin`` rejects).
        let parts: Parts?

        /// The pieces of the base that a plain path is joined to as text.
        struct Parts: Sendable {
            /// `http` or `https`, lowercase.
            let scheme: String
            let authority: String
            /// `scheme://authority`, the prefix of every joined URL.
            let origin: String
            /// The base path up to and including its last `/`: what a relative path is joined to.
            /// `nil` when it holds a `.` or `..` segment, which RFC 3986 (§5.2.4) removes when a
            /// relative path is joined: such joins go the general way, which removes them.
            let directory: String?
        }

        init(_ url: URL) {
            self.url = url
            guard let components = URLComponents(url: url, resolvingAgainstBaseURL: true),
                let origin = Origin(of: url), origin.userInfo == nil
            else {
                parts = nil
                return
            }
            let path = components.percentEncodedPath
            let directory = path.lastIndex(of: "/").map { String(path[...$0]) } ?? "/"
            parts = Parts(
                scheme: origin.scheme, authority: origin.authority, origin: "\(origin.scheme)://\(origin.authority)",
                directory: ResolvedTarget.hasDotSegment(directory) ? nil : directory)
        }

        static func isHTTP(_ scheme: String) -> Bool {
            let lowercased = scheme.lowercased()
            return lowercased == "http" || lowercased == "https"
        }
    }

    /// Resolves `target` (with `queryItems` appended to its query) against `base`; `nil` if the
    /// result is not an absolute http or https URL that can be sent as it reads (see the type's
    /// documentation for everything that makes it `nil`).
    static func resolve(_ target: Request.Target, queryItems: [URLQueryItem], base: Base?) -> ResolvedTarget? {
        if case .path(let path) = target, let parts = base?.parts,
            let joined = join(path, queryItems: queryItems, to: parts)
        {
            return joined
        }
        return resolveGenerally(target, queryItems: queryItems, baseURL: base?.url)
    }

    /// The general way, for every target: Foundation resolves and parses, ``Origin`` reads the
    /// authority from the result.
    static func resolveGenerally(_ target: Request.Target, queryItems: [URLQueryItem], baseURL: URL?) -> ResolvedTarget?
    {
        let resolved: URL?
        switch target {
        case .url(let url): resolved = url
        case .path(let path):
            // Foundation would quietly send `%zz` as `%25zz`; the fast way refuses it, and so does this one.
            guard let baseURL, hasValidPercentEncoding(path) else { return nil }
            resolved = URL(string: path, relativeTo: baseURL)?.absoluteURL
        }
        guard let resolved, hasValidPercentEncoding(resolved.absoluteString),
            let components = URLComponents(url: resolved, resolvingAgainstBaseURL: true),
            let origin = Origin(of: resolved)
        else { return nil }
        var credentials: BasicCredentials?
        if let userInfo = origin.userInfo {
            guard let decoded = BasicCredentials(userInfo: userInfo) else { return nil }
            if !decoded.user.isEmpty || !decoded.password.isEmpty { credentials = decoded }
        }
        var pathAndQuery = components.percentEncodedPath
        if pathAndQuery.isEmpty { pathAndQuery = "/" }
        if let query = query(components.percentEncodedQuery, appending: queryItems) { pathAndQuery += "?\(query)" }
        let fragment = components.percentEncodedFragment.map { "#\($0)" } ?? ""
        guard pathAndQuery.hasPrefix("/"), isVisibleASCII(pathAndQuery), isVisibleASCII(fragment),
            let url = URL(string: "\(origin.scheme)://\(origin.authority)\(pathAndQuery)\(fragment)"),
            url.host == origin.connectedHost
        else { return nil }
        return ResolvedTarget(
            url: url, scheme: origin.scheme, authority: origin.authority, pathAndQuery: pathAndQuery,
            credentials: credentials)
    }

    /// The fast way: a path made only of characters a URL path or query may hold as they are, with
    /// no dot segments, fragment or scheme, joined to the base as text. `nil` sends it the general way.
    static func join(_ path: String, queryItems: [URLQueryItem], to base: Base.Parts) -> ResolvedTarget? {
        guard isPlain(path) else { return nil }
        let pathPart: Substring
        var existingQuery: String?
        if let mark = path.firstIndex(of: "?") {
            pathPart = path[..<mark]
            existingQuery = String(path[path.index(after: mark)...])
        } else {
            pathPart = path[...]
        }
        var pathAndQuery: String
        if pathPart.hasPrefix("/") {
            pathAndQuery = String(pathPart)
        } else {
            guard let directory = base.directory else { return nil }
            pathAndQuery = directory + pathPart
        }
        if let query = query(existingQuery, appending: queryItems) { pathAndQuery += "?\(query)" }
        guard let url = URL(string: base.origin + pathAndQuery) else { return nil }
        return ResolvedTarget(url: url, scheme: base.scheme, authority: base.authority, pathAndQuery: pathAndQuery)
    }

    /// Whether `path` can be joined as text: a path before any query; no `//` start (another host), no `:` before
    /// the first `/` (a scheme), no `.` or `..` segment, no `#`; every byte one a path or query may
    /// hold unencoded, and every `%` followed by two hex digits.
    static func isPlain(_ path: String) -> Bool {
        let bytes = path.utf8
        guard !bytes.isEmpty, !path.hasPrefix("//") else { return false }
        let queryMark = bytes.firstIndex(of: UInt8(ascii: "?")) ?? bytes.endIndex
        let pathBytes = bytes[..<queryMark]
        guard !pathBytes.isEmpty else { return false } // "?q" keeps the base's whole path, not its directory
        let firstSlash = pathBytes.firstIndex(of: UInt8(ascii: "/")) ?? queryMark
        if pathBytes[..<firstSlash].contains(UInt8(ascii: ":")) { return false }
        if hasDotSegment(pathBytes) { return false }
        var rest = bytes[...]
        while let byte = rest.popFirst() {
            switch byte {
            case UInt8(ascii: "%"):
                guard let high = rest.popFirst(), let low = rest.popFirst(), isHexDigit(high), isHexDigit(low) else {
                    return false
                }
            case UInt8(ascii: ":"), UInt8(ascii: "/"), UInt8(ascii: "?"):
                continue
            default:
                guard isUnencoded(byte) else { return false }
            }
        }
        return true
    }

    /// Whether a `/`-separated path has a segment that is exactly `.` or `..`.
    static func hasDotSegment<Path: Collection<UInt8>>(_ path: Path) -> Bool {
        path.split(separator: UInt8(ascii: "/")).contains { $0.elementsEqual(".".utf8) || $0.elementsEqual("..".utf8) }
    }

    static func hasDotSegment(_ path: String) -> Bool { hasDotSegment(path.utf8) }

    /// Whether every `%` in `text` starts a percent-encoded byte (`%` and two hex digits).
    static func hasValidPercentEncoding(_ text: String) -> Bool {
        var rest = text.utf8[...]
        while let percent = rest.firstIndex(of: UInt8(ascii: "%")) {
            rest = rest[rest.index(after: percent)...]
            guard let high = rest.popFirst(), let low = rest.popFirst(), isHexDigit(high), isHexDigit(low) else {
                return false
            }
        }
        return true
    }

    /// Printable ASCII only: no space, no control character, nothing a head or a log line could
    /// misread.
    private static func isVisibleASCII(_ text: String) -> Bool {
        text.utf8.allSatisfy { (0x21...0x7E).contains($0) }
    }

    /// Unreserved characters, sub-delimiters and `@` (RFC 3986 `pchar` without `%` and `:`, which
    /// the caller checks).
    private static func isUnencoded(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "@"): true
        default: isRegNameCharacter(byte)
        }
    }

    /// Unreserved characters and sub-delimiters: what an RFC 3986 `reg-name` may hold apart from
    /// percent-encoding.
    private static func isRegNameCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"),
            UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("),
            UInt8(ascii: ")"),
            UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "="):
            true
        default:
            isAlphanumeric(byte)
        }
    }

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"): true
        default: isAlphanumeric(byte)
        }
    }

    private static func isAlphanumeric(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        default: false
        }
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"),
            UInt8(ascii: "A")...UInt8(ascii: "F"):
            true
        default: false
        }
    }

    /// `existing` (already encoded, kept as it is) followed by `items`, each name and value
    /// percent-encoded so that only unreserved characters and `!$'()*,;:@/?` stay as they are: `&`,
    /// `=` and `+` are encoded, so a server reads a `+` in a value as a plus, not a space.
    static func query(_ existing: String?, appending items: [URLQueryItem]) -> String? {
        guard !items.isEmpty else { return existing }
        let encoded = items.map { item in
            item.value.map { "\(encode(item.name))=\(encode($0))" } ?? encode(item.name)
        }.joined(separator: "&")
        guard let existing, !existing.isEmpty else { return encoded }
        return "\(existing)&\(encoded)"
    }

    private static func encode(_ text: String) -> String {
        let hex = Array("0123456789ABCDEF".utf8)
        var out = [UInt8]()
        out.reserveCapacity(text.utf8.count)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "&"), UInt8(ascii: "="), UInt8(ascii: "+"):
                out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
            case UInt8(ascii: ":"), UInt8(ascii: "/"), UInt8(ascii: "?"):
                out.append(byte)
            case _ where isUnencoded(byte):
                out.append(byte)
            default:
                out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Scheme, host, port and user info of an absolute http(s) URL, read from its text (after
    /// Foundation's parsing, so an IDN is already Punycode) and checked against what Foundation
    /// connects to; `nil` for anything that cannot be sent as it reads (see ``ResolvedTarget``).
    struct Origin: Sendable, Equatable {
        /// `http` or `https`, lowercase.
        let scheme: String
        /// `host[:port]` as sent, without user info.
        let authority: String
        /// The host as Foundation's `URL.host` reports it, which is what a transport connects to:
        /// the authority's host without brackets, a zone's `%25` as `%`.
        let connectedHost: String
        let port: Int?
        /// Everything before the authority's last `@`, still percent-encoded; `nil` without an `@`.
        let userInfo: Substring?

        init?(of url: URL) {
            let text = url.absoluteString
            guard let colon = text.firstIndex(of: ":"), Base.isHTTP(String(text[..<colon])) else { return nil }
            let afterScheme = text[text.index(after: colon)...]
            guard afterScheme.hasPrefix("//") else { return nil }
            let start = afterScheme.index(afterScheme.startIndex, offsetBy: 2)
            let end = afterScheme[start...].firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? afterScheme.endIndex
            let rawAuthority = afterScheme[start..<end]

            var hostAndPort = rawAuthority
            if let at = rawAuthority.lastIndex(of: "@") {
                userInfo = rawAuthority[..<at]
                hostAndPort = rawAuthority[rawAuthority.index(after: at)...]
            } else {
                userInfo = nil
            }
            let host: Substring
            let portText: Substring
            if hostAndPort.hasPrefix("[") {
                guard let close = hostAndPort.firstIndex(of: "]") else { return nil }
                host = hostAndPort[...close]
                let rest = hostAndPort[hostAndPort.index(after: close)...]
                guard rest.isEmpty || rest.hasPrefix(":") else { return nil }
                portText = rest.dropFirst()
                guard let connected = Self.ipLiteral(host.dropFirst().dropLast()) else { return nil }
                connectedHost = connected
            } else {
                let colon = hostAndPort.firstIndex(of: ":") ?? hostAndPort.endIndex
                host = hostAndPort[..<colon]
                portText = hostAndPort[colon...].dropFirst()
                guard !host.isEmpty, host.utf8.allSatisfy(ResolvedTarget.isRegNameCharacter) else { return nil }
                connectedHost = String(host)
            }
            if portText.isEmpty {
                port = nil
            } else {
                guard let number = Self.port(portText) else { return nil }
                port = number
            }
            // Foundation must read the same host and port, or the transport would connect elsewhere.
            guard url.host == connectedHost, url.port == port else { return nil }
            scheme = text[..<colon].lowercased()
            authority = port.map { "\(host):\($0)" } ?? String(host)
        }

        /// 1...65535 from decimal digits (leading zeros allowed, as RFC 3986 `port = *DIGIT` does).
        private static func port(_ text: Substring) -> Int? {
            var value = 0
            for byte in text.utf8 {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
                if value > 65535 { return nil }
            }
            return value >= 1 ? value : nil
        }

        /// The inside of `[...]`: an IPv6 address, optionally with `%25` and a zone identifier of
        /// unreserved characters (RFC 6874); returns it as `URL.host` reports it (`fe80::1%lo`).
        private static func ipLiteral(_ text: Substring) -> String? {
            var address = text
            var zone: Substring?
            if let percent = text.firstIndex(of: "%") {
                address = text[..<percent]
                let rest = text[percent...]
                guard rest.hasPrefix("%25") else { return nil }
                let name = rest.dropFirst(3)
                guard !name.isEmpty, name.utf8.allSatisfy(ResolvedTarget.isUnreserved) else { return nil }
                zone = name
            }
            guard isIPv6Address(address) else { return nil }
            return zone.map { "\(address)%\($0)" } ?? String(address)
        }

        /// RFC 3986 `IPv6address`: eight 16-bit pieces of one to four hex digits, the last two
        /// possibly written as an IPv4 address, one run of them possibly elided as `::`.
        static func isIPv6Address(_ text: Substring) -> Bool {
            let halves = text.split(separator: "::", maxSplits: 1, omittingEmptySubsequences: false)
            let elided = halves.count == 2
            let head = halves[0].isEmpty ? [] : halves[0].split(separator: ":", omittingEmptySubsequences: false)
            let tail =
                elided && !halves[1].isEmpty ? halves[1].split(separator: ":", omittingEmptySubsequences: false) : []
            let pieces = head + tail
            var count = 0
            for (index, piece) in pieces.enumerated() {
                if index == pieces.count - 1, piece.contains("."), !(elided && tail.isEmpty) {
                    guard isIPv4Address(piece) else { return false }
                    count += 2
                } else {
                    guard (1...4).contains(piece.utf8.count), piece.utf8.allSatisfy(ResolvedTarget.isHexDigit) else {
                        return false
                    }
                    count += 1
                }
            }
            return elided ? count <= 7 : count == 8
        }

        /// RFC 3986 `IPv4address`: four decimal octets, no leading zeros.
        static func isIPv4Address(_ text: Substring) -> Bool {
            let octets = text.split(separator: ".", omittingEmptySubsequences: false)
            return octets.count == 4
                && octets.allSatisfy { octet in
                    (1...3).contains(octet.utf8.count)
                        && octet.utf8.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }
                        && (octet.utf8.count == 1 || octet.first != "0") && Int(octet).map { $0 <= 255 } == true
                }
        }
    }
}

extension HTTPRequest {
    /// A GET of `url` as the transports take it (an ASCII host, path and query percent-encoded),
    /// with the host name alone (no port; an IPv6 address without brackets); `nil` when `url`
    /// cannot be sent. Connectivity probes are made this way.
    package static func get(_ url: URL) -> (head: HTTPRequest, host: String)? {
        guard let target = ResolvedTarget.resolve(.url(url), queryItems: [], base: nil) else { return nil }
        let head = HTTPRequest(
            method: .get, scheme: target.scheme, authority: target.authority, path: target.pathAndQuery)
        var host = Substring(target.authority)
        if host.hasPrefix("["), let close = host.firstIndex(of: "]") {
            host = host[host.index(after: host.startIndex)..<close]
        } else if let colon = host.lastIndex(of: ":") {
            host = host[..<colon]
        }
        return (head, String(host))
    }
}
