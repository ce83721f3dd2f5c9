import ArgumentParser
import NetReachSystem

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
    package static let maximumSeconds = DurationText.maximumSeconds

    /// A duration of whole seconds, such as the default `30s`.
    package static func seconds(_ seconds: Int) -> WaitDuration {
        WaitDuration(duration: .seconds(seconds), description: "\(seconds)s")
    }

    private init(duration: Duration, description: String) {
        self.duration = duration
        self.description = description
    }

    /// Parses a command-line value; the error says what was wrong and what is accepted.
    /// `alsoAccepted` names other forms the caller accepts (`infinity`), for that message. The
    /// grammar is `DurationText`'s, which serve's `--config` file reads too.
    package init(parsing text: String, alsoAccepted: String? = nil) throws(ValidationError) {
        do {
            let (duration, description) = try DurationText.parse(text, alsoAccepted: alsoAccepted)
            self.init(duration: duration, description: description)
        } catch {
            throw ValidationError(error.message)
        }
    }

    /// Whether this is `0` in any unit: check once and do not wait.
    package var isZero: Bool { duration == .zero }
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
