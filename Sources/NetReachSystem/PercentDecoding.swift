extension StringProtocol {
    /// The text with every `%XX` escape decoded and the bytes read as UTF-8 (and, with
    /// `plusIsSpace`, each `+` a space, as an HTML form's query writes it); `nil` when an escape
    /// is malformed or the bytes are not UTF-8.
    ///
    /// Strict where swift-foundation's `removingPercentEncoding` is not (on Linux it makes U+FFFD of
    /// a lone `%A9`), so a credential or a query nobody wrote is never used; it is also not in
    /// FoundationEssentials.
    ///
    /// ```swift
    /// "caf%C3%A9".percentDecoded()                    // "café"
    /// "a+b%2B".percentDecoded(plusIsSpace: true)       // "a b+"
    /// "%A9".percentDecoded()                           // nil
    /// ```
    package func percentDecoded(plusIsSpace: Bool = false) -> String? {
        var bytes: [UInt8] = []
        var rest = utf8[...]
        while let byte = rest.popFirst() {
            switch byte {
            case UInt8(ascii: "+") where plusIsSpace: bytes.append(UInt8(ascii: " "))
            case UInt8(ascii: "%"):
                guard let high = rest.popFirst().flatMap(Self.hexValue),
                    let low = rest.popFirst().flatMap(Self.hexValue)
                else { return nil }
                bytes.append(high << 4 | low)
            default: bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
