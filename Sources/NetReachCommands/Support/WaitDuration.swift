import ArgumentParser

/// The `--timeout` of `wait` and `get`: `30s`, `500ms`, `2m`, `1h`, `1.5s`, a bare number of
/// seconds, or several of those units together from the largest down: `1m30s`, `1h2m3.5s`,
/// `2m500ms`.
///
/// ```swift
/// try WaitDuration(parsing: "1.5s").duration    // .milliseconds(1500)
/// try WaitDuration(parsing: "1m30s").duration   // .seconds(90)
/// try WaitDuration(parsing: "-3")               // ValidationError: cannot be negative
/// ```
///
/// Always finite: `wait`'s `infinity` is a ``WaitTimeout``, so `get` cannot be given one.
package struct WaitDuration: Sendable, Hashable, CustomStringConvertible {
    /// How long to wait.
    package let duration: Duration
    /// How the user wrote it, with the unit made explicit (`30` becomes `30s`), for messages.
    package let description: String

    /// The longest accepted timeout, about 68 years: beyond it no clock arithmetic is safe, and
    /// nobody means it.
    package static let maximumSeconds = Double(Int32.max)

    /// The units, largest first: in a compound duration each appears at most once, in this order.
    private static let units: [(name: String, seconds: Double)] = [
        ("h", 3600), ("m", 60), ("s", 1), ("ms", 0.001),
    ]

    /// The accepted forms, for messages.
    private static let examples = ["30s", "500ms", "2m", "1h", "1.5s", "1m30s", "2m500ms", "a number of seconds"]

    /// A duration of whole seconds, such as the default `30s`.
    package static func seconds(_ seconds: Int) -> WaitDuration {
        WaitDuration(duration: .seconds(seconds), description: "\(seconds)s")
    }

    private init(duration: Duration, description: String) {
        self.duration = duration
        self.description = description
    }

    /// Parses a command-line value; the error says what was wrong and what is accepted.
    /// `alsoAccepted` names other forms the caller accepts (`infinity`), for that message.
    package init(parsing text: String, alsoAccepted: String? = nil) throws(ValidationError) {
        let forms = Self.examples + (alsoAccepted.map { [$0] } ?? [])
        let expected = "expected a duration such as " + forms.dropLast().joined(separator: ", ") + ", or " + forms.last!
        func malformed(_ detail: String? = nil) -> ValidationError {
            ValidationError(expected + (detail.map { " (\($0))" } ?? "") + ".")
        }
        if text.hasPrefix("-") {
            throw ValidationError("a timeout cannot be negative; use 0 to check once without waiting.")
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
            guard Self.isPlainDecimal(number), let value = Double(number) else { throw malformed() }
            let unit: Int
            if unitName.isEmpty {
                // A bare number is seconds, but only alone: "1s2" is a typo, not 1 s and 2 s.
                guard rest.isEmpty, written.isEmpty else {
                    throw malformed(rest.isEmpty ? "'\(number)' at the end has no unit" : nil)
                }
                unit = Self.units.firstIndex { $0.name == "s" }!
            } else {
                guard let index = Self.units.firstIndex(where: { $0.name == unitName }) else {
                    throw malformed("unknown unit '\(unitName)'; use h, m, s or ms")
                }
                if let previousUnit, index <= previousUnit {
                    throw malformed("combine units from the largest down, each once, as in 1h2m3s")
                }
                unit = index
            }
            previousUnit = unit
            seconds += value * Self.units[unit].seconds
            let digits = number.hasSuffix(".") ? number.dropLast() : number
            written.append(String(digits) + Self.units[unit].name)
        }
        guard !written.isEmpty else { throw malformed() }
        guard seconds <= Self.maximumSeconds else {
            throw ValidationError("a timeout must be at most \(Int(Self.maximumSeconds))s.")
        }
        self.init(duration: .nanoseconds(Int64((seconds * 1e9).rounded())), description: written.joined())
    }

    /// Whether this is `0` in any unit: check once and do not wait.
    package var isZero: Bool { duration == .zero }

    /// Digits with at most one dot and at least one digit (`30`, `1.5`, `.5`, `2.`): no sign,
    /// exponent, hex, `inf` or `nan`, which `Double.init` would otherwise accept.
    private static func isPlainDecimal(_ text: Substring) -> Bool {
        let digits = text.filter(\.isASCIIDigit).count
        let dots = text.filter { $0 == "." }.count
        return digits > 0 && dots <= 1 && digits + dots == text.count
    }
}

/// `wait --timeout`: a ``WaitDuration``, or `infinity` to wait for as long as it takes.
///
/// ```swift
/// try WaitTimeout(parsing: "infinity")   // .unlimited
/// try WaitTimeout(parsing: "2m")         // .limited(2m)
/// ```
package enum WaitTimeout: Sendable, Hashable, CustomStringConvertible {
    /// Give up after this long.
    case limited(WaitDuration)
    /// Never give up (`infinity`).
    case unlimited

    /// The word for ``unlimited``.
    package static let infinityWord = "infinity"

    /// Parses a command-line value: `infinity`, or anything ``WaitDuration`` accepts.
    package init(parsing text: String) throws(ValidationError) {
        if text == Self.infinityWord {
            self = .unlimited
        } else {
            self = .limited(try WaitDuration(parsing: text, alsoAccepted: Self.infinityWord))
        }
    }

    /// The time limit; `nil` for ``unlimited``.
    package var duration: Duration? {
        if case .limited(let limit) = self { limit.duration } else { nil }
    }

    /// Whether this is `0`: check once and do not wait.
    package var isZero: Bool { duration == .zero }

    package var description: String {
        switch self {
        case .limited(let limit): limit.description
        case .unlimited: Self.infinityWord
        }
    }
}

extension Character {
    fileprivate var isASCIIDigit: Bool { isASCII && isNumber }
    fileprivate var isASCIILetter: Bool { isASCII && isLetter }
}
