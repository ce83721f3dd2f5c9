/// JSON string literals written by hand, escaped exactly as Foundation's `JSONEncoder` escapes
/// them (with `.withoutEscapingSlashes`): `"` and `\`, the control characters (`\b \f \n \r \t`
/// by name, the others as `\u00XX`), everything else as it is. For the command line's and
/// `serve`'s one-line JSON, which is written on every change; tests hold it to the encoder.
package enum JSONText {
    /// `value` as a JSON string literal, quotes included.
    package static func string(_ value: String) -> String {
        var text = JSONBytes(capacity: value.utf8.count + 2)
        text.appendString(value)
        return text.text
    }
}

/// A line of JSON built as UTF-8 bytes in one buffer: literals are copied, numbers written digit
/// by digit, and the text is made once at the end. Building the same line with `String` appends and
/// interpolations took ~21,000 instructions per `watch --json` line (callgrind; a fifth of a
/// change's work); with an array of bytes ~6,800, most of them the array's checks on each append;
/// with this buffer of its own ~4,300, timestamp and the final string included (Benchmarks/RESULTS.md,
/// section 32).
package struct JSONBytes: ~Copyable {
    private var start: UnsafeMutablePointer<UInt8>
    private var count = 0
    private var capacity: Int

    /// An empty buffer with room for `capacity` bytes (it grows as needed).
    package init(capacity: Int) {
        self.capacity = max(capacity, 16)
        start = .allocate(capacity: self.capacity)
    }

    deinit { start.deallocate() }

    /// The bytes as text.
    package var text: String { String(decoding: UnsafeBufferPointer(start: start, count: count), as: UTF8.self) }

    /// Runs `body` on the bytes written so far, which are valid only during the call: to write
    /// them out with no string made of them first.
    package func withBytes<Result, Failure: Error>(
        _ body: (UnsafeRawBufferPointer) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        try body(UnsafeRawBufferPointer(start: start, count: count))
    }

    /// Makes room for `extra` more bytes.
    private mutating func reserve(_ extra: Int) {
        guard count + extra > capacity else { return }
        let grown = max(capacity * 2, count + extra)
        let moved = UnsafeMutablePointer<UInt8>.allocate(capacity: grown)
        moved.initialize(from: start, count: count)
        start.deallocate()
        start = moved
        capacity = grown
    }

    /// Appends one byte.
    package mutating func append(byte: UInt8) {
        reserve(1)
        start[count] = byte
        count += 1
    }

    /// Appends `literal` as it is (JSON punctuation and keys).
    package mutating func append(_ literal: StaticString) {
        literal.withUTF8Buffer { append(bytes: $0) }
    }

    private mutating func append(bytes: UnsafeBufferPointer<UInt8>) {
        guard let source = bytes.baseAddress else { return }
        reserve(bytes.count)
        (start + count).initialize(from: source, count: bytes.count)
        count += bytes.count
    }

    /// Appends `text` in quotes, unescaped: for text that cannot need escapes (a raw value of ours,
    /// an address).
    package mutating func appendQuoted(verbatim text: String) {
        append(byte: UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { append(bytes: $0) }
        append(byte: UInt8(ascii: "\""))
    }

    /// Appends `address`'s text (``IPAddress/description``) in quotes.
    package mutating func appendQuoted(_ address: IPAddress) {
        append(byte: UInt8(ascii: "\""))
        address.appendText(to: &self)
        append(byte: UInt8(ascii: "\""))
    }

    /// Appends `true` or `false`.
    package mutating func append(_ value: Bool) { value ? append("true") : append("false") }

    /// Appends `value` in decimal.
    package mutating func append(_ value: Int) { append(value, width: 1) }

    /// Appends `value` in decimal, with leading zeros to at least `width` digits (a `-` first for
    /// a negative value, not counted).
    package mutating func append(_ value: Int, width: Int) {
        if value < 0 { append(byte: UInt8(ascii: "-")) }
        let magnitude = value.magnitude
        var power: UInt = 1
        var digits = 1
        while power <= magnitude / 10 {
            power *= 10
            digits += 1
        }
        for _ in digits..<max(digits, width) { append(byte: UInt8(ascii: "0")) }
        var rest = magnitude
        while power > 0 {
            append(byte: UInt8(ascii: "0") + UInt8(rest / power))
            rest %= power
            power /= 10
        }
    }

    /// Appends `value` as a JSON string literal, quotes included.
    package mutating func appendString(_ value: String) {
        append(byte: UInt8(ascii: "\""))
        var value = value
        value.withUTF8 { utf8 in
            guard utf8.contains(where: Self.needsEscape) else {
                append(bytes: utf8)
                return
            }
            // Every byte to escape is ASCII; the bytes of other characters are all 0x80 or more.
            for byte in utf8 {
                guard Self.needsEscape(byte) else {
                    append(byte: byte)
                    continue
                }
                switch byte {
                case UInt8(ascii: "\""): append("\\\"")
                case UInt8(ascii: "\\"): append("\\\\")
                case UInt8(ascii: "\n"): append("\\n")
                case UInt8(ascii: "\r"): append("\\r")
                case UInt8(ascii: "\t"): append("\\t")
                case 0x08: append("\\b")
                case 0x0C: append("\\f")
                default:
                    append("\\u00")
                    append(byte: Self.hexDigit(byte >> 4))
                    append(byte: Self.hexDigit(byte & 0xF))
                }
            }
        }
        append(byte: UInt8(ascii: "\""))
    }

    private static func needsEscape(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\")
    }

    /// Lowercase, as `JSONEncoder` writes `\u001f` (and `inet_ntop` an IPv6 group).
    package static func hexDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10
    }
}
