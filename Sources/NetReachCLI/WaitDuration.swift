import ArgumentParser

/// The `--timeout` of `wait` and `get`: `30s`, `500ms`, `2m`, `1h`, `1.5s`, or a bare number of seconds.
///
/// ```swift
/// try WaitDuration(parsing: "1.5s").duration   // .milliseconds(1500)
/// try WaitDuration(parsing: "-3")              // ValidationError: cannot be negative
/// ```
package struct WaitDuration: Sendable, Hashable, CustomStringConvertible {
    /// How long to wait.
    package let duration: Duration
    /// How the user wrote it, with the unit made explicit (`30` becomes `30s`), for messages.
    package let description: String

    /// The longest accepted timeout, about 68 years: beyond it no clock arithmetic is safe, and
    /// nobody means it.
    package static let maximumSeconds = Double(Int32.max)

    private static let secondsPerUnit: [(suffix: String, seconds: Double)] = [
        // "ms" before "s" and "m", which are its suffix and prefix.
        ("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600),
    ]

    /// A duration of whole seconds, such as the default `30s`.
    package static func seconds(_ seconds: Int) -> WaitDuration {
        WaitDuration(duration: .seconds(seconds), description: "\(seconds)s")
    }

    private init(duration: Duration, description: String) {
        self.duration = duration
        self.description = description
    }

    /// Parses a command-line value; the error says what was wrong and what is accepted.
    package init(parsing text: String) throws(ValidationError) {
        let unit = Self.secondsPerUnit.first { text.hasSuffix($0.suffix) }
        let number = String(text.dropLast(unit?.suffix.count ?? 0))
        if number.hasPrefix("-") {
            throw ValidationError("a timeout cannot be negative; use 0 to check once without waiting.")
        }
        guard Self.isPlainDecimal(number), let value = Double(number) else {
            throw ValidationError("expected a duration such as 30s, 500ms, 2m, 1h, 1.5s, or a number of seconds.")
        }
        let seconds = value * (unit?.seconds ?? 1)
        guard seconds <= Self.maximumSeconds else {
            throw ValidationError("a timeout must be at most \(Int(Self.maximumSeconds))s.")
        }
        let written = number.hasSuffix(".") ? String(number.dropLast()) : number
        self.init(duration: .nanoseconds(Int64((seconds * 1e9).rounded())),
                  description: written + (unit?.suffix ?? "s"))
    }

    /// Whether this is `0` in any unit: check once and do not wait.
    package var isZero: Bool { duration == .zero }

    /// Digits with at most one dot and at least one digit (`30`, `1.5`, `.5`, `2.`): no sign,
    /// exponent, hex, `inf` or `nan`, which `Double.init` would otherwise accept.
    private static func isPlainDecimal(_ text: String) -> Bool {
        let digits = text.filter(\.isASCIIDigit).count
        let dots = text.filter { $0 == "." }.count
        return digits > 0 && dots <= 1 && digits + dots == text.count
    }
}

private extension Character {
    var isASCIIDigit: Bool { isASCII && isNumber }
}

