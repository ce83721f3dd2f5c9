/// JSON string literals written by hand, escaped exactly as Foundation's `JSONEncoder` escapes
/// them (with `.withoutEscapingSlashes`): `"` and `\`, the control characters (`\b \f \n \r \t`
/// by name, the others as `\u00XX`), everything else as it is. For the command line's and
/// `serve`'s one-line JSON, which is written on every change; tests hold it to the encoder.
package enum JSONText {
    /// `value` as a JSON string literal, quotes included.
    package static func string(_ value: String) -> String {
        var text = ""
        appendString(value, to: &text)
        return text
    }

    /// Appends `value` as a JSON string literal, quotes included.
    package static func appendString(_ value: String, to text: inout String) {
        text += "\""
        let needsEscapes = value.utf8.contains { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }
        guard needsEscapes else {
            text += value
            text += "\""
            return
        }
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": text += "\\\""
            case "\\": text += "\\\\"
            case "\n": text += "\\n"
            case "\r": text += "\\r"
            case "\t": text += "\\t"
            case "\u{08}": text += "\\b"
            case "\u{0C}": text += "\\f"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                text += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: text.unicodeScalars.append(scalar)
            }
        }
        text += "\""
    }
}
