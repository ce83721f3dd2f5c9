import Foundation
import NetReachTestSupport
import Testing

/// The test support's `byteDifference`, which big bodies are compared with: `nil` only when equal,
/// and at once, with where they part, when not.
@Suite("byte difference", .offPool)
struct ByteDifferenceTests {
    @Test func equalBytesHaveNoDifferenceAndUnequalOnesSayWhereTheyPart() {
        let body = Data((0..<1_000_000).map { UInt8(truncatingIfNeeded: $0 &* 31) })
        #expect(byteDifference(body, body) == nil)
        #expect(byteDifference(body.prefix(2048), body) == "2048 bytes of 1000000; they part at byte 2048")
        var changed = body
        changed[900_000] ^= 0xFF
        #expect(
            byteDifference(changed, body)?.hasPrefix("1000000 bytes of 1000000; they part at byte 900000 (got ") == true
        )
        #expect(byteDifference([UInt8](), Data()) == nil)
    }
}
