#if canImport(Glibc)
import Glibc
#endif

/// Checks a property of the code under test: when it does not hold, says which and aborts, and
/// libFuzzer reports the input as a crash (`crash-<sha1>` in its artifact directory), as it does
/// for a trap or an AddressSanitizer report.
public func expect(
    _ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String, file: StaticString = #fileID,
    line: UInt = #line
) {
    guard !condition() else { return }
    fputs("property violated at \(file):\(line): \(message())\n", stderr)
    abort()
}

/// `bytes` as lowercase hex, for failure messages.
public func hex<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
    let digits = Array("0123456789abcdef".utf8)
    var out: [UInt8] = []
    for byte in bytes { out += [digits[Int(byte >> 4)], digits[Int(byte & 0xF)]] }
    return String(decoding: out, as: UTF8.self)
}
