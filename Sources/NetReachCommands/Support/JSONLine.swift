#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One line of `--json` output: the value's JSON on one line, keys sorted, slashes unescaped,
/// with `"version"` (netreach's, ``NetreachCommand/version``) beside the value's own keys.
///
/// ```swift
/// JSONLine.text(Stopped(connections: 2))   // {"connections":2,"event":"stopped","version":"0.22.0"}
/// ```
enum JSONLine {
    /// The line for `value`, or nil if it cannot be encoded (a value with a non-finite number).
    static func text(_ value: some Encodable) -> String? {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(Versioned(value: value)) else { return nil }
        return String(decoding: data, as: UTF8.self)
    }

    private struct Versioned<Value: Encodable>: Encodable {
        let value: Value
        private enum CodingKeys: String, CodingKey { case version }

        func encode(to encoder: any Encoder) throws {
            try value.encode(to: encoder)
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(NetreachCommand.version, forKey: .version)
        }
    }
}
