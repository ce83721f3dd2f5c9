import NetReach

/// Where connections go instead of the URL's host and port: curl's `--resolve` and
/// `--connect-to`. The request itself does not change: its `Host` field, the TLS server name and
/// the name the server's certificate must carry stay the URL's host. Every connection is looked
/// up, so a redirect to a host and port that an entry names goes where the entry says too.
///
/// An entry of ``connectTo`` that matches the URL's host and port (the first that does) gives the
/// host and port to connect to; an entry of ``resolve`` for that host and port (or for `*` and
/// that port) then gives the addresses, tried in order; without one, the host is looked up as
/// usual.
///
/// Through a proxy neither applies: the proxy connects to the URL's host (as curl, for `--resolve`;
/// curl applies `--connect-to` to its `CONNECT`, which is not done here).
///
/// ```swift
/// var settings = TransportSettings()
/// settings.connectionOverrides = try ConnectionOverrides(
///     resolve: ["api.example.com:443:127.0.0.1"], connectTo: ["old.example.com:443:new.example.com:8443"])
/// settings.connectionOverrides.target(host: "api.example.com", port: 443)?.addresses   // ["127.0.0.1"]
/// ```
public struct ConnectionOverrides: Sendable, Hashable {
    /// Addresses for a host and port, as `--resolve HOST:PORT:ADDR[,ADDR]...` gives them.
    public struct Resolve: Sendable, Hashable {
        /// The host name, lower case, or `*` for any host (used when no entry names the host).
        public var host: String
        /// The port the entry is for: connections to another port are not changed.
        public var port: Int
        /// Numeric IPv4 or IPv6 addresses (no brackets), tried in order.
        public var addresses: [String]

        public init(host: String, port: Int, addresses: [String]) {
            self.host = host.lowercased()
            self.port = port
            self.addresses = addresses
        }
    }

    /// Another host and port to connect to, as `--connect-to HOST1:PORT1:HOST2:PORT2` gives them.
    public struct ConnectTo: Sendable, Hashable {
        /// The URL host it applies to (lower case, an IPv6 address without brackets); `nil`: any.
        public var host: String?
        /// The URL port it applies to; `nil`: any.
        public var port: Int?
        /// The host to connect to (an IPv6 address without brackets); `nil`: the URL's.
        public var targetHost: String?
        /// The port to connect to; `nil`: the URL's.
        public var targetPort: Int?

        public init(host: String?, port: Int?, targetHost: String?, targetPort: Int?) {
            self.host = host?.lowercased()
            self.port = port
            self.targetHost = targetHost
            self.targetPort = targetPort
        }
    }

    /// Where one connection goes.
    public struct Target: Sendable, Hashable {
        /// The host to connect to: a name, or an address (IPv6 without brackets).
        public var host: String
        public var port: Int
        /// The addresses to try in order; empty: look ``host`` up.
        public var addresses: [String]

        public init(host: String, port: Int, addresses: [String]) {
            self.host = host
            self.port = port
            self.addresses = addresses
        }
    }

    /// Why an entry could not be read: a sentence naming it.
    public struct ParseError: Error, Sendable, Hashable, CustomStringConvertible {
        public var description: String
    }

    /// `--resolve` entries, at most one per host and port.
    public var resolve: [Resolve]
    /// `--connect-to` entries, in the order given: the first that matches is used.
    public var connectTo: [ConnectTo]

    /// No overrides: every connection goes to the URL's host and port.
    public init(resolve: [Resolve] = [], connectTo: [ConnectTo] = []) {
        self.resolve = resolve
        self.connectTo = connectTo
    }

    /// Entries written as curl's options take them, in order:
    ///
    /// - `resolve`: `HOST:PORT:ADDR[,ADDR]...`; an address may be in brackets (`[::1]`); HOST `*`
    ///   is any host. A later entry for the same host and port replaces an earlier one; `-HOST:PORT`
    ///   removes it; a `+` before HOST (curl's "for a while only") changes nothing for the one
    ///   transfer a transport serves, and is accepted.
    /// - `connectTo`: `HOST1:PORT1:HOST2:PORT2`, where an empty HOST1 or PORT1 matches any, and an
    ///   empty HOST2 or PORT2 keeps the URL's; an IPv6 address is in brackets.
    ///
    /// - Throws: ``ParseError`` naming the first entry that cannot be read and why.
    public init(resolve: [String], connectTo: [String]) throws(ParseError) {
        var entries: [Resolve] = []
        for text in resolve {
            switch try Self.parseResolve(text) {
            case .add(let entry):
                entries.removeAll { $0.host == entry.host && $0.port == entry.port }
                entries.append(entry)
            case .remove(let host, let port):
                entries.removeAll { $0.host == host && $0.port == port }
            }
        }
        self.resolve = entries
        self.connectTo = try connectTo.map { (text) throws(ParseError) in try Self.parseConnectTo(text) }
    }

    /// True when nothing is overridden.
    public var isEmpty: Bool { resolve.isEmpty && connectTo.isEmpty }

    /// Where a connection for `host` (a name, or an address with or without brackets) and `port`
    /// goes; `nil` when no entry changes it.
    public func target(host: String, port: Int) -> Target? {
        let host = Self.normalize(host)
        var connectHost = host
        var connectPort = port
        var changed = false
        for entry in connectTo
        where (entry.host == nil || entry.host == host) && (entry.port == nil || entry.port == port) {
            if entry.targetHost == nil && entry.targetPort == nil { continue }
            connectHost = entry.targetHost.map(Self.normalize) ?? host
            connectPort = entry.targetPort ?? port
            changed = connectHost != host || connectPort != port
            break
        }
        let addresses =
            (resolve.first { $0.host == connectHost && $0.port == connectPort }
            ?? resolve.first { $0.host == "*" && $0.port == connectPort })?.addresses ?? []
        guard changed || !addresses.isEmpty else { return nil }
        return Target(host: connectHost, port: connectPort, addresses: addresses)
    }

    // MARK: Parsing

    private enum ResolveEntry {
        case add(Resolve)
        case remove(host: String, port: Int)
    }

    private static func parseResolve(_ text: String) throws(ParseError) -> ResolveEntry {
        func fail(_ why: String) -> ParseError {
            ParseError(description: "--resolve '\(text)': \(why) (HOST:PORT:ADDRESS, or addresses separated by commas)")
        }
        var rest = Substring(text)
        let removes = rest.hasPrefix("-")
        if removes || rest.hasPrefix("+") { rest = rest.dropFirst() }
        guard let colon = rest.firstIndex(of: ":") else { throw fail("no port") }
        let host = rest[..<colon]
        guard !host.isEmpty else { throw fail("no host name") }
        guard isName(host) || host == "*" else { throw fail("'\(host)' is not a host name") }
        rest = rest[rest.index(after: colon)...]
        let portText = rest.prefix { $0 != ":" }
        let port = try self.port(portText, in: text, option: "--resolve")
        rest = rest.dropFirst(portText.count)
        if removes {
            guard rest.isEmpty else { throw fail("an entry that removes one is -HOST:PORT alone") }
            return .remove(host: host.lowercased(), port: port)
        }
        guard rest.hasPrefix(":"), rest.count > 1 else { throw fail("no address") }
        var addresses: [String] = []
        for item in rest.dropFirst().split(separator: ",", omittingEmptySubsequences: false) {
            var address = item
            if address.hasPrefix("[") {
                guard address.hasSuffix("]"), address.count > 2 else { throw fail("'\(item)' is not an address") }
                address = address.dropFirst().dropLast()
            }
            guard !address.contains("%"), IPAddress(String(address)) != nil else {
                throw fail("'\(item)' is not an IPv4 or IPv6 address")
            }
            addresses.append(String(address))
        }
        return .add(Resolve(host: String(host), port: port, addresses: addresses))
    }

    private static func parseConnectTo(_ text: String) throws(ParseError) -> ConnectTo {
        func fail(_ why: String) -> ParseError {
            ParseError(description: "--connect-to '\(text)': \(why) (HOST1:PORT1:HOST2:PORT2)")
        }
        var rest = Substring(text)
        let host = try self.host(&rest, in: text, fail: fail)
        guard rest.hasPrefix(":") else { throw fail("no port after the first host") }
        rest = rest.dropFirst()
        let portText = rest.prefix { $0 != ":" }
        let port = portText.isEmpty ? nil : try self.port(portText, in: text, option: "--connect-to")
        rest = rest.dropFirst(portText.count)
        guard rest.hasPrefix(":") else { throw fail("no host and port to connect to") }
        rest = rest.dropFirst()
        let targetHost = try self.host(&rest, in: text, fail: fail)
        var targetPort: Int?
        if rest.hasPrefix(":") {
            rest = rest.dropFirst()
            targetPort = rest.isEmpty ? nil : try self.port(rest, in: text, option: "--connect-to")
        } else if !rest.isEmpty {
            throw fail("'\(rest)' follows the host to connect to")
        }
        return ConnectTo(host: host, port: port, targetHost: targetHost, targetPort: targetPort)
    }

    /// A host at the start of `rest` (a name, an IPv4 address, or an IPv6 address in brackets),
    /// taken off it; `nil` when empty.
    private static func host(
        _ rest: inout Substring, in text: String, fail: (String) -> ParseError
    ) throws(ParseError) -> String? {
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw fail("an IPv6 address without its ']'") }
            let address = rest[rest.index(after: rest.startIndex)..<close]
            guard !address.contains("%"), let parsed = IPAddress(String(address)), parsed.family == .ipv6 else {
                throw fail("'[\(address)]' is not an IPv6 address")
            }
            rest = rest[rest.index(after: close)...]
            return String(address)
        }
        let name = rest.prefix { $0 != ":" }
        rest = rest.dropFirst(name.count)
        guard !name.isEmpty else { return nil }
        guard isName(name) else { throw fail("'\(name)' is not a host name") }
        return String(name)
    }

    private static func port(_ text: Substring, in entry: String, option: String) throws(ParseError) -> Int {
        guard !text.isEmpty, text.count <= 5, text.allSatisfy({ $0.isASCII && $0.isNumber }), let port = Int(text),
            (1...65535).contains(port)
        else {
            throw ParseError(description: "\(option) '\(entry)': '\(text)' is not a port (1 to 65535)")
        }
        return port
    }

    /// Letters, digits, `-`, `_` and `.`, as a host name (or an IPv4 address) is written.
    private static func isName(_ text: Substring) -> Bool {
        !text.isEmpty && text.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) }
    }

    /// Lower case, without the brackets of an IPv6 address.
    static func normalize(_ host: String) -> String {
        var host = host.lowercased()
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return host
    }
}
