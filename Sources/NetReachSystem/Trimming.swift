extension StringProtocol {
    /// The text without the spaces and tabs at either end (Unicode's space separators and the
    /// tab: what Foundation's `trimmingCharacters(in: .whitespaces)` trims), so code that trims a
    /// header value or a configuration line need not link full Foundation for it.
    ///
    /// ```swift
    /// " gzip\t".trimmingSpaces()   // "gzip"
    /// ```
    package func trimmingSpaces() -> String {
        let scalars = unicodeScalars
        let isSpace: (Unicode.Scalar) -> Bool = { $0 == "\t" || $0.properties.generalCategory == .spaceSeparator }
        guard let start = scalars.firstIndex(where: { !isSpace($0) }),
            let last = scalars.lastIndex(where: { !isSpace($0) })
        else { return "" }
        var trimmed = String.UnicodeScalarView()
        trimmed.append(contentsOf: scalars[start...last])
        return String(trimmed)
    }
}
