import Foundation

/// `Tests/NetReachTests/Linux/Fixtures/path-changes.hex`: the datagrams the kernel sent for a dump
/// and for each of twelve changes, recorded by `record_path_changes.sh` next to it (which says how
/// the file is written). The changes end in the state the dump began with.
struct PathChangeFixture {
    struct Change {
        /// The name the recorder gave it (`route-delete`, `link-up`, ...) and the command it ran.
        var name: String
        var command: String
        var datagrams: [[UInt8]] = []
    }

    var dump: [[UInt8]] = []
    var changes: [Change] = []

    static let path = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Tests/NetReachTests/Linux/Fixtures/path-changes.hex")

    /// The fixture, or a message saying why it cannot be read.
    static func load() -> Result<PathChangeFixture, FixtureError> {
        guard let text = try? String(contentsOf: path, encoding: .utf8) else { return .failure(.unreadable(path.path)) }
        var fixture = PathChangeFixture()
        for line in text.split(separator: "\n")
        where !line.hasPrefix("#") && line != "dump" && !line.hasPrefix("kernel ") {
            if line.hasPrefix("change ") {
                let words = line.dropFirst("change ".count).split(separator: ":", maxSplits: 1)
                fixture.changes.append(
                    Change(name: String(words[0]), command: words.count > 1 ? String(words[1].dropFirst()) : ""))
                continue
            }
            guard let datagram = bytes(line) else { return .failure(.badLine(String(line.prefix(40)))) }
            if fixture.changes.isEmpty {
                fixture.dump.append(datagram)
            } else {
                fixture.changes[fixture.changes.count - 1].datagrams.append(datagram)
            }
        }
        guard !fixture.dump.isEmpty, !fixture.changes.isEmpty else { return .failure(.empty(path.path)) }
        return .success(fixture)
    }

    private static func bytes(_ hex: Substring) -> [UInt8]? {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let byte = UInt8(String(decoding: digits[index..<index + 2], as: UTF8.self), radix: 16) else {
                return nil
            }
            bytes.append(byte)
        }
        return bytes
    }

    enum FixtureError: Error, CustomStringConvertible {
        case unreadable(String)
        case badLine(String)
        case empty(String)

        var description: String {
            switch self {
            case .unreadable(let path): "cannot read \(path)"
            case .badLine(let line): "not a datagram in hex: \(line)"
            case .empty(let path): "no dump or no change in \(path)"
            }
        }
    }
}
