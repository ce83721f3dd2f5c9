import NetReachSystem

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
            guard let name = parts[0].percentDecoded(plusIsSpace: true) else { throw .badEncoding(String(pair)) }
            guard let value = (parts.count > 1 ? parts[1] : "").percentDecoded(plusIsSpace: true) else {
                throw .badEncoding(String(pair))
            }
            guard allowed.contains(name) else { throw .unknown(name, allowed: allowed.sorted()) }
            guard values.updateValue(value, forKey: name) == nil else { throw .repeated(name) }
        }
    }

    package subscript(_ name: String) -> String? { values[name] }
}
