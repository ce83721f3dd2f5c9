import Foundation
import NetReachServe
import NetReachSystem
import NetReachTestSupport
import Testing

/// serve's YAML reader against PyYAML, in the same run: a corpus of every construct it reads
/// and refuses (the README's, DocC's and Deploy/'s files, exporter-toolkit's shapes), then
/// thousands of mutations of it; and inputs made to hurt.
@Suite("YAML reader", .offPool, .serialized)
struct YAMLReaderTests {
    private static func read(_ text: String) -> Result<YAMLNode?, YAMLError> {
        Result { () throws(YAMLError) in try YAMLReader.parse(text) }
    }

    @Test(.enabled("needs python3 with PyYAML (apt-get install python3-yaml)") { await PyYAMLReference.available() })
    func theCorpusReadsAsPyYAMLReadsItOrIsRefusedAsDocumented() async throws {
        let corpus = YAMLCase.corpus
        #expect(corpus.count >= 60)
        let verdicts = try await PyYAMLReference.read(corpus.map(\.text))
        var same = 0
        var refusedByBoth = 0
        var refusedByUs = 0
        var numbers = 0
        for (document, verdict) in zip(corpus, verdicts) {
            let ours = Self.read(document.text)
            switch document.expectation {
            case .same, .sameWithNumbersAsText:
                guard case .tree(let theirs) = verdict else {
                    Issue.record("\(document.name): PyYAML: \(verdict)")
                    continue
                }
                let root: YAMLNode?
                switch ours {
                case .success(let node): root = node
                case .failure(let error):
                    Issue.record("\(document.name): refused: \(error)")
                    continue
                }
                var numbersAsText: [String] = []
                if let difference = PyYAMLReference.difference(root, theirs, numbersAsText: &numbersAsText) {
                    Issue.record("\(document.name): \(difference)")
                    continue
                }
                var expected: [String] = []
                if case .sameWithNumbersAsText(let texts) = document.expectation { expected = texts }
                #expect(numbersAsText.sorted() == expected.sorted(), "\(document.name)")
                numbers += numbersAsText.count
                same += 1
            case .refused(let reason, let differs):
                switch ours {
                case .success(let node):
                    Issue.record("\(document.name): read as \(String(describing: node)), not refused")
                case .failure(let error):
                    #expect(error.reason.kind == reason, "\(document.name): \(error)")
                }
                if let differs {
                    #expect(verdict.accepts, "\(document.name): PyYAML refuses it too, yet the corpus says: \(differs)")
                    refusedByUs += 1
                } else {
                    #expect(!verdict.accepts, "\(document.name): PyYAML reads it: \(verdict)")
                    refusedByBoth += 1
                }
            }
        }
        print(
            "YAML corpus: \(corpus.count) documents: \(same) read as PyYAML reads them (\(numbers) plain scalars "
                + "YAML 1.1 reads as numbers or dates kept as text), \(refusedByBoth) refused by both, "
                + "\(refusedByUs) refused by design where PyYAML reads them")
    }

    /// Mutations of the corpus (deterministic: a seeded generator): never a crash or a hang, and
    /// whenever PyYAML reads a mutant without a construct we refuse by design, we read the same.
    @Test(
        .enabled("needs python3 with PyYAML (apt-get install python3-yaml)") { await PyYAMLReference.available() },
        .timeLimit(.minutes(5)))
    func mutationsReadAsPyYAMLReadsThem() async throws {
        var random = SeededRandom(seed: 0x5EED_0049)
        let seeds = YAMLCase.corpus.map(\.text).filter { !$0.isEmpty && $0.utf8.count < 20_000 }
        let mutants = (0..<3_000).map { _ in Self.mutate(seeds.randomElement(using: &random)!, using: &random) }
        let ours = mutants.map(Self.read)
        let verdicts = try await PyYAMLReference.read(mutants)
        var same = 0
        var bothRefuse = 0
        var unsupported = 0
        var onlyPyYAMLRefuses: [String] = []
        var numbers = 0
        for (index, (mine, verdict)) in zip(ours, verdicts).enumerated() {
            switch (mine, verdict) {
            case (.success(let node), .tree(let theirs)):
                var numbersAsText: [String] = []
                if let difference = PyYAMLReference.difference(node, theirs, numbersAsText: &numbersAsText) {
                    Issue.record("mutant \(index) \(mutants[index].debugDescription): \(difference)")
                } else {
                    same += 1
                    numbers += numbersAsText.count
                }
            case (.failure(let error), .tree):
                Issue.record("mutant \(index) \(mutants[index].debugDescription): PyYAML reads it, we say \(error)")
            case (_, .unsupported):
                unsupported += 1
            case (.failure, .error):
                bothRefuse += 1
            case (.success, .error(let reason)):
                onlyPyYAMLRefuses.append("\(mutants[index].debugDescription) (PyYAML: \(reason))")
            }
        }
        print(
            "YAML mutations: \(mutants.count): \(same) read as PyYAML reads them (\(numbers) YAML 1.1 numbers as text), "
                + "\(bothRefuse) refused by both, \(unsupported) with a construct refused by design, "
                + "\(onlyPyYAMLRefuses.count) read by us and refused by PyYAML")
        for example in onlyPyYAMLRefuses.prefix(50) { print("  read here, refused by PyYAML: \(example.suffix(400))") }
    }

    /// One to three edits of the kinds that break YAML: a character of its syntax put in, taken
    /// out or changed, a line doubled, dropped or swapped, an indentation changed.
    static func mutate(_ text: String, using random: inout SeededRandom) -> String {
        let alphabet: [Character] = [
            " ", " ", "\n", ":", "-", "#", "'", "\"", "[", "]", "{", "}", ",", "|", ">", "\t", "\\", "&", "*", "!", "?",
            "%", "@", "~", "0", "1", "a", ".", "+", "x", "é",
        ]
        var characters = Array(text)
        for _ in 0..<Int.random(in: 1...3, using: &random) {
            var lines = String(characters).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            let place = characters.isEmpty ? 0 : Int.random(in: 0..<characters.count, using: &random)
            let line = Int.random(in: 0..<lines.count, using: &random)
            switch Int.random(in: 0..<8, using: &random) {
            case 0: characters.insert(alphabet.randomElement(using: &random)!, at: place)
            case 1: if !characters.isEmpty { characters.remove(at: place) }
            case 2: if !characters.isEmpty { characters[place] = alphabet.randomElement(using: &random)! }
            case 3:
                lines.insert(lines[line], at: line)
                characters = Array(lines.joined(separator: "\n"))
            case 4:
                lines.remove(at: line)
                characters = Array(lines.joined(separator: "\n"))
            case 5:
                if line + 1 < lines.count { lines.swapAt(line, line + 1) }
                characters = Array(lines.joined(separator: "\n"))
            case 6:
                lines[line] = " " + lines[line]
                characters = Array(lines.joined(separator: "\n"))
            default:
                if lines[line].hasPrefix(" ") { lines[line].removeFirst() }
                characters = Array(lines.joined(separator: "\n"))
            }
        }
        return String(characters)
    }

    /// A pathological document, named in the test's output by its name alone: Swift Testing writes
    /// every argument of a test case out, and these are up to a megabyte each.
    struct Pathological: Sendable, CustomTestStringConvertible {
        var name: String
        var text: String
        var reason: YAMLReason
        var testDescription: String { name }

        init(_ name: String, _ text: String, _ reason: YAMLReason) {
            (self.name, self.text, self.reason) = (name, text, reason)
        }
    }

    @Test(
        .timeLimit(.minutes(2)),
        arguments: ([
            ("100,000 [", String(repeating: "[", count: 100_000), YAMLReason.tooDeep),
            ("100,000 {", String(repeating: "{a: ", count: 100_000), .tooDeep),
            ("100,000 '- ' on one line", String(repeating: "- ", count: 100_000) + "x", .tooDeep),
            (
                "100 nested block mappings",
                (0..<100).map { String(repeating: " ", count: $0) + "k\($0):" }.joined(separator: "\n"),
                .tooDeep
            ),
            ("1 MB unterminated double quote", "a: \"" + String(repeating: "x", count: 1 << 20), .unterminatedQuote),
            ("1 MB unterminated single quote", "a: '" + String(repeating: "x ", count: 1 << 19), .unterminatedQuote),
            ("1 MB unterminated flow sequence", "[" + String(repeating: "a, ", count: 1 << 18), .unterminatedFlow),
            ("1 MB of 'a: ' on one line", String(repeating: "a: ", count: 1 << 18), .syntax),
            ("1 MB of escapes never closed", "\"" + String(repeating: "\\\\", count: 1 << 19), .unterminatedQuote),
            ("an alias bomb", YAMLCase.corpus.first { $0.name == "an alias bomb" }!.text, .anchor),
            ("1 MB of lines of '-'", String(repeating: "-\n", count: 1 << 19) + "x: y", .syntax),
        ] as [(String, String, YAMLReason)]).map(Pathological.init))
    func pathologicalInputIsRefusedWithATypedError(_ input: Pathological) {
        switch Self.read(input.text) {
        case .success: Issue.record("\(input.name): read")
        case .failure(let error): #expect(error.reason.kind == input.reason, "\(input.name): \(error)")
        }
    }

    @Test(.timeLimit(.minutes(2)))
    func aMegabyteOnOneLineIsOneScalar() throws {
        let line = String(repeating: "abcdefgh ", count: (1 << 20) / 9)
        let root = try #require(try YAMLReader.parse("key: " + line + "\n"))
        #expect(root["key"]?.text == String(line.dropLast()))
        let flow = try #require(
            try YAMLReader.parse("[" + Array(repeating: "x", count: 100_000).joined(separator: ", ") + "]"))
        #expect(flow.sequence?.count == 100_000)
    }

    @Test func errorsSayWhereAndWhat() {
        let cases: [(String, String)] = [
            ("a: 1\nb: &x 2\n", "line 2, column 4: anchors (&name) are not supported"),
            ("a:\n  b: 1\n  b: 2\n", "line 3, column 3: the key \"b\" is given twice in this mapping"),
            ("a: \"open\n", "line 1, column 4: the quoted scalar that starts here is never closed"),
            ("x: [1,\n  2\n", "line 1, column 4: the [ or { that starts here is never closed"),
            ("a:\n\tb: 1\n", "line 2, column 1: a tab in indentation"),
            ("a: \"\\q\"\n", "line 1, column 5: bad escape \\q"),
            ("a: 1\n---\nb: 2\n", "line 2, column 1: a second document (---)"),
            ("a: b: c\n", "line 1, column 5: a mapping cannot start here"),
            ("a: \"1\"\n  b: 2\n", "line 2, column 3: this line is indented more than the keys of the mapping"),
        ]
        for (text, message) in cases {
            switch Self.read(text) {
            case .success: Issue.record("\(text.debugDescription): read")
            case .failure(let error): #expect("\(error)".hasPrefix(message), "\(text.debugDescription): \(error)")
            }
        }
    }

    @Test func scalarsResolveAsTheDocumentationSays() throws {
        let root = try #require(
            try YAMLReader.parse(
                "a: yes\nb: 'yes'\nc: Off\nd: y\ne: 53\nf: \"53\"\ng: 0x35\nh: ~\ni:\nj: -7\nk: 065\nl: 99999999999999999999\n"
            ))
        #expect(root["a"]?.bool == true && root["b"]?.bool == nil && root["b"]?.text == "yes")
        #expect(root["c"]?.bool == false && root["d"]?.bool == nil)
        #expect(root["e"]?.integer == 53 && root["f"]?.integer == nil && root["f"]?.text == "53")
        #expect(root["g"]?.integer == nil && root["g"]?.scalar?.isOtherNumber == true)
        #expect(root["h"]?.isNull == true && root["i"]?.isNull == true && root["h"]?.text == nil)
        #expect(root["j"]?.integer == -7 && root["k"]?.integer == nil)
        #expect(root["l"]?.integer == nil && root["l"]?.text == "99999999999999999999")
    }
}
