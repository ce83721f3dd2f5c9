/// SplitMix64 (Steele, Lea and Flood 2014; Vigna's reference code): a tiny, fast generator whose
/// whole state is one seed, so anything drawn from it (the conditioner's jitter and loss, a fuzz
/// run) is the same again from the same seed.
///
/// ```swift
/// var random = SeededRandom(seed: 42)
/// let delay = Double.random(in: 0..<1, using: &random)
/// let noise = random.bytes(count: 16)
/// ```
package struct SeededRandom: RandomNumberGenerator, Sendable {
    private var state: UInt64

    package init(seed: UInt64) { state = seed }

    package mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// `count` bytes, eight from each number drawn, lowest byte first.
    package mutating func bytes(count: Int) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        var index = 0
        while index < count {
            let word = next()
            for shift in stride(from: 0, to: 64, by: 8) where index < count {
                bytes[index] = UInt8(truncatingIfNeeded: word >> UInt64(shift))
                index += 1
            }
        }
        return bytes
    }
}
