/// Why ``YAMLReader`` refused a text, and where: the construct it does not read, or the
/// mistake, at a line and column.
///
/// ```swift
/// do { _ = try YAMLReader.parse("a: &x 1\nb: *x\n") } catch {
///     print(error)   // line 1, column 4: anchors (&name) are not supported: write the value out ...
/// }
/// ```
package struct YAMLError: Error, Sendable, Equatable, CustomStringConvertible {
    package enum Reason: Sendable, Equatable {
        /// `&name`: refused, with aliases, so that no document can expand (the "billion laughs").
        case anchor
        /// `*name`.
        case alias
        /// `!!str`, `!name`, `!<...>`.
        case tag
        /// `<<: *defaults`, YAML 1.1's merge key.
        case mergeKey
        /// `? key`, or a collection as a key.
        case complexKey
        /// The same key twice in one mapping.
        case duplicateKey(String)
        /// A second `---`.
        case multipleDocuments
        /// `%YAML`, `%TAG`.
        case directive
        /// A tab where indentation is counted.
        case tabIndentation
        /// A quoted scalar that never closes.
        case unterminatedQuote
        /// A `[` or `{` that never closes.
        case unterminatedFlow
        /// A backslash escape YAML does not have, or one naming no character.
        case badEscape(String)
        /// Collections nested deeper than ``YAMLReader/maximumDepth``.
        case tooDeep
        /// A character YAML does not allow in a text (a control character, U+FFFE, U+FFFF).
        case nonPrintable(UInt32)
        /// Anything else that is not YAML, said in words.
        case syntax(String)
    }

    package var reason: Reason
    package var mark: YAMLMark

    package init(_ reason: Reason, at mark: YAMLMark) {
        self.reason = reason
        self.mark = mark
    }

    package var description: String { "\(mark): \(message)" }

    private var message: String {
        switch reason {
        case .anchor: "anchors (&name) are not supported: write the value out where it is used"
        case .alias: "aliases (*name) are not supported: write the value out where it is used"
        case .tag: "tags (!!str, !name) are not supported: quote a value to make it text"
        case .mergeKey: "merge keys (<<) are not supported: write the keys out"
        case .complexKey:
            "a key must be one scalar; complex keys (? key, or a list or mapping as a key) are not supported"
        case .duplicateKey(let key):
            "the key \"\(key)\" is given twice in this mapping (YAML leaves that undefined, and yaml.v2's "
                + "UnmarshalStrict, which exporter-toolkit reads web configuration files with, refuses it too)"
        case .multipleDocuments: "a second document (---): the file must hold one"
        case .directive: "directives (%YAML, %TAG) are not supported"
        case .tabIndentation: "a tab in indentation: YAML indents with spaces only"
        case .unterminatedQuote: "the quoted scalar that starts here is never closed"
        case .unterminatedFlow: "the [ or { that starts here is never closed"
        case .badEscape(let escape): "bad escape \\\(escape)"
        case .tooDeep: "collections nested more than \(YAMLReader.maximumDepth) deep"
        case .nonPrintable(let value):
            "the character U+\(String(value, radix: 16, uppercase: true).leftPadded(to: 4)) is not allowed in YAML "
                + "(in double quotes, write it as an escape)"
        case .syntax(let words): words
        }
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}
