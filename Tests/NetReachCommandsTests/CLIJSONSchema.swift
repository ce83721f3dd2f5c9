import Foundation
import NetReachTestSupport

/// A JSON value, decoded without Foundation's number/boolean ambiguity (`JSONSerialization` gives
/// `NSNumber` for both `1` and `true`).
enum JSONValue: Decodable, Equatable, CustomStringConvertible {
    case null
    case bool(Bool)
    case integer(Int64)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .integer(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    static func parse(_ text: String) throws -> JSONValue {
        try JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
    }

    /// The JSON Schema type names this value has (an integer is also a "number").
    var typeNames: Set<String> {
        switch self {
        case .null: ["null"]
        case .bool: ["boolean"]
        case .integer: ["integer", "number"]
        case .number(let value): value.rounded() == value ? ["integer", "number"] : ["number"]
        case .string: ["string"]
        case .array: ["array"]
        case .object: ["object"]
        }
    }

    var description: String {
        switch self {
        case .null: "null"
        case .bool(let value): "\(value)"
        case .integer(let value): "\(value)"
        case .number(let value): "\(value)"
        case .string(let value): "\"\(value)\""
        case .array(let values): "[\(values.map(\.description).joined(separator: ","))]"
        case .object(let members):
            "{\(members.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ","))}"
        }
    }
}

/// A checker for the subset of JSON Schema (draft 2020-12) that `Docs/netreach-json.schema.json`
/// uses, so the tests need no Python `jsonschema` on CI.
///
/// A keyword it does not implement is reported as a violation, never skipped: if the schema grows
/// a keyword, this checker must learn it before the schema can pass. `format` is an annotation in
/// 2020-12 (not asserted by default), and so ignored here as validators do; the tests check the
/// formats they care about themselves.
struct JSONSchemaChecker {
    let root: JSONValue

    /// Keywords that carry no assertion.
    private static let annotations: Set<String> = [
        "$schema", "$id", "title", "description", "$defs", "format", "$comment",
    ]

    init(schema: JSONValue) { root = schema }

    /// Loads the schema file at `path`.
    init(contentsOf path: String) throws {
        root = try JSONDecoder().decode(JSONValue.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
    }

    /// Every way `instance` violates the schema, as `path: problem`; empty when it is valid.
    func violations(of instance: JSONValue) -> [String] {
        violations(of: instance, against: root, at: "$")
    }

    /// Every way `instance` violates the schema's `$defs/name` (a JSON line of `get` or
    /// `condition`); references inside it resolve against the whole schema.
    func violations(of instance: JSONValue, definition name: String) -> [String] {
        guard let schema = resolve("#/$defs/\(name)") else { return ["$: the schema has no $defs/\(name)"] }
        return violations(of: instance, against: schema, at: "$")
    }

    private func violations(of instance: JSONValue, against schema: JSONValue, at path: String) -> [String] {
        if case .bool(let allowed) = schema { return allowed ? [] : ["\(path): no value is allowed here"] }
        guard case .object(let keywords) = schema else { return ["\(path): the schema is not an object"] }
        var found: [String] = []
        for (keyword, value) in keywords.sorted(by: { $0.key < $1.key }) where !Self.annotations.contains(keyword) {
            found += check(keyword, value, keywords: keywords, instance: instance, at: path)
        }
        return found
    }

    private func check(
        _ keyword: String, _ value: JSONValue, keywords: [String: JSONValue],
        instance: JSONValue, at path: String
    ) -> [String] {
        switch (keyword, value) {
        case ("type", .string(let name)):
            return instance.typeNames.contains(name) ? [] : ["\(path): \(instance) is not of type \(name)"]
        case ("type", .array(let names)):
            let allowed = names.compactMap { if case .string(let name) = $0 { name } else { nil } }
            return instance.typeNames.isDisjoint(with: allowed)
                ? ["\(path): \(instance) is none of the types \(allowed)"] : []
        case ("enum", .array(let allowed)):
            return allowed.contains(instance) ? [] : ["\(path): \(instance) is not one of \(value)"]
        case ("const", _):
            return instance == value ? [] : ["\(path): \(instance) is not \(value)"]
        case ("required", .array(let names)):
            guard case .object(let members) = instance else { return [] }
            return names.compactMap { name in
                guard case .string(let key) = name else { return "\(path): required lists a non-string" }
                return members[key] == nil ? "\(path): \(key) is missing" : nil
            }
        case ("properties", .object(let properties)):
            guard case .object(let members) = instance else { return [] }
            return properties.sorted { $0.key < $1.key }.flatMap { key, schema in
                members[key].map { violations(of: $0, against: schema, at: "\(path).\(key)") } ?? []
            }
        case ("additionalProperties", _):
            guard case .object(let members) = instance else { return [] }
            var declared: Set<String> = []
            if case .object(let properties)? = keywords["properties"] { declared = Set(properties.keys) }
            return members.keys.sorted().filter { !declared.contains($0) }.flatMap {
                violations(of: members[$0]!, against: value, at: "\(path).\($0)").map { "\($0) (not a declared key)" }
            }
        case ("items", _):
            guard case .array(let elements) = instance else { return [] }
            return elements.enumerated().flatMap { violations(of: $1, against: value, at: "\(path)[\($0)]") }
        case ("minItems", .integer(let bound)), ("maxItems", .integer(let bound)):
            guard case .array(let elements) = instance else { return [] }
            let fits = keyword == "minItems" ? elements.count >= bound : elements.count <= bound
            return fits ? [] : ["\(path): \(elements.count) items, \(keyword) is \(bound)"]
        case ("minLength", .integer(let bound)):
            guard case .string(let text) = instance else { return [] }
            return text.unicodeScalars.count >= bound ? [] : ["\(path): \(instance) is shorter than \(bound)"]
        case ("minimum", _):
            let bound: Double? =
                switch value {
                case .integer(let number): Double(number)
                case .number(let number): number
                default: nil
                }
            let number: Double? =
                switch instance {
                case .integer(let number): Double(number)
                case .number(let number): number
                default: nil
                }
            guard let bound else { return ["\(path): minimum is not a number"] }
            guard let number else { return [] }
            return number >= bound ? [] : ["\(path): \(instance) is less than \(bound)"]
        case ("pattern", .string(let pattern)):
            guard case .string(let text) = instance else { return [] }
            guard let expression = try? NSRegularExpression(pattern: pattern) else {
                return ["\(path): the pattern \(pattern) does not compile"]
            }
            let range = NSRange(text.startIndex..., in: text)
            return expression.firstMatch(in: text, range: range) == nil
                ? ["\(path): \(instance) does not match \(pattern)"] : []
        case ("$ref", .string(let reference)):
            guard let target = resolve(reference) else { return ["\(path): cannot resolve \(reference)"] }
            return violations(of: instance, against: target, at: path)
        case ("allOf", .array(let schemas)):
            return schemas.flatMap { violations(of: instance, against: $0, at: path) }
        case ("anyOf", .array(let schemas)):
            let failures = schemas.map { violations(of: instance, against: $0, at: path) }
            return failures.contains { $0.isEmpty }
                ? [] : ["\(path): \(instance) matches none of anyOf: \(failures.flatMap { $0 })"]
        case ("if", _):
            let holds = violations(of: instance, against: value, at: path).isEmpty
            guard let branch = keywords[holds ? "then" : "else"] else { return [] }
            return violations(of: instance, against: branch, at: path)
        case ("then", _), ("else", _):
            return [] // applied by "if"
        default:
            return ["\(path): the checker does not implement \(keyword): \(value)"]
        }
    }

    /// `#/$defs/name` (JSON Pointer, within this document only).
    private func resolve(_ reference: String) -> JSONValue? {
        guard reference.hasPrefix("#/") else { return nil }
        var node = root
        for token in reference.dropFirst(2).split(separator: "/") {
            let key = token.replacingOccurrences(of: "~1", with: "/").replacingOccurrences(of: "~0", with: "~")
            guard case .object(let members) = node, let next = members[key] else { return nil }
            node = next
        }
        return node
    }
}
