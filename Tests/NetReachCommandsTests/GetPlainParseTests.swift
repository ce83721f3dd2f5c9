import ArgumentParser
import Foundation
import NetReachTestSupport
import Testing

@testable import NetReachCommands

/// `get`'s plain parse (``GetCommand/plainParse(_:)``) against ArgumentParser on the same words:
/// whenever it gives a command, ArgumentParser gives the same one, value for value; on the
/// ordinary forms it does give one (or it would save nothing); and it knows every option `get`'s
/// help lists. Off the concurrency pool: its ~1,000 parses run for seconds without a suspension
/// point, and on two cores they held the pool from another suite's transfer, whose stall timeout
/// then fired (a CI run of `22696ae`).
@Suite("get's plain parse gives what ArgumentParser gives", .offPool)
struct GetPlainParseTests {
    static let url = "https://example.com/a?b=c"

    /// Files and a directory for the options that check theirs.
    final class Paths {
        private let temporary: TemporaryDirectory
        let directory: String
        let file: String
        let missing: String

        init() throws {
            temporary = try TemporaryDirectory("netreach-plain-parse")
            directory = temporary.url.path
            file = temporary.path("ca.pem")
            try Data("-----BEGIN CERTIFICATE-----\n".utf8).write(to: URL(fileURLWithPath: file))
            missing = temporary.path("missing.pem")
        }

        deinit { temporary.remove() }
    }

    private static func contents(_ command: GetCommand) -> String { DirectParseTests.contents(command) }

    /// Where two parses differ: their first differing lines, or nil.
    private static func difference(_ plain: GetCommand, _ parsed: GetCommand) -> String? {
        let left = contents(plain).split(separator: "\n")
        let right = contents(parsed).split(separator: "\n")
        guard left != right else { return nil }
        let at = zip(left, right).prefix { $0 == $1 }.count
        let context = left[..<at].last(where: { $0.contains("▿ _") }) ?? ""
        let plainLine = left.dropFirst(at).first ?? "(end)"
        let parsedLine = right.dropFirst(at).first ?? "(end)"
        return "\(context) | plain: \(plainLine) | ArgumentParser: \(parsedLine)"
    }

    /// ArgumentParser's parse of `words`, as `netreach get` makes it (nil: an error or help).
    private static func argumentParser(_ words: [String]) -> GetCommand? {
        try? GetCommand.parseAsRoot(words) as? GetCommand
    }

    /// Checks the plain parse of `words` against ArgumentParser's; returns whether it gave one.
    @discardableResult
    private static func compare(_ words: [String], sourceLocation: SourceLocation = #_sourceLocation) -> Bool {
        guard let plain = GetCommand.plainParse(words[...]) else { return false }
        guard let parsed = argumentParser(words) else {
            Issue.record(
                "\(words): the plain parse gave a command, ArgumentParser none", sourceLocation: sourceLocation)
            return true
        }
        let difference = difference(plain, parsed)
        #expect(difference == nil, "\(words)", sourceLocation: sourceLocation)
        return true
    }

    /// Valid values, then values ArgumentParser or a check refuses, per option.
    private static func values(_ option: PlainOption, _ paths: Paths) -> (valid: [String], refused: [String]) {
        switch option {
        case .method: (["POST", "delete", "PROPFIND"], ["NOT A METHOD"])
        case .header:
            (["A: b", "X-Y:z", "Accept:  */*  ", "Accept:", "X-Empty;"], ["no colon", ": empty name", "X;y"])
        case .userAgent: (["curl/8.0", "my agent/1.0 (x)"], [])
        case .resolve:
            (
                ["example.com:443:127.0.0.1", "a.test:80:[::1],127.0.0.1", "*:8443:::1", "+b.test:443:10.0.0.1"],
                ["garbage", "example.com:0:127.0.0.1", "example.com:443:", "example.com:443:not-an-address"]
            )
        case .connectTo:
            (
                ["example.com:443:127.0.0.1:8443", "::localhost:", "[::1]:80:[::1]:8080", "a.test::b.test:"],
                ["garbage", "a:70000:b:1", "a:443:[::1", "a:443:b:x"]
            )
        case .data: (["x=1", "@-", "@" + paths.missing, "{\"a\": [1, 2]}"], [])
        case .user: (["user:secret", "a:"], ["nocolon"])
        case .maxTime, .timeout: (["30s", "1m30s", "500ms", "2", "1.5s"], ["0", "abc", "3x", "1s2m"])
        case .stallTimeout: (["30s", "2m500ms", "10"], ["0", "forever"])
        case .connectTimeout: (["5s", "250ms"], ["0", "x"])
        case .retries: (["0", "5", "10", "+3", "007"], ["11", "x", "2.5", " 3"])
        case .maxRedirs: (["0", "50"], ["51", "many"])
        case .output: (["/dev/null", "out.bin", "a dir/with space"], [])
        case .cacert: ([paths.file], [paths.missing, paths.directory])
        case .capath: ([paths.directory], [paths.file, paths.missing])
        case .cert: ([paths.file], [paths.missing])
        case .key: ([], [paths.file]) // valid only with --cert: see the combinations
        case .proxy:
            (
                ["http://proxy.example:3128", "proxy.example", "http://u:p@10.0.0.1:8080"],
                ["ftp://proxy.example", "http://"]
            )
        case .noproxy: (["localhost,127.0.0.1", "*", ".example.com"], [])
        default: ([], [])
        }
    }

    /// Every way `option` can be written with `value`: each spelling apart from its value, and the
    /// long one joined to it with `=`.
    private static func writings(_ option: PlainOption, _ value: String?) -> [[String]] {
        guard let value else { return option.spellings.map { [$0] } }
        return option.spellings.map { [$0, value] } + [[option.spellings[0] + "=" + value]]
    }

    @Test func theCommandItGivesHasEveryPropertySet() throws {
        let command = try #require(GetCommand.plainParse([Self.url]))
        let text = Self.contents(command)
        // A property wrapper that was never given a value dumps as its definition, and stops the
        // process when read.
        #expect(!text.contains("definition"), "\(text)")
        let difference = Self.difference(command, try #require(Self.argumentParser([Self.url])))
        #expect(difference == nil)
    }

    @Test func eachOptionAloneInEveryWritingAndValue() throws {
        let paths = try Paths()
        for option in PlainOption.allCases {
            if option.isFlag {
                for words in Self.writings(option, nil) {
                    for line in [words + [Self.url], [Self.url] + words] {
                        let given = Self.compare(line)
                        #expect(given == (Self.argumentParser(line) != nil), "\(line)")
                    }
                }
                continue
            }
            let (valid, refused) = Self.values(option, paths)
            for value in valid {
                for words in Self.writings(option, value) {
                    // Valid alone: the plain parse must take it, or it saves nothing.
                    #expect(Self.compare([Self.url] + words), "\([Self.url] + words) was not parsed plainly")
                    #expect(Self.compare(words + [Self.url]), "\(words + [Self.url]) was not parsed plainly")
                }
            }
            for value in refused {
                for words in Self.writings(option, value) {
                    #expect(!Self.compare([Self.url] + words), "\([Self.url] + words) should be refused")
                    #expect(Self.argumentParser([Self.url] + words) == nil, "\([Self.url] + words)")
                }
            }
        }
    }

    @Test func combinationsGiveWhatArgumentParserGives() throws {
        let paths = try Paths()
        // A fixed sequence (SplitMix64), so a failure names a line that fails again.
        var state: UInt64 = 0x6E65_7472_6561_6368
        func next(_ bound: Int) -> Int {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return Int((z ^ (z >> 31)) % UInt64(bound))
        }
        var plainly = 0
        var refused = 0
        let options = PlainOption.allCases
        for _ in 0..<600 {
            var words: [String] = []
            var used: [PlainOption] = []
            for _ in 0..<(1 + next(6)) {
                let option = options[next(options.count)]
                // Given twice (but for --header, --resolve, --connect-to) is ArgumentParser's to
                // read: tested below.
                if !option.isRepeatable && used.contains(option) { continue }
                let value: String?
                if option.isFlag {
                    value = nil
                } else if option == .key {
                    value = paths.file
                } else {
                    let valid = Self.values(option, paths).valid
                    guard !valid.isEmpty else { continue }
                    value = valid[next(valid.count)]
                }
                used.append(option)
                let writings = Self.writings(option, value)
                words += writings[next(writings.count)]
            }
            words.insert(Self.url, at: next(words.count + 1))
            let given = Self.compare(words)
            // These words are all in forms it reads: it gives a command exactly when
            // ArgumentParser does (which refuses some combinations: --key without --cert, ...).
            #expect(given == (Self.argumentParser(words) != nil), "\(words)")
            if given { plainly += 1 } else { refused += 1 }
        }
        // Most combinations are valid; some are refused by a check.
        #expect(plainly > 300 && refused > 20, "\(plainly) parsed, \(refused) refused")
    }

    @Test(arguments: [
        // ArgumentParser's own words.
        ["--help"], ["-h"], ["--version"], ["--generate-completion-script", "bash"], ["--experimental-dump-help"],
        // Forms left to ArgumentParser: bundled or attached short options, `--`, values that
        // look like options, empty values, an option or flag given twice.
        ["-qI", url], ["-qo", "out", url], ["-oout", url], ["-o=out", url], ["--", url], [url, "--", "-q"],
        ["--retries", "-1", url], ["-H", "-x: y", url], ["--max-time", "-5s", url], ["--output=", url],
        ["--proxy", "", url], ["--proxy=", url], ["-o", "", url], ["-q", "-q", url],
        ["--retries", "1", "--retries", "2", url],
        ["--quiet=yes", url], ["-q", url, "-"],
        // Not an option of get's, or hidden, or misspelt; a URL missing, twice, or empty.
        ["--transport", "urlsession", url], ["--bogus", url], ["--Quiet", url], ["-quiet", url], ["--output"],
        [], ["-q"], [url, url], [""], ["get", url],
        // A check refuses.
        ["ftp://example.com/"], ["https:///path"], ["--continue", url], ["--write-error-body", url],
        ["--head", "-o", "out", url], ["--head", "-d", "x", url], ["--head", "-X", "POST", url],
        ["--max-time", "1s", "--timeout", "1s", url], ["--continue", "-o", "f", "-H", "Range: bytes=0-", url],
        ["--create-dirs", url], ["--create-dirs", "-o", "-", url],
        // Values that start with '-' or are empty, which ArgumentParser takes for these.
        ["-A", "", url], ["--user-agent=", url], ["--resolve", "-example.com:443", url],
    ])
    func whatItLeavesToArgumentParser(_ words: [String]) {
        #expect(GetCommand.plainParse(words[...]) == nil)
        // And the tree's parse of the same line (ArgumentParser's answer, or its error).
        let tree = try? NetreachCommand.parseAsRoot(["get"] + words)
        if let direct = NetreachCommand.parseDirectly(["get"] + words) {
            #expect(tree.map { type(of: $0) == type(of: direct) } == true)
        }
    }

    @Test func itKnowsEveryOptionGetsHelpLists() {
        let help = NetreachCommand.helpMessage(for: GetCommand.self, columns: 200)
        // The options' own lines (`  -o, --output <file>   Write the body...`): their names, before
        // the description (which the discussion's prose, naming curl's options, is not).
        var listed = Set<String>()
        for line in help.split(separator: "\n") {
            let trimmed = line.drop { $0 == " " }
            guard trimmed.hasPrefix("-") else { continue }
            let names = trimmed.prefix { $0 != "<" }.split(separator: "  ").first ?? ""
            for word in names.split(whereSeparator: { $0 == " " || $0 == "," }) where word.hasPrefix("--") {
                listed.insert(String(word.prefix { $0 == "-" || $0 == "." || $0.isLetter || $0.isNumber }))
            }
        }
        let known = Set(PlainOption.allCases.flatMap(\.spellings))
        let missing = listed.subtracting(known).subtracting(["--help", "--version"])
        #expect(missing.isEmpty, "options in get's help the plain parse does not know: \(missing.sorted())")
        #expect(listed.isSuperset(of: known.filter { $0.hasPrefix("--") }), "\(known.subtracting(listed).sorted())")
    }

    @Test func netreachParsesAnOrdinaryGetPlainly() throws {
        let words = ["get", "-q", "-o", "/dev/null", "http://127.0.0.1:8080/a"]
        let direct = try #require(NetreachCommand.parseDirectly(words) as? GetCommand)
        #expect(Self.contents(direct) == Self.contents(try #require(GetCommand.plainParse(words.dropFirst()))))
    }
}
