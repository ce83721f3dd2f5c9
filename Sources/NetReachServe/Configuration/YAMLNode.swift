/// A YAML document's value as ``YAMLReader`` reads it: scalars, sequences and mappings (their keys
/// in the order written), each with where it starts, so a setting that is wrong can be named by
/// line and column.
///
/// ```swift
/// let root = try YAMLReader.parse("to: {db: 10.0.0.5}\nall_namespaces: yes\n")
/// root?["to"]?["db"]?.text          // "10.0.0.5"
/// root?["all_namespaces"]?.bool     // true
/// ```
package struct YAMLNode: Sendable, Equatable {
    package enum Content: Sendable, Equatable {
        case scalar(YAMLScalar)
        case sequence([YAMLNode])
        case mapping([Entry])
    }

    /// One `key: value` of a mapping. Keys are scalars: complex keys are refused when read.
    package struct Entry: Sendable, Equatable {
        package var key: YAMLScalar
        package var keyMark: YAMLMark
        package var value: YAMLNode
    }

    package var content: Content
    /// Where the node starts (for an empty value, where it would have been).
    package var mark: YAMLMark

    package init(_ content: Content, at mark: YAMLMark) {
        self.content = content
        self.mark = mark
    }

    package var scalar: YAMLScalar? {
        if case .scalar(let scalar) = content { scalar } else { nil }
    }

    package var sequence: [YAMLNode]? {
        if case .sequence(let items) = content { items } else { nil }
    }

    package var mapping: [Entry]? {
        if case .mapping(let entries) = content { entries } else { nil }
    }

    /// `~`, `null`, or nothing at all (`key:`).
    package var isNull: Bool { scalar?.value == .null }

    /// A plain `true`/`false` (or YAML 1.1's `yes`/`no`/`on`/`off`); `nil` for anything else,
    /// `"true"` in quotes included.
    package var bool: Bool? {
        if case .bool(let value) = scalar?.value { value } else { nil }
    }

    /// A plain decimal integer; `nil` for anything else, `"53"` in quotes included.
    package var integer: Int? {
        if case .integer(let value) = scalar?.value { value } else { nil }
    }

    /// The text of a scalar that is not null, whatever YAML would resolve it to: a setting that
    /// takes text reads `port: 53` as "53" and `name: yes` as "yes", as yaml.v2 does.
    package var text: String? {
        guard let scalar, scalar.value != .null else { return nil }
        return scalar.text
    }

    /// The value of `key` in a mapping, as the key is written; `nil` when absent or not a mapping.
    package subscript(key: String) -> YAMLNode? {
        mapping?.first { $0.key.text == key }?.value
    }

    /// What the node is, for messages: "a mapping", "a list", "null", "true or false", "a number",
    /// "text".
    package var kind: String {
        switch content {
        case .mapping: "a mapping"
        case .sequence: "a list"
        case .scalar(let scalar):
            switch scalar.value {
            case .null: "nothing"
            case .bool: "true or false"
            case .integer: "a number"
            case .text: "text"
            }
        }
    }
}

/// A scalar as written: its text (escapes and folding applied) and its style, which decides
/// what it resolves to (only a plain scalar is ever anything but text).
package struct YAMLScalar: Sendable, Equatable {
    package enum Style: Sendable, Equatable {
        case plain, singleQuoted, doubleQuoted, literal, folded
    }

    /// What a scalar means. The resolution is YAML 1.1's (yaml.v2's, which exporter-toolkit reads
    /// web configuration files with, and PyYAML's) where the three agree, and text elsewhere:
    /// - null: nothing, `~`, `null`, `Null`, `NULL`;
    /// - booleans: `true`/`false`, and YAML 1.1's `yes`/`no`/`on`/`off`, each in lower case,
    ///   capitalized or upper case: a file written for a Go exporter means them as booleans
    ///   (yaml.v2's `y`/`n` are text here, as in PyYAML);
    /// - integers: decimal only (`53`, `-1`, `+7`). `0x35`, `0o65`, `065`, `5_3` and `1:30`
    ///   are read differently by YAML 1.1 and 1.2 readers (`065` is 53 to one, 65 to the other),
    ///   so they stay text and a setting that wants a number refuses them.
    package enum Value: Sendable, Hashable {
        case null
        case bool(Bool)
        case integer(Int)
        case text(String)
    }

    package var text: String
    package var style: Style

    package init(_ text: String, style: Style) {
        self.text = text
        self.style = style
    }

    package var value: Value { style == .plain ? Self.resolve(text) : .text(text) }

    /// What a plain scalar's text means.
    package static func resolve(_ plain: String) -> Value {
        switch plain {
        case "", "~", "null", "Null", "NULL": return .null
        case "true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON": return .bool(true)
        case "false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF": return .bool(false)
        default: break
        }
        let digits =
            plain.utf8.first == UInt8(ascii: "-") || plain.utf8.first == UInt8(ascii: "+")
            ? plain.utf8.dropFirst() : plain.utf8[...]
        guard !digits.isEmpty, digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }),
            digits.count == 1 || digits.first != UInt8(ascii: "0"), let value = Int(plain)
        else { return .text(plain) }
        return .integer(value)
    }

    /// Whether a plain scalar is a number YAML 1.1 reads in a form left as text here (`0x35`,
    /// `065`, `5_3`, `1:30`, `1.5`): a setting that wants a whole number says so.
    package var isOtherNumber: Bool {
        guard style == .plain, case .text = value else { return false }
        var body = Substring(text)
        if body.first == "-" || body.first == "+" { body = body.dropFirst() }
        guard let first = body.first, first.isASCII, first.isNumber || first == "." else { return false }
        return body.allSatisfy { $0.isASCII && ($0.isHexDigit || "xXoO_:.".contains($0)) }
    }
}

/// A position in a YAML text, counted from 1: line, and column in characters.
package struct YAMLMark: Sendable, Equatable, CustomStringConvertible {
    package var line: Int
    package var column: Int

    package init(line: Int, column: Int) {
        self.line = line
        self.column = column
    }

    package var description: String { "line \(line), column \(column)" }
}
