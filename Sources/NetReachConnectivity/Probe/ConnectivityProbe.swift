import NetReachSystem

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One URL to ask whether the internet answers, and what a true answer looks like.
///
/// No probe is built in: nothing is contacted unless you configure it (a probe tells the server
/// that this machine exists and when it is online). ``wellKnown`` lists public endpoints for those
/// who want them.
///
/// ```swift
/// let own = ConnectivityProbe(URL(string: "http://probe.example.net/generate_204")!)            // expects 204
/// let nm = ConnectivityProbe(URL(string: "http://check.example.org/")!, expecting: .bodyPrefix("NetworkManager is online"))
/// let parsed = try ConnectivityProbe(parsing: "http://probe.example.net/ok=200")                  // --probe syntax
/// ```
public struct ConnectivityProbe: Sendable, Hashable, CustomStringConvertible {
    /// What a passing answer is. Anything else that answers (another status, another body, a
    /// redirect, more than ``ConnectivityProbe/maximumBodySize`` bytes) is a portal.
    public enum Expectation: Sendable, Hashable, CustomStringConvertible {
        /// A 204 No Content (the `generate_204` convention), or a 200 with an empty body, as
        /// NetworkManager accepts when it expects no text.
        case noContent
        /// This status, with any body.
        case status(Int)
        /// A 200 whose body starts with this text (NetworkManager's `response=`).
        case bodyPrefix(String)

        /// `204`, `200`, or the expected text in quotes.
        public var description: String {
            switch self {
            case .noContent: "204"
            case .status(let code): "\(code)"
            case .bodyPrefix(let text): "\"\(text)\""
            }
        }
    }

    /// The URL asked (http or https; redirects are never followed).
    public var url: URL
    /// What a passing answer is.
    public var expectation: Expectation

    /// A body longer than this (100 KiB) is a portal's page, whatever it says: probes answer in a
    /// few bytes, as NetworkManager's limit assumes.
    public static let maximumBodySize = 100 * 1024

    /// A probe of `url` that passes on `expectation` (a 204 unless told otherwise).
    public init(_ url: URL, expecting expectation: Expectation = .noContent) {
        self.url = url
        self.expectation = expectation
    }

    /// `http://probe.example.net/generate_204 (expects 204)`.
    public var description: String { "\(url.absoluteString) (expects \(expectation))" }
}

/// Why a probe's text could not be used.
public struct ConnectivityProbeError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The text given.
    public var text: String
    /// What is wrong with it.
    public var reason: String

    /// `not a probe: "ftp://x": only http and https URLs can be probes`.
    public var description: String { "not a probe: \"\(text)\": \(reason)" }
}

extension ConnectivityProbe {
    /// Reads `URL` or `URL=EXPECT`, the syntax of `--probe` and `NETREACH_PROBE_URLS`: EXPECT is a
    /// status code (`204`, `200`) or text the body must start with. EXPECT follows the last `=`,
    /// unless that `=` belongs to the query's last `name=value` pair:
    /// `http://h/check?a=b` has no expectation, `http://h/check?a=b=200` expects 200.
    ///
    /// ```swift
    /// try ConnectivityProbe(parsing: "http://192.0.2.1/generate_204")            // expects 204
    /// try ConnectivityProbe(parsing: "http://192.0.2.1/check=NetworkManager is online")
    /// ```
    public init(parsing text: String) throws(ConnectivityProbeError) {
        var urlText = text
        var expectation = Expectation.noContent
        if let equals = text.lastIndex(of: "=") {
            let before = text[..<equals]
            let after = text[text.index(after: equals)...]
            if !Self.isQueryValueSeparator(before) {
                urlText = String(before)
                if after.isEmpty {
                    throw ConnectivityProbeError(
                        text: text,
                        reason: "nothing after '=' (give a status such as 204, or the text the body starts with)")
                } else if after.count == 3, let code = Int(after), (100...599).contains(code) {
                    expectation = code == 204 ? .noContent : .status(code)
                } else {
                    expectation = .bodyPrefix(String(after))
                }
            }
        }
        guard let url = URL(string: urlText), let scheme = url.scheme?.lowercased(),
            scheme == "http" || scheme == "https"
        else {
            throw ConnectivityProbeError(text: text, reason: "only http and https URLs can be probes")
        }
        guard let host = url.host, !host.isEmpty else {
            throw ConnectivityProbeError(text: text, reason: "the URL names no host")
        }
        self.init(url, expecting: expectation)
    }

    /// Whether the `=` after `before` separates a name from its value in the URL's query.
    private static func isQueryValueSeparator(_ before: Substring) -> Bool {
        guard let question = before.firstIndex(of: "?") else { return false }
        let query = before[before.index(after: question)...]
        let lastPair = query.split(separator: "&", omittingEmptySubsequences: false).last ?? ""
        return !lastPair.contains("=")
    }

    /// The probes named in `NETREACH_PROBE_URLS`: `URL[=EXPECT]` entries separated by commas or
    /// newlines (spaces around them are ignored; an expected text may hold spaces); none when it is
    /// unset or empty.
    ///
    /// ```swift
    /// let probes = try ConnectivityProbe.fromEnvironment(["NETREACH_PROBE_URLS": "http://10.0.0.1/204, http://[fd00::1]/204"])
    /// ```
    public static func fromEnvironment(
        _ environment: [String: String] = ProcessInfo.processInfo.environment
    )
        throws(ConnectivityProbeError) -> [ConnectivityProbe]
    {
        guard let value = environment["NETREACH_PROBE_URLS"] else { return [] }
        var probes: [ConnectivityProbe] = []
        for entry in value.split(whereSeparator: { $0 == "," || $0 == "\n" }) {
            let trimmed = entry.trimmingSpaces()
            if !trimmed.isEmpty { probes.append(try ConnectivityProbe(parsing: trimmed)) }
        }
        return probes
    }
}

extension ConnectivityProbe {
    /// Public endpoints that operating systems use for their own checks, for those who opt in
    /// (`netreach check --well-known-probes`). Asking them tells their operators that this machine
    /// exists and is online, which is why nothing here is used unless asked for.
    ///
    /// ```swift
    /// let configuration = ConnectivityMonitor.Configuration(probes: ConnectivityProbe.wellKnown)
    /// ```
    public static let wellKnown: [ConnectivityProbe] = [
        // Android's and ChromeOS's: 204, empty.
        ConnectivityProbe(URL(string: "http://connectivitycheck.gstatic.com/generate_204")!),
        // GNOME's NetworkManager configuration.
        ConnectivityProbe(
            URL(string: "http://nmcheck.gnome.org/check_network_status.txt")!,
            expecting: .bodyPrefix("NetworkManager is online")),
        // Firefox's.
        ConnectivityProbe(
            URL(string: "http://detectportal.firefox.com/success.txt")!, expecting: .bodyPrefix("success")),
    ]
}
