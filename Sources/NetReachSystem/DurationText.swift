/// A duration as the command line and serve's `--config` file write it: `30s`, `500ms`, `2m`,
/// `1h`, `1.5s`, a bare number of seconds, or several units together from the largest down
/// (`1m30s`, `1h2m3.5s`, `2m500ms`). Never negative, at most ~68 years.
///
/// ```swift
/// try DurationText.parse("1m30s").duration      // .seconds(90)
/// try DurationText.parse("1m30s").description   // "1m30s"
/// try DurationText.parse("30").description      // "30s": the unit made explicit
/// ```
package enum DurationText {
    /// Why a text is not a duration: a sentence that says what is accepted.
    package struct Invalid: Error, Sendable, Hashable {
        package var message: String
    }

    /// The longest accepted duration, about 68 years: beyond it no clock arithmetic is safe, and
    /// nobody means it.
    package static let maximumSeconds = Double(Int32.max)

    /// The units, largest first: in a compound duration each appears at most once, in this order.
    private static let units: [(name: String, seconds: Double)] = [
        ("h", 3600), ("m", 60), ("s", 1), ("ms", 0.001),
    ]

    /// The accepted forms, for messages.
    private static let examples = ["30s", "500ms", "2m", "1h", "1.5s", "1m30s", "2m500ms", "a number of seconds"]

    /// The duration `text` writes, and `text` with its unit made explicit (`30` is `30s`), for
    /// messages. `alsoAccepted` names another form the caller accepts (`infinity`), for the message.
    package static func parse(
        _ text: String, alsoAccepted: String? = nil
    ) throws(Invalid) -> (duration: Duration, description: String) {
        let forms = examples + (alsoAccepted.map { [$0] } ?? [])
        let expected = "expected a duration such as " + forms.dropLast().joined(separator: ", ") + ", or " + forms.last!
        func malformed(_ detail: String? = nil) -> Invalid {
            Invalid(message: expected + (detail.map { " (\($0))" } ?? "") + ".")
        }
        if text.hasPrefix("-") {
            throw Invalid(message: "a timeout cannot be negative; use 0 to check once without waiting.")
        }
        // Segments of digits-and-dots followed by letters: "1h2m3.5s" is 1 h, 2 m, 3.5 s.
        var seconds = 0.0
        var written: [String] = []
        var previousUnit: Int?
        var rest = Substring(text)
        while !rest.isEmpty {
            let number = rest.prefix { $0.isASCIIDigit || $0 == "." }
            rest = rest.dropFirst(number.count)
            let unitName = rest.prefix { $0.isASCIILetter }
            rest = rest.dropFirst(unitName.count)
            guard isPlainDecimal(number), let value = Double(number) else { throw malformed() }
            let unit: Int
            if unitName.isEmpty {
                // A bare number is seconds, but only alone: "1s2" is a typo, not 1 s and 2 s.
                guard rest.isEmpty, written.isEmpty else {
                    throw malformed(rest.isEmpty ? "'\(number)' at the end has no unit" : nil)
                }
                unit = units.firstIndex { $0.name == "s" }!
            } else {
                guard let index = units.firstIndex(where: { $0.name == unitName }) else {
                    throw malformed("unknown unit '\(unitName)'; use h, m, s or ms")
                }
                if let previousUnit, index <= previousUnit {
                    throw malformed("combine units from the largest down, each once, as in 1h2m3s")
                }
                unit = index
            }
            previousUnit = unit
            seconds += value * units[unit].seconds
            let digits = number.hasSuffix(".") ? number.dropLast() : number
            written.append(String(digits) + units[unit].name)
        }
        guard !written.isEmpty else { throw malformed() }
        guard seconds <= maximumSeconds else {
            throw Invalid(message: "a timeout must be at most \(Int(maximumSeconds))s.")
        }
        return (.nanoseconds(Int64((seconds * 1e9).rounded())), written.joined())
    }

    /// Digits with at most one dot and at least one digit (`30`, `1.5`, `.5`, `2.`): no sign,
    /// exponent, hex, `inf` or `nan`, which `Double.init` would otherwise accept.
    private static func isPlainDecimal(_ text: Substring) -> Bool {
        let digits = text.filter(\.isASCIIDigit).count
        let dots = text.filter { $0 == "." }.count
        return digits > 0 && dots <= 1 && digits + dots == text.count
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
    fileprivate var isASCIILetter: Bool { isASCII && isLetter }
}
