import Foundation
import Testing

@testable import NetReachSystem

/// `percentDecoded` against Foundation's `removingPercentEncoding`, which it replaces: the same
/// text wherever the escapes are well formed UTF-8, and `nil` where Foundation would make U+FFFD.
@Suite("Percent-decoding")
struct PercentDecodingTests {
    @Test(
        "Well-formed text decodes as Foundation decodes it",
        arguments: [
            "", "plain", "caf%C3%A9", "%41%42%43", "a%2Fb%3Fc%3D%26", "%e2%82%ac", "%F0%9F%98%80", "100%25",
            "user%40example.com", "+stays+", "%2B", "%20%09",
        ])
    func wellFormedAsFoundation(_ text: String) {
        #expect(text.percentDecoded() == text.removingPercentEncoding)
    }

    @Test(
        "A malformed escape or bytes that are not UTF-8 give nil",
        arguments: [
            "%", "%4", "%G1", "%4G", "a%", "%A9", "%C3", "%C3%28", "%FF%FE", "%ED%A0%80",
        ])
    func malformedIsNil(_ text: String) {
        #expect(text.percentDecoded() == nil)
        #expect(text.percentDecoded(plusIsSpace: true) == nil)
    }

    @Test func plusIsASpaceOnlyWhenAsked() {
        #expect("a+b%2B".percentDecoded(plusIsSpace: true) == "a b+")
        #expect("a+b%2B".percentDecoded() == "a+b+")
        #expect(Substring("x+y").percentDecoded(plusIsSpace: true) == "x y")
    }
}
