#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A request's query string, checked against the parameters an endpoint takes: each at most once,
/// properly percent-encoded, none unknown. Anything else is a `400` with the reason, so a typo
/// (`?too=db`) is not silently the default.
///
/// ```swift
/// let query = try QueryParameters(parsing: "to=db&namespace=lab1", allowed: ["to", "namespace"])
/// query["to"]   // "db"
/// ```
package struct QueryParameters: Sendable, Hashable {
    /// Why a query was refused.
    package enum Failure: Error, Hashable, CustomStringConvertible {
        case unknown(String, allowed: [String])
        case repeated(String)
        case badEncoding(String)

        package var description: String {
            switch self {
            case .unknown(let name, let allowed):
                allowed.isEmpty
                    ? "this endpoint takes no query parameters (got \"\(name)\")"
                    : "unknown query parameter \"\(name)\"; this endpoint takes \(allowed.joined(separator: ", "))"
            case .repeated(let name): "query parameter \"\(name)\" is given more than once"
            case .badEncoding(let text): "malformed percent-encoding in the query: \"\(text)\""
            }
        }
    }

    private var values: [String: String]

    /// Parses `query` (without the `?`); a name without `=` has the empty value (`?verbose`).
    package init(parsing query: String?, allowed: Set<String>) throws(Failure) {
        values = [:]
        guard let query, !query.isEmpty else { return }
        for pair in query.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = Self.decode(parts[0]) else { throw .badEncoding(String(pair)) }
            guard let value = Self.decode(parts.count > 1 ? parts[1] : "") else { throw .badEncoding(String(pair)) }
            guard allowed.contains(name) else { throw .unknown(name, allowed: allowed.sorted()) }
            guard values.updateValue(value, forKey: name) == nil else { throw .repeated(name) }
        }
    }

    package subscript(_ name: String) -> String? { values[name] }

    /// `+` is a space in a query (HTML forms); then `%XX` escapes, read as UTF-8. `nil` when an
    /// escape is malformed or the bytes are not UTF-8 (swift-foundation's `removingPercentEncoding`
    /// would make U+FFFD of a lone `%A9`; it is also not in FoundationEssentials).
    private static func decode(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var rest = text.utf8[...]
        while let byte = rest.popFirst() {
            switch byte {
            case UInt8(ascii: "+"): bytes.append(UInt8(ascii: " "))
            case UInt8(ascii: "%"):
                guard let high = rest.popFirst().flatMap(hexValue), let low = rest.popFirst().flatMap(hexValue)
                else { return nil }
                bytes.append(high << 4 | low)
            default: bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
