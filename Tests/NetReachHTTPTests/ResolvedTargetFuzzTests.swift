import Foundation
import NetReachSystem
import NetReachTestSupport
import Testing

@testable import NetReachHTTP

/// Random and mutated URLs through ``ResolvedTarget/resolve(_:queryItems:base:)``: nothing crashes,
/// and whatever resolves can be sent as it reads (see ``OriginInvariant``).
///
/// Deterministic: every shard draws from a SeededRandom seeded from `NETREACH_FUZZ_SEED` (hex; or the fixed
/// default) and its shard number, so a failure reproduces. A failure reports the seed, the shard and
/// the input. A crash cannot report anything, so to find the input that crashed, run again with
/// `NETREACH_FUZZ_TRACE=1`, which prints every input before it is tried. `NETREACH_FUZZ_ITERATIONS`
/// changes the number of inputs per shard.
@Suite("ResolvedTarget fuzzing", .offPool)
struct ResolvedTargetFuzzTests {
    static let defaultSeed: UInt64 = 0x4E65_7452_6561_6368 // "NetReach"
    static let shards = 0..<4
    /// 4 × 50 000 = 200 000 inputs.
    static let defaultIterations = 50_000

    static var seed: UInt64 {
        ProcessInfo.processInfo.environment["NETREACH_FUZZ_SEED"].flatMap { UInt64($0, radix: 16) } ?? defaultSeed
    }
    static var iterations: Int {
        ProcessInfo.processInfo.environment["NETREACH_FUZZ_ITERATIONS"].flatMap { Int($0) } ?? defaultIterations
    }
    static var tracing: Bool { ProcessInfo.processInfo.environment["NETREACH_FUZZ_TRACE"] == "1" }

    @Test(arguments: shards)
    func randomAndMutatedURLsResolveToOneSendableOrigin(_ shard: Int) {
        let seed = Self.seed
        var random = SeededRandom(seed: seed &+ UInt64(shard) &* 0x9E37_79B9_7F4A_7C15)
        var failures = 0
        var resolved = 0
        let bases = FuzzCorpus.bases.map { ResolvedTarget.Base(URL(string: $0)!) }
        for iteration in 0..<Self.iterations where failures < 5 {
            let urlText = FuzzCorpus.mutatedURL(&random)
            let pathText = FuzzCorpus.mutatedPath(&random)
            let items = FuzzCorpus.queryItems(&random)
            let base = bases[Int(random.next() % UInt64(bases.count))]
            if Self.tracing {
                print(
                    "fuzz seed \(String(seed, radix: 16)) shard \(shard) #\(iteration): \(urlText.debugDescription) \(pathText.debugDescription)"
                )
            }
            // One way in per input, so that many inputs fit in a few seconds: as an absolute URL, as a path
            // joined to a base from the corpus, or as a base with a path joined to it.
            let input: String
            let problems: [String]
            switch iteration % 3 {
            case 0:
                input = "url \(urlText.debugDescription)"
                problems = OriginInvariant.checkURL(urlText, items: items, resolved: &resolved)
            case 1:
                input = "path \(pathText.debugDescription) against \(base.url.absoluteString)"
                problems = OriginInvariant.checkPath(pathText, items: items, base: base, resolved: &resolved)
            default:
                input = "path \(pathText.debugDescription) against base \(urlText.debugDescription)"
                problems =
                    URL(string: urlText).map {
                        OriginInvariant.checkPath(
                            pathText, items: items, base: ResolvedTarget.Base($0), resolved: &resolved)
                    } ?? []
            }
            for problem in problems {
                failures += 1
                Issue.record(
                    """
                    \(problem)
                    input: \(input), query items \(items)
                    reproduce: NETREACH_FUZZ_SEED=\(String(seed, radix: 16)), shard \(shard), iteration \(iteration)
                    """)
            }
        }
        // A fuzzer that never gets past the front door tests nothing: a good share must resolve.
        #expect(resolved > Self.iterations / 10, "only \(resolved) of \(Self.iterations) inputs resolved at all")
    }

    /// Inputs found while writing the fuzzer (probing what Foundation on Linux does), each checked on
    /// every run: the authority `url` resolves to as a `.url` target (`nil`: refused), and the
    /// invariant for `url` and for `path` against every corpus base.
    static let regressions: [(url: String, authority: String?, path: String, why: String)] = [
        (
            "http://evil.test%2F.trusted.example/x", nil, "//evil.test%2F.trusted.example/x",
            "Foundation connects to the decoded host"
        ),
        ("http://evil.test%23.trusted.example/x", nil, "//a%23b/", "decoded # in the host"),
        ("http://evil.test%40.trusted.example/x", nil, "//a%40b/", "decoded @ in the host"),
        ("http://a%3A80/x", nil, "//a%3A80/x", "a decoded : would turn part of the host into a port"),
        ("http://a%00b/x", nil, "//a%00b/", "NUL in the host"),
        ("http://bücher%2F.example/", nil, "//bücher%2F.example/", "IDNA leaves the %2F in place: xn--bcher%2f-65a"),
        (
            "http://b%C3%BCcher.example/", nil, "//b%C3%BCcher.example/",
            "percent-encoded UTF-8 host, which URLComponents.host decodes"
        ),
        (
            "https://bücher.example/", "xn--bcher-kva.example", "//BÜCHER.example/x",
            "Foundation converts it when it parses"
        ),
        ("http://\u{200B}a.example/", "a.example", "//a\u{200B}.example/", "IDNA drops the zero-width space"),
        ("http://Ａ.example/", "a.example", "//ａ.example/", "IDNA maps full-width letters"),
        (
            "http://a:99999999999999999999/", nil, "//a:99999999999999999999/",
            "URLComponents.port is nil for an overflowing port"
        ),
        ("http://a:0080/", "a:80", "//a:0080/x", "leading zeros in the port"),
        ("http://a:/x", "a", "//a:/x", "empty port"),
        ("http://[::1::2]/", nil, "//[::1::2]/", "Foundation accepts an invalid IPv6 literal"),
        ("http://[1]/", nil, "//[1]/", "Foundation accepts an invalid IPv6 literal"),
        ("http://[v1.x]/", nil, "//[v1.x]/", "IPvFuture"),
        ("http://[fe80::1%lo]:8/", "[fe80::1%25lo]:8", "//[fe80::1%25lo]/", "zone id: Foundation writes %25"),
        ("http://[::1%25%41]/", nil, "//[::1%]/", "percent-encoded zone, empty zone"),
        ("http://a@b@c/", "c", "//a@b@c/", "Foundation encodes the first @ of two as user info"),
        ("http://user@/x", nil, "//user@/x", "user info, no host"),
        ("http://u%FF@a/", nil, "//u%FF:p@a/", "user info that is not UTF-8"),
        ("http://a%3Ab:pw@h/", nil, "//u:p%0Aw@h/", "user info Basic cannot carry"),
        ("HTTP://Service.Test/x", "Service.Test", "HTTP://Service.Test/y", "uppercase scheme"),
        ("http://a/%zz", "a", "%zz", "Foundation makes a .url %25zz before resolve sees it; a .path is refused"),
        ("http://a/\u{7F}?\u{1}#\u{1}", "a", "\u{7F}?\u{1}#\u{1}", "control characters Foundation encodes"),
        ("http://a/./s", "a", "./s", "dot segments"),
        ("http://a?b", "a", "?", "empty path, query"),
        ("http://a#", "a", "#", "empty fragment"),
    ]

    @Test func knownTrickyInputsKeepTheInvariant() {
        var resolved = 0
        for (index, regression) in Self.regressions.enumerated() {
            guard let url = URL(string: regression.url) else {
                Issue.record("regression \(index): Foundation no longer parses \(regression.url.debugDescription)")
                continue
            }
            let authority = ResolvedTarget.resolve(.url(url), queryItems: [], base: nil)?.authority
            #expect(authority == regression.authority, "regression \(index): \(regression.why)")
            for base in FuzzCorpus.bases {
                let problems = OriginInvariant.problems(
                    url: regression.url, path: regression.path, items: [],
                    base: ResolvedTarget.Base(URL(string: base)!), resolved: &resolved)
                for problem in problems {
                    Issue.record("regression \(index) (\(regression.why)) against \(base): \(problem)")
                }
            }
        }
    }

    @Test func theIPv6ReaderAgreesWithInetPton() {
        var random = SeededRandom(seed: Self.seed)
        let pieces = [
            "::", ":", "0", "1", "ff", "FFFF", "12345", "db8", ".", "1.2.3.4", "255", "256", "01", "0.0.0.0", "g", "",
        ]
        var mismatches: [String] = []
        var valid = 0
        for _ in 0..<20_000 {
            let text = (0..<Int(random.next() % 12)).map { _ in pieces[Int(random.next() % UInt64(pieces.count))] }
                .joined()
            var address = in6_addr()
            let cLibrary = inet_pton(AF_INET6, text, &address) == 1
            if ResolvedTarget.Origin.isIPv6Address(text[...]) != cLibrary, mismatches.count < 10 {
                mismatches.append(text)
            }
            if cLibrary { valid += 1 }
        }
        #expect(valid > 200, "the generator makes enough valid addresses to compare on")
        #expect(
            mismatches.isEmpty,
            "seed \(String(Self.seed, radix: 16)): the reader and inet_pton disagree on \(mismatches)")
    }

    @Test func splitMix64IsTheReferenceGenerator() {
        // The reference sequence for seed 1234567 (Vigna's splitmix64.c): failures reproduce only
        // if the generator is exactly this one.
        var random = SeededRandom(seed: 1_234_567)
        #expect(
            (0..<3).map { _ in random.next() } == [
                6_457_827_717_110_365_317, 3_203_168_211_198_807_973, 9_817_491_932_198_370_423,
            ])
    }
}

/// What every resolved target must satisfy, whatever the input: an http(s) scheme in lowercase, an
/// authority without user info whose host is the one Foundation connects to, for the input as much
/// as for the URL a ``Response`` carries, a port in 1...65535, and a path and URL with no raw
/// space or control character. A `.path` joined the fast way must equal the general way.
enum OriginInvariant {
    /// Every broken promise for `url` as a target and as a base, and for `path` (with `items`)
    /// against `base` and against `url`; empty when all hold. `resolved` counts non-nil results.
    static func problems(
        url: String, path: String, items: [URLQueryItem], base: ResolvedTarget.Base,
        resolved: inout Int
    ) -> [String] {
        checkURL(url, items: items, resolved: &resolved)
            + checkPath(path, items: items, base: base, resolved: &resolved)
            + (URL(string: url).map {
                checkPath(path, items: items, base: ResolvedTarget.Base($0), resolved: &resolved)
            } ?? [])
    }

    /// `url` as an absolute target.
    static func checkURL(_ url: String, items: [URLQueryItem], resolved: inout Int) -> [String] {
        guard let parsed = URL(string: url) else { return [] }
        let target = ResolvedTarget.resolve(.url(parsed), queryItems: items, base: nil)
        if target != nil { resolved += 1 }
        return check(target, input: parsed, what: ".url")
    }

    /// `path` joined to `base`, both ways.
    static func checkPath(
        _ path: String, items: [URLQueryItem], base: ResolvedTarget.Base, resolved: inout Int
    ) -> [String] {
        let target = ResolvedTarget.resolve(.path(path), queryItems: items, base: base)
        var problems = check(
            target, input: URL(string: path, relativeTo: base.url)?.absoluteURL,
            what: ".path against \(base.url.absoluteString)")
        if let parts = base.parts, let fast = ResolvedTarget.join(path, queryItems: items, to: parts) {
            let general = ResolvedTarget.resolveGenerally(.path(path), queryItems: items, baseURL: base.url)
            if fast != general {
                problems.append("the fast way gives \(fast), the general way \(String(describing: general))")
            }
        }
        if target != nil { resolved += 1 }
        return problems
    }

    /// The promises for one result; `input` is the URL Foundation made of what was asked for.
    static func check(_ target: ResolvedTarget?, input: URL?, what: String) -> [String] {
        guard let target else { return [] }
        var problems: [String] = []
        func fail(_ text: String) { problems.append("\(what): \(text) in \(target)") }

        if target.scheme != "http" && target.scheme != "https" { fail("scheme \(target.scheme)") }
        if target.authority.contains("@") { fail("user info in the authority") }
        if !isVisibleASCII(target.authority) { fail("raw space, control or non-ASCII character in the authority") }
        if !target.pathAndQuery.hasPrefix("/") { fail("path does not start with /") }
        if !isVisibleASCII(target.pathAndQuery) { fail("raw space, control or non-ASCII character in the path") }
        if !isVisibleASCII(target.url.absoluteString) { fail("raw space, control or non-ASCII character in the URL") }

        // The host as written in the authority, and what a parser of `scheme://authority` reaches.
        let (hostText, portText) = split(target.authority)
        let writtenHost =
            hostText.hasPrefix("[")
            ? String(hostText.dropFirst().dropLast()).replacingOccurrences(of: "%25", with: "%") : hostText
        if !hostText.hasPrefix("["), hostText.contains("%") { fail("percent-encoding in the host") }
        if hostText.hasPrefix("["), !isIPv6(writtenHost.prefix { $0 != "%" }) {
            fail("\(hostText) is not an IPv6 address to inet_pton")
        }
        if let portText {
            if let port = Int(portText), (1...65535).contains(port), String(port) == portText {
            } else {
                fail("port \(portText)")
            }
        }
        let port = portText.flatMap { Int($0) }
        guard let sent = URL(string: "\(target.scheme)://\(target.authority)\(target.pathAndQuery)") else {
            fail("the head does not parse as a URL")
            return problems
        }
        if sent.host != writtenHost {
            fail("a transport connects to \(sent.host ?? "nil"), the authority says \(writtenHost)")
        }
        if sent.port != port { fail("a transport uses port \(sent.port.map(String.init) ?? "nil")") }
        guard let reparsed = URL(string: target.url.absoluteString) else {
            fail("Response.url does not parse again")
            return problems
        }
        if reparsed.host != writtenHost || reparsed.port != port {
            fail("Response.url names \(reparsed.host ?? "nil"):\(reparsed.port ?? -1)")
        }
        if reparsed.user != nil || reparsed.password != nil { fail("user info in Response.url") }
        if target.url != reparsed, target.url.absoluteString != reparsed.absoluteString {
            fail("Response.url changes when parsed again")
        }

        // And the input names that same origin: nothing was decoded, dropped or moved on the way.
        if let input {
            if input.host != writtenHost { fail("the input names host \(input.host ?? "nil")") }
            if input.port != port { fail("the input names port \(input.port.map(String.init) ?? "nil")") }
            if input.scheme?.lowercased() != target.scheme { fail("the input's scheme is \(input.scheme ?? "nil")") }
            if target.credentials != nil, input.user == nil, input.password == nil { fail("credentials from nowhere") }
        } else {
            fail("resolved what Foundation cannot parse")
        }
        return problems
    }

    /// The C library's reading, independent of both Foundation's and ``ResolvedTarget``'s.
    private static func isIPv6(_ text: Substring) -> Bool {
        var address = in6_addr()
        return inet_pton(AF_INET6, String(text), &address) == 1
    }

    private static func isVisibleASCII(_ text: String) -> Bool { text.utf8.allSatisfy { (0x21...0x7E).contains($0) } }

    /// `host` and `port` of an authority (`[v6]:port`, `name:port`), read as a transport would.
    private static func split(_ authority: String) -> (host: String, port: String?) {
        let hostEnd =
            authority.hasPrefix("[")
            ? authority.firstIndex(of: "]").map(authority.index(after:)) ?? authority.endIndex
            : authority.firstIndex(of: ":") ?? authority.endIndex
        let rest = authority[hostEnd...]
        return (String(authority[..<hostEnd]), rest.isEmpty ? nil : String(rest.dropFirst()))
    }
}

/// The seeds the fuzzer mutates: URLs and paths that have broken URL handling somewhere, and the
/// fragments it splices into them.
enum FuzzCorpus {
    static let bases = [
        "http://service.test", "http://service.test/api/v1/", "https://service.test:8443/a/b",
        "http://[::1]:8080/base/",
        "http://user:pa%40ss@service.test/api/", "http://service.test/./x/../", "https://xn--bcher-kva.example/",
        "http://[fe80::1%25lo]/", "HTTP://Service.Test/x?q=1#f",
    ]

    static let urls = [
        "http://[::1]:8080/", "http://[fe80::1%25lo]/", "http://[fe80::1%lo]:8080/x", "http://[::ffff:127.0.0.1]/",
        "http://[2001:db8::1]:443/",
        "http://evil.test%2F.trusted.example/x", "http://evil.test%23.trusted.example/",
        "http://evil.test%40.trusted.example/",
        "http://a%3A80/", "http://a%00b/", "http://a%25b/", "http://%41bc/", "https://xn--bcher-kva.example/",
        "https://bücher.example/",
        "https://BÜCHER.example/ü?ü=ü#ü", "http://ß.example/", "http://Ａ.example/", "http://\u{200B}a.example/",
        "http://a.example./",
        "http://user:pa%40ss@host/", "http://user@host:80/", "http://@host/", "http://:@host/", "http://u:p@[::1]:8/",
        "http://a/./b/../c", "http://a/b/c/./../../g", "http://a/%2e%2E/", "http://a:0/", "http://a:65535/",
        "http://a:65536/",
        "http://a:99999/", "http://a:8x/", "http://a:/", "http:///x", "http://:80/", "http://user@/x", "http://a/%zz",
        "http://a/%4",
        "http://a/with space", "http://a/\u{0}\u{1}\u{7F}", "http://a\tb/", "http://a/?q=1&r=%20#frag", "ftp://a/",
        "https://a.test",
        "http://a.test?x", "http://a.test#x", "http://127.0.0.1:8080/items?page=2", "http://a.test/a;b,c=d/~e!$'()*+",
        "http://a.test//double//slash", "http://[::1]x/", "http://a]/", "http://[::1/", "//a.test/x", "http:a.test",
        "http://a@b@c/",
    ]

    static let paths = [
        "/items", "items", "items/42?q=a%20b", "../up", "./here", "/a/./b", "/a/../b", "a/..", ".", "..", "?only=query",
        "#frag",
        "//other.test/x", "//other.test:99999/", "//u:p@other.test/", "//[::1]:0/", "//evil%2F.test/", "/ü",
        "/with space",
        "/%zz", "/100%", "/%E2%82%AC", "mailto:x", "http://elsewhere.test/", "a:b/c", "/a:b", "/~user/", "", "/", "//",
        "///",
        "/a\\b", "/a|b", "\u{0}", "/\u{7F}", "/\t", "/.well-known/x", "/a.b/..c/c..", "%2e%2e/x", "/;p?q#f",
    ]

    /// Characters and pieces that change how a URL reads.
    static let pieces = [
        "%", "%2F", "%2f", "%23", "%40", "%3A", "%00", "%25", "%zz", "%4", "%E2%82%AC", "@", ":", "[", "]", "/", "//",
        "?", "#",
        ".", "..", "/./", "/../", " ", "\t", "\n", "\r", "\u{0}", "\u{7F}", "\u{A0}", "\u{2003}", "\u{200B}",
        "\u{FF0E}", "ü", "Ü",
        "ß", "€", "\u{301}", "xn--", "-", "_", "~", "!", "$", "&", "'", "(", ")", "*", "+", ",", ";", "=", "\\", "|",
        "^", "`",
        "{", "}", "\"", "<", ">", "0", "1", "8080", "65535", "65536", "99999", "::", "::1", "fe80::1", "%25lo",
        "127.0.0.1",
        "user:pw@", "a", "Z", "http://", "https://", "HTTP://", "ws://", "host.test",
    ]

    static func mutatedURL(_ random: inout SeededRandom) -> String {
        mutate(pick(urls, &random), from: urls, &random)
    }

    static func mutatedPath(_ random: inout SeededRandom) -> String {
        mutate(pick(paths, &random), from: paths, &random)
    }

    static func queryItems(_ random: inout SeededRandom) -> [URLQueryItem] {
        (0..<Int(random.next() % 3)).map { _ in
            URLQueryItem(
                name: pick(pieces, &random) + pick(pieces, &random),
                value: random.next() % 4 == 0 ? nil : pick(pieces, &random))
        }
    }

    private static func pick<Element>(_ elements: [Element], _ random: inout SeededRandom) -> Element {
        elements[Int(random.next() % UInt64(elements.count))]
    }

    /// Zero to four edits: insert a piece, delete a run, replace a scalar with a piece, splice in the
    /// tail of another seed, or repeat a run; one time in eight, a string of pieces alone.
    private static func mutate(_ seed: String, from seeds: [String], _ random: inout SeededRandom) -> String {
        if random.next() % 8 == 0 {
            return (0..<(1 + Int(random.next() % 8))).map { _ in pick(pieces, &random) }.joined()
        }
        var scalars = Array(seed.unicodeScalars)
        for _ in 0..<Int(random.next() % 5) {
            let position = Int(random.next() % UInt64(scalars.count + 1))
            switch random.next() % 5 {
            case 0:
                scalars.insert(contentsOf: pick(pieces, &random).unicodeScalars, at: position)
            case 1 where position < scalars.count:
                let length = 1 + Int(random.next() % 4)
                scalars.removeSubrange(position..<min(scalars.count, position + length))
            case 2 where position < scalars.count:
                scalars.replaceSubrange(position...position, with: pick(pieces, &random).unicodeScalars)
            case 3:
                let other = Array(pick(seeds, &random).unicodeScalars)
                let cut = Int(random.next() % UInt64(other.count + 1))
                scalars = Array(scalars[..<position]) + other[cut...]
            default:
                guard position < scalars.count else { continue }
                let end = min(scalars.count, position + 1 + Int(random.next() % 6))
                scalars.insert(contentsOf: scalars[position..<end], at: end)
            }
        }
        var text = String.UnicodeScalarView()
        text.append(contentsOf: scalars)
        return String(text)
    }
}
