import ArgumentParser

/// Options that take one value, given at most once.
///
/// swift-argument-parser keeps the last of `--timeout 1s --timeout 2s` without a word, so a
/// script that builds a command line from pieces could wait 2 s where it meant 1 s. These options
/// are declared as arrays (each occurrence appends) and checked here, in `validate()`, so the
/// repetition is a usage error (exit 64) that names the option and the values given.
enum SingleValuedOption {
    /// The value of `option`, `nil` if it was not given; throws if it was given more than once.
    ///
    /// ```swift
    /// try SingleValuedOption.value(of: "--timeout", in: ["1s", "2s"])
    /// // ValidationError: --timeout was given 2 times (1s, 2s); give it once.
    /// ```
    static func value<Value>(of option: String, in values: [Value]) throws(ValidationError) -> Value? {
        guard values.count <= 1 else {
            let given = values.map { "\($0)" }.joined(separator: ", ")
            throw ValidationError("\(option) was given \(values.count) times (\(given)); give it once.")
        }
        return values.first
    }
}
