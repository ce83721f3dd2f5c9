import Foundation

/// `nil` when `actual` is `expected` byte for byte; otherwise where they part, in a few words.
///
/// For bodies of kilobytes and more: `#expect(actual == expected)` on two `Data` (or arrays) makes Swift
/// Testing describe a mismatch with a diff of the two collections, whose time grows with the
/// square of their difference (a 5 MB body that arrived wrong kept a CI run busy for many minutes,
/// where the test should have failed at once).
///
/// ```swift
/// #expect(byteDifference(body, payload) == nil)
/// // "2048 bytes of 5000000; they part at byte 2048" when the body was cut short
/// ```
public func byteDifference(_ actual: some Collection<UInt8>, _ expected: some Collection<UInt8>) -> String? {
    guard !actual.elementsEqual(expected) else { return nil }
    let common = zip(actual, expected).prefix { $0 == $1 }.count
    var what = "\(actual.count) bytes of \(expected.count); they part at byte \(common)"
    if common < actual.count, common < expected.count {
        let got = actual.dropFirst(common).prefix(16).map { String(format: "%02x", $0) }.joined()
        let wanted = expected.dropFirst(common).prefix(16).map { String(format: "%02x", $0) }.joined()
        what += " (got \(got), expected \(wanted))"
    }
    return what
}
