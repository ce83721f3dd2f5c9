import Foundation

/// Where one request goes, worked out once: the URL that ``Response`` and ``WaitingEvent`` carry, and
/// the scheme, authority and request target of the head handed to the transport.
///
/// Foundation's URL parsing costs microseconds per call here, which is most of what the service
/// adds to a request on loopback (Benchmarks/RESULTS.md, section 7). So the base URL is split once,
/// when the service is made, and a plain path such as `/v1/items?page=2` is joined to it as text:
/// one URL parse per request instead of three. Anything unusual (dot segments, a fragment, a
/// scheme- or network-path reference, characters that need encoding) goes the general way, through
/// `URL(string:relativeTo:)` and `URLComponents`; both ways give the same result (tested).
struct ResolvedTarget: Sendable, Equatable {
    var url: URL
    var scheme: String
    var authority: String
    /// Path and query, percent-encoded, as the head's `:path`; never empty.
    var pathAndQuery: String

    /// The service's base URL, split once.
    struct Base: Sendable {
        let url: URL
        /// `nil` when the base cannot be joined as text (user info, not http(s), no host).
        let parts: Parts?

        struct Parts: Sendable {
            let scheme: String
            let authority: String
            /// `scheme://authority`, the prefix of every joined URL.
            let origin: String
            /// The base path up to and including its last `/`: what a relative path is joined to.
            let directory: String
        }

        init(_ url: URL) {
            self.url = url
            guard let components = URLComponents(url: url, resolvingAgainstBaseURL: true),
                  components.percentEncodedUser == nil, components.percentEncodedPassword == nil,
                  let scheme = components.scheme, Self.isHTTP(scheme),
                  let authority = ResolvedTarget.authority(of: components) else {
                parts = nil
                return
            }
            let path = components.percentEncodedPath
            let directory = path.lastIndex(of: "/").map { String(path[...$0]) } ?? "/"
            parts = Parts(scheme: scheme, authority: authority, origin: "\(scheme)://\(authority)", directory: directory)
        }

        static func isHTTP(_ scheme: String) -> Bool {
            let lowercased = scheme.lowercased()
            return lowercased == "http" || lowercased == "https"
        }
    }

    /// Resolves `target` (with `queryItems` appended to its query) against `base`; `nil` if the
    /// result is not an absolute http or https URL with a host.
    static func resolve(_ target: Request.Target, queryItems: [URLQueryItem], base: Base?) -> ResolvedTarget? {
        if case .path(let path) = target, let parts = base?.parts, let joined = join(path, queryItems: queryItems, to: parts) {
            return joined
        }
        return resolveGenerally(target, queryItems: queryItems, baseURL: base?.url)
    }

    /// The general way, for every target: Foundation resolves and parses.
    static func resolveGenerally(_ target: Request.Target, queryItems: [URLQueryItem], baseURL: URL?) -> ResolvedTarget? {
        let resolved: URL?
        switch target {
        case .url(let url): resolved = url
        case .path(let path):
            guard let baseURL else { return nil }
            resolved = URL(string: path, relativeTo: baseURL)?.absoluteURL
        }
        guard let resolved, var components = URLComponents(url: resolved, resolvingAgainstBaseURL: true),
              let scheme = components.scheme, Base.isHTTP(scheme),
              let authority = authority(of: components) else { return nil }
        if !queryItems.isEmpty {
            // Only characters a query may hold, so URLComponents accepts it as already encoded.
            components.percentEncodedQuery = query(components.percentEncodedQuery, appending: queryItems)
        }
        guard let url = components.url else { return nil }
        var pathAndQuery = components.percentEncodedPath
        if pathAndQuery.isEmpty { pathAndQuery = "/" }
        if let query = components.percentEncodedQuery { pathAndQuery += "?\(query)" }
        return ResolvedTarget(url: url, scheme: scheme, authority: authority, pathAndQuery: pathAndQuery)
    }

    /// The fast way: a path made only of characters a URL path or query may hold as they are, with
    /// no dot segments, fragment or scheme, joined to the base as text. `nil` sends it the general way.
    private static func join(_ path: String, queryItems: [URLQueryItem], to base: Base.Parts) -> ResolvedTarget? {
        guard isPlain(path) else { return nil }
        let pathPart: Substring
        var existingQuery: String?
        if let mark = path.firstIndex(of: "?") {
            pathPart = path[..<mark]
            existingQuery = String(path[path.index(after: mark)...])
        } else {
            pathPart = path[...]
        }
        var pathAndQuery = pathPart.hasPrefix("/") ? String(pathPart) : base.directory + pathPart
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
        guard !pathBytes.isEmpty else { return false }   // "?q" keeps the base's whole path, not its directory
        let firstSlash = pathBytes.firstIndex(of: UInt8(ascii: "/")) ?? queryMark
        if pathBytes[..<firstSlash].contains(UInt8(ascii: ":")) { return false }
        for segment in pathBytes.split(separator: UInt8(ascii: "/"))
        where segment.elementsEqual(".".utf8) || segment.elementsEqual("..".utf8) {
            return false
        }
        var rest = bytes[...]
        while let byte = rest.popFirst() {
            switch byte {
            case UInt8(ascii: "%"):
                guard let high = rest.popFirst(), let low = rest.popFirst(), isHexDigit(high), isHexDigit(low) else { return false }
            case UInt8(ascii: ":"), UInt8(ascii: "/"), UInt8(ascii: "?"):
                continue
            default:
                guard isUnencoded(byte) else { return false }
            }
        }
        return true
    }

    /// Unreserved characters, sub-delimiters and `@` (RFC 3986 `pchar` without `%` and `:`, which
    /// the caller checks).
    private static func isUnencoded(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"),
             UInt8(ascii: "!"), UInt8(ascii: "$"), UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "("), UInt8(ascii: ")"),
             UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: ","), UInt8(ascii: ";"), UInt8(ascii: "="), UInt8(ascii: "@"):
            true
        default:
            false
        }
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"), UInt8(ascii: "A")...UInt8(ascii: "F"): true
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

    /// `host[:port]`, an IPv6 host in brackets; `nil` without a host, or with a port no TCP
    /// connection can use (Foundation parses `:99999`, and AsyncHTTPClient traps on it).
    static func authority(of components: URLComponents) -> String? {
        guard let host = components.host, !host.isEmpty else { return nil }
        if let port = components.port, !(1...65535).contains(port) { return nil }
        let bracketed = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        return components.port.map { "\(bracketed):\($0)" } ?? bracketed
    }
}
