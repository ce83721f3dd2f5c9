import Foundation
import Testing

@testable import NetReachHTTP

/// How a request's target becomes a URL and a request head. Plain paths are joined to the base URL
/// as text; everything else goes through Foundation. Both ways must agree wherever the fast one applies.
@Suite("ResolvedTarget")
struct ResolvedTargetTests {
    static let bases =
        [
            "http://service.test", "http://service.test/", "https://service.test:8443/api/",
            "http://service.test/api/v1",
            "http://127.0.0.1:8080", "http://[::1]:8080/base/", "HTTP://Service.Test/x/y/",
            "http://service.test/api?base=1",
            "https://xn--bcher-kva.example/api/", "http://[fe80::1%25lo]:8080/",
        ] + dotBases
    /// Bases whose directory holds a dot segment: RFC 3986 removes it when a relative path is joined,
    /// so only absolute paths may take the fast way against them.
    static let dotBases = [
        "http://service.test/./", "http://service.test/a/../b/", "http://service.test/a/./b/c",
        "http://service.test/../",
    ]
    static let paths = [
        "/items", "items", "/items?page=2", "items/42?q=a%20b&sort=-date", "/a/b/c/", "~user/x", "/v1/it;ems,(1)*!$'+@",
        "/path:with:colons", "a/b:c", "/%E2%82%AC", "/items?", "/items?x=/y?z:1", "/.well-known/x", "/a.b/..c/c..",
    ]
    static let queries: [[URLQueryItem]] = [
        [], [URLQueryItem(name: "q", value: "a b")],
        [URLQueryItem(name: "k", value: "1+1=2&3"), URLQueryItem(name: "flag", value: nil)],
        [URLQueryItem(name: "€", value: "ü/?:@")],
    ]

    @Test func plainPathsTakeTheFastWayAndAgreeWithFoundation() throws {
        var fast = 0
        for baseText in Self.bases {
            let base = ResolvedTarget.Base(URL(string: baseText)!)
            let parts = try #require(base.parts, "\(baseText) can be joined as text")
            for path in Self.paths {
                for items in Self.queries {
                    let general = ResolvedTarget.resolveGenerally(.path(path), queryItems: items, baseURL: base.url)
                    let resolved = ResolvedTarget.resolve(.path(path), queryItems: items, base: base)
                    #expect(resolved != nil, "\(path) against \(baseText)")
                    #expect(resolved == general, "\(path) + \(items) against \(baseText)")
                    #expect(
                        resolved?.url.absoluteString
                            == resolved.map { "\($0.scheme)://\($0.authority)\($0.pathAndQuery)" },
                        "\(path) against \(baseText)")
                    if let joined = ResolvedTarget.join(path, queryItems: items, to: parts) {
                        #expect(joined == general, "fast way: \(path) + \(items) against \(baseText)")
                        fast += 1
                    }
                }
            }
        }
        let absolutePaths = Self.paths.filter { $0.hasPrefix("/") }
        let expected =
            (Self.bases.count - Self.dotBases.count) * Self.paths.count * Self.queries.count
            + Self.dotBases.count * absolutePaths.count * Self.queries.count
        #expect(
            fast == expected,
            "every plain path took the fast way, except relative ones against a base with dot segments")
    }

    @Test(arguments: [
        ("http://a/./", "s", "/s"), ("http://a/b/../c/", "s", "/c/s"), ("http://a/b/./c/d", "s?x", "/b/c/s?x"),
        ("http://a/../", "s", "/s"), ("http://a/b/..", "s", "/b/s"), ("http://a/./", "/s", "/s"),
    ])
    func dotSegmentsInTheBaseDirectoryAreRemovedWhenJoining(
        _ baseText: String, _ path: String, _ expected: String
    ) throws {
        let base = ResolvedTarget.Base(URL(string: baseText)!)
        let target = try #require(ResolvedTarget.resolve(.path(path), queryItems: [], base: base))
        #expect(target.pathAndQuery == expected)
        #expect(target == ResolvedTarget.resolveGenerally(.path(path), queryItems: [], baseURL: base.url))
    }

    /// RFC 3986 §5.4.1 and §5.4.2, the http results: the general way resolves as the RFC says (an
    /// empty path, as in `//g`, is sent as `/`, so the URL says so too).
    @Test(arguments: [
        ("g", "http://a/b/c/g"), ("./g", "http://a/b/c/g"), ("g/", "http://a/b/c/g/"), ("/g", "http://a/g"),
        ("//g", "http://g/"),
        ("?y", "http://a/b/c/d;p?y"), ("g?y", "http://a/b/c/g?y"), ("#s", "http://a/b/c/d;p?q#s"),
        ("g#s", "http://a/b/c/g#s"),
        ("g?y#s", "http://a/b/c/g?y#s"), (";x", "http://a/b/c/;x"), ("g;x", "http://a/b/c/g;x"),
        ("g;x?y#s", "http://a/b/c/g;x?y#s"),
        (".", "http://a/b/c/"), ("./", "http://a/b/c/"), ("..", "http://a/b/"), ("../", "http://a/b/"),
        ("../g", "http://a/b/g"),
        ("../..", "http://a/"), ("../../", "http://a/"), ("../../g", "http://a/g"), ("../../../g", "http://a/g"),
        ("../../../../g", "http://a/g"), ("/./g", "http://a/g"), ("/../g", "http://a/g"), ("g.", "http://a/b/c/g."),
        (".g", "http://a/b/c/.g"), ("g..", "http://a/b/c/g.."), ("..g", "http://a/b/c/..g"), ("./../g", "http://a/b/g"),
        ("./g/.", "http://a/b/c/g/"), ("g/./h", "http://a/b/c/g/h"), ("g/../h", "http://a/b/c/h"),
        ("g;x=1/./y", "http://a/b/c/g;x=1/y"),
        ("g;x=1/../y", "http://a/b/c/y"), ("g?y/./x", "http://a/b/c/g?y/./x"), ("g?y/../x", "http://a/b/c/g?y/../x"),
        ("g#s/./x", "http://a/b/c/g#s/./x"), ("g#s/../x", "http://a/b/c/g#s/../x"),
    ])
    func referencesResolveAsRFC3986Says(_ reference: String, _ expected: String) throws {
        let base = ResolvedTarget.Base(URL(string: "http://a/b/c/d;p?q")!)
        let target = try #require(ResolvedTarget.resolve(.path(reference), queryItems: [], base: base))
        #expect(target.url.absoluteString == expected)
    }

    @Test(arguments: ["g:h", "http:g", ""])
    func referencesWithoutAnHTTPHostResolveNothing(_ reference: String) {
        let base = ResolvedTarget.Base(URL(string: "http://a/b/c/d;p?q")!)
        #expect(ResolvedTarget.resolve(.path(reference), queryItems: [], base: base) == nil)
    }

    @Test(arguments: [
        "", "//other.test/x", "../up", "/a/./b", "/a/../b", "a/..", ".", "..", "/x#frag", "/with space", "/ü", "/100%",
        "/%zz", "mailto:someone", "http://elsewhere.test/", "?only=query", "/a\"b", "/a<b>", "/a\\b", "/a|b", "/a^b",
        "/a`b", "/a{b}",
    ])
    func anythingElseGoesTheGeneralWay(_ path: String) {
        #expect(!ResolvedTarget.isPlain(path))
        let base = ResolvedTarget.Base(URL(string: "http://service.test/api/")!)
        #expect(
            ResolvedTarget.resolve(.path(path), queryItems: [], base: base)
                == ResolvedTarget.resolveGenerally(.path(path), queryItems: [], baseURL: base.url))
    }

    @Test func dotSegmentsAreRemovedTheRFCWay() throws {
        let base = ResolvedTarget.Base(URL(string: "http://service.test/api/v1/")!)
        let up = try #require(ResolvedTarget.resolve(.path("../v2/items"), queryItems: [], base: base))
        #expect(up.pathAndQuery == "/api/v2/items")
        #expect(up.url.absoluteString == "http://service.test/api/v2/items")
    }

    @Test(arguments: ["http://127.0.0.1:99999/", "http://127.0.0.1:0/", "https://service.test:65536/x"])
    func aPortNoConnectionCanUseIsAnInvalidURL(_ text: String) {
        // AsyncHTTPClient traps on a port above 65535 (SocketAddress "Not enough bits"): it must
        // never get one.
        #expect(ResolvedTarget.resolve(.url(URL(string: text)!), queryItems: [], base: nil) == nil)
        let base = ResolvedTarget.Base(URL(string: text)!)
        #expect(ResolvedTarget.resolve(.path("/items"), queryItems: [], base: base) == nil)
        #expect(ResolvedTarget.resolve(.url(URL(string: "http://127.0.0.1:65535/")!), queryItems: [], base: nil) != nil)
    }

    @Test func fragmentsAreNotSent() throws {
        let base = ResolvedTarget.Base(URL(string: "http://service.test/")!)
        let target = try #require(ResolvedTarget.resolve(.path("/doc?x=1#part"), queryItems: [], base: base))
        #expect(target.pathAndQuery == "/doc?x=1")
    }

    @Test func aBaseWithUserInfoIsNeverJoinedAsText() throws {
        let base = ResolvedTarget.Base(URL(string: "http://user:secret@service.test/api/")!)
        #expect(base.parts == nil)
        let target = try #require(ResolvedTarget.resolve(.path("items"), queryItems: [], base: base))
        #expect(target.authority == "service.test")
        #expect(target.pathAndQuery == "/api/items")
    }

    @Test(arguments: ["ftp://service.test/", "http://", "file:///tmp/x", "service.test/api"])
    func aBaseThatIsNotHTTPResolvesNothing(_ text: String) {
        let base = URL(string: text).map(ResolvedTarget.Base.init)
        #expect(base?.parts == nil)
        #expect(ResolvedTarget.resolve(.path("/items"), queryItems: [], base: base) == nil)
    }

    @Test func absoluteTargetsKeepTheirQueryAndAppendItems() throws {
        let url = URL(string: "https://other.test:9000/search?q=a+b")!
        let target = try #require(
            ResolvedTarget.resolve(.url(url), queryItems: [URLQueryItem(name: "page", value: "2")], base: nil))
        #expect(target.authority == "other.test:9000")
        #expect(target.pathAndQuery == "/search?q=a+b&page=2")
        #expect(target.url.absoluteString == "https://other.test:9000/search?q=a+b&page=2")
    }

    @Test func queryItemsEncodeWhatAServerWouldMisread() {
        let items = [
            URLQueryItem(name: "q", value: "1+1=2 & more"), URLQueryItem(name: "path", value: "/a?b:c@d"),
            URLQueryItem(name: "empty", value: ""), URLQueryItem(name: "bare", value: nil),
            URLQueryItem(name: "€", value: "#"),
        ]
        #expect(
            ResolvedTarget.query(nil, appending: items)
                == "q=1%2B1%3D2%20%26%20more&path=/a?b:c@d&empty=&bare&%E2%82%AC=%23")
        #expect(ResolvedTarget.query("", appending: [URLQueryItem(name: "a", value: "1")]) == "a=1")
        #expect(ResolvedTarget.query("x=%2B", appending: []) == "x=%2B")
    }

    @Test func ipv6HostsAreBracketed() throws {
        let base = ResolvedTarget.Base(URL(string: "http://[::1]:8080/")!)
        let target = try #require(ResolvedTarget.resolve(.path("/ok"), queryItems: [], base: base))
        #expect(target.authority == "[::1]:8080")
        #expect(target.url.absoluteString == "http://[::1]:8080/ok")
    }

    // MARK: - One origin

    /// Foundation connects to the percent-decoded host: `%2F`, `%23`, `%40`, `%3A` would make the
    /// host a transport reaches differ from the one the URL names.
    @Test(arguments: ["%2F", "%23", "%40", "%3A", "%00", "%25", "%2e", "%41", "%20"])
    func aHostWithPercentEncodingIsAnInvalidURL(_ escape: String) throws {
        let text = "http://evil.test\(escape).trusted.example/x"
        let url = try #require(URL(string: text), "Foundation accepts \(text)")
        #expect(url.host != "evil.test\(escape).trusted.example", "Foundation decodes the host it connects to")
        #expect(ResolvedTarget.resolve(.url(url), queryItems: [], base: nil) == nil)
        let base = ResolvedTarget.Base(url)
        #expect(base.parts == nil)
        #expect(ResolvedTarget.resolve(.path("/items"), queryItems: [], base: base) == nil)
        let service = ResolvedTarget.Base(URL(string: "http://service.test/")!)
        #expect(
            ResolvedTarget.resolve(.path("//evil.test\(escape).trusted.example/x"), queryItems: [], base: service)
                == nil)
    }

    @Test func aPlainHostNamesTheSameOriginEverywhere() throws {
        let url = URL(string: "http://evil.test.trusted.example:8080/x")!
        let target = try #require(ResolvedTarget.resolve(.url(url), queryItems: [], base: nil))
        #expect(target.authority == "evil.test.trusted.example:8080")
        #expect(target.url.host == "evil.test.trusted.example")
        #expect(target.url.port == 8080)
        #expect(
            URL(string: "\(target.scheme)://\(target.authority)\(target.pathAndQuery)")?.host
                == "evil.test.trusted.example")
    }

    @Test func anIDNIsSentInItsASCIIForm() throws {
        let ascii = try #require(
            ResolvedTarget.resolve(.url(URL(string: "https://xn--bcher-kva.example/")!), queryItems: [], base: nil))
        #expect(ascii.authority == "xn--bcher-kva.example")
        #expect(ascii.url.absoluteString == "https://xn--bcher-kva.example/")
        let base = ResolvedTarget.Base(URL(string: "https://xn--bcher-kva.example:8443/api/")!)
        #expect(base.parts?.authority == "xn--bcher-kva.example:8443")
        let joined = try #require(ResolvedTarget.resolve(.path("items"), queryItems: [], base: base))
        #expect(joined.url.absoluteString == "https://xn--bcher-kva.example:8443/api/items")
    }

    @Test func aUnicodeHostIsSentAsFoundationConvertedIt() throws {
        // swift-foundation applies IDNA when it parses; whatever it turned the host into is what
        // is sent, in ASCII, and what the URL names.
        let url = try #require(URL(string: "https://bücher.example/buch"))
        let target = try #require(ResolvedTarget.resolve(.url(url), queryItems: [], base: nil))
        #expect(target.authority == "xn--bcher-kva.example")
        #expect(target.url.absoluteString == "https://xn--bcher-kva.example/buch")
        #expect(target.authority.utf8.allSatisfy { $0 < 0x80 })
    }

    @Test func aPercentEncodedUnicodeHostIsAnInvalidURL() throws {
        let url = try #require(URL(string: "http://b%C3%BCcher.example/"))
        #expect(ResolvedTarget.resolve(.url(url), queryItems: [], base: nil) == nil)
    }

    @Test(arguments: [
        "http://[fe80::1%25lo]/", "http://[fe80::1%lo]:8080/", "http://[::ffff:192.0.2.1]/", "http://[2001:db8::]/",
        "http://[::]/", "http://[1:2:3:4:5:6:7:8]/", "http://[FE80::A:b]/",
    ])
    func anIPv6LiteralKeepsItsBracketsAndZone(_ text: String) throws {
        let url = try #require(URL(string: text))
        let target = try #require(ResolvedTarget.resolve(.url(url), queryItems: [], base: nil))
        #expect(target.authority.hasPrefix("["))
        #expect(target.url.host == url.host, "the URL names the host the transport connects to")
        #expect(URL(string: "http://\(target.authority)/")?.host == url.host)
    }

    // MARK: - URLs that cannot be sent

    @Test(arguments: [
        "http://127.0.0.1:0/", "http://a.test:65536/", "http://a.test:99999/", "http://a.test:99999999999999999999/",
        "http://a.test:000000/", "http:///x", "http://:80/", "http://user@/x", "http://user:pw@:80/x", "ftp://a.test/",
        "ws://a.test/",
        "http://[::1::2]/", "http://[1]/", "http://[v1.x]/", "http://[::1%25]/", "http://[::1%25%41]/",
        "http://[1:2:3:4:5:6:7:8:9]/",
        "http://[::256.1.1.1]/", "http://[::01.1.1.1]/", "http://a%zz.test/", "http:a.test/x",
    ])
    func aURLThatCannotBeSentResolvesNothing(_ text: String) {
        // Foundation refuses some of these itself; what it accepts, resolve must refuse.
        if let url = URL(string: text) {
            #expect(ResolvedTarget.resolve(.url(url), queryItems: [], base: nil) == nil)
            #expect(ResolvedTarget.Base(url).parts == nil)
            #expect(ResolvedTarget.resolve(.path("/x"), queryItems: [], base: ResolvedTarget.Base(url)) == nil)
        }
        let service = ResolvedTarget.Base(URL(string: "http://service.test/")!)
        #expect(ResolvedTarget.resolve(.path(text), queryItems: [], base: service) == nil, "given as a path")
    }

    @Test(arguments: [
        "//a.test:8x/", "//a.test:+80/", "//a.test:-1/", "//a.test:0/", "//a.test:65536/", "//:80/", "//user@/x",
        "///x",
    ])
    func aNetworkPathThatCannotBeSentResolvesNothing(_ path: String) {
        let base = ResolvedTarget.Base(URL(string: "http://service.test/")!)
        #expect(ResolvedTarget.resolve(.path(path), queryItems: [], base: base) == nil)
    }

    @Test(arguments: ["/%zz", "/%4", "%4", "/100%", "/a?q=%zz", "/a?q=%", "/a#%zz", "/ok%2/x", "/%%41"])
    func aPathWithBadPercentEncodingResolvesNothing(_ path: String) {
        let base = ResolvedTarget.Base(URL(string: "http://service.test/api/")!)
        #expect(ResolvedTarget.resolve(.path(path), queryItems: [], base: base) == nil)
        #expect(ResolvedTarget.resolveGenerally(.path(path), queryItems: [], baseURL: base.url) == nil)
    }

    @Test func anEmptyPortIsNoPort() throws {
        let target = try #require(
            ResolvedTarget.resolve(.url(URL(string: "http://a.test:/x")!), queryItems: [], base: nil))
        #expect(target.authority == "a.test")
        #expect(target.url.absoluteString == "http://a.test/x")
    }

    @Test func theSchemeIsSentLowercase() throws {
        let target = try #require(
            ResolvedTarget.resolve(.url(URL(string: "HTTPS://Service.Test/x")!), queryItems: [], base: nil))
        #expect(target.scheme == "https")
        #expect(target.url.absoluteString == "https://Service.Test/x")
    }

    // MARK: - User info

    @Test func userInfoBecomesCredentialsAndLeavesTheURL() throws {
        let url = URL(string: "http://user:pa%40ss@host.test:8080/x?y=1")!
        let target = try #require(ResolvedTarget.resolve(.url(url), queryItems: [], base: nil))
        #expect(target.credentials == ResolvedTarget.BasicCredentials(user: "user", password: "pa@ss"))
        #expect(target.authority == "host.test:8080")
        #expect(target.url.absoluteString == "http://host.test:8080/x?y=1")
        #expect(target.url.user == nil && target.url.password == nil)
        #expect(
            !String(describing: target).contains("pa@ss") && !String(describing: target).contains("pa%40ss"),
            "the password never shows in a description")
    }

    @Test func aRelativePathKeepsTheBasesCredentials() throws {
        let base = ResolvedTarget.Base(URL(string: "https://me%40corp:s%3Acret@service.test/api/")!)
        #expect(base.parts == nil)
        let target = try #require(ResolvedTarget.resolve(.path("items?page=2"), queryItems: [], base: base))
        #expect(target.credentials == ResolvedTarget.BasicCredentials(user: "me@corp", password: "s:cret"))
        #expect(target.authority == "service.test")
        #expect(target.pathAndQuery == "/api/items?page=2")
        #expect(target.url.absoluteString == "https://service.test/api/items?page=2")
    }

    @Test func anotherHostGetsNoneOfTheBasesCredentials() throws {
        let base = ResolvedTarget.Base(URL(string: "http://user:secret@service.test/api/")!)
        let other = try #require(ResolvedTarget.resolve(.path("//other.test/x"), queryItems: [], base: base))
        #expect(other.authority == "other.test")
        #expect(other.credentials == nil)
        let absolute = try #require(
            ResolvedTarget.resolve(.url(URL(string: "http://other.test/y")!), queryItems: [], base: base))
        #expect(absolute.credentials == nil)
    }

    @Test(arguments: [
        ("http://user@host.test/", ResolvedTarget.BasicCredentials(user: "user", password: "")),
        ("http://user:@host.test/", ResolvedTarget.BasicCredentials(user: "user", password: "")),
        ("http://:pw@host.test/", ResolvedTarget.BasicCredentials(user: "", password: "pw")),
        ("http://u:p:w@host.test/", ResolvedTarget.BasicCredentials(user: "u", password: "p:w")),
        ("http://%C3%BC:%E2%82%AC@host.test/", ResolvedTarget.BasicCredentials(user: "ü", password: "€")),
    ])
    func userInfoIsSplitAtTheFirstColonAndDecoded(_ text: String, _ expected: ResolvedTarget.BasicCredentials) throws {
        let target = try #require(ResolvedTarget.resolve(.url(URL(string: text)!), queryItems: [], base: nil))
        #expect(target.credentials == expected)
        #expect(target.authority == "host.test")
    }

    @Test(arguments: ["http://@host.test/", "http://:@host.test/"])
    func emptyUserInfoIsNoCredentials(_ text: String) throws {
        let target = try #require(ResolvedTarget.resolve(.url(URL(string: text)!), queryItems: [], base: nil))
        #expect(target.credentials == nil)
        #expect(target.url.absoluteString == "http://host.test/")
    }

    @Test(arguments: [
        "http://a%3Ab:pw@host.test/", "http://u:p%0Aw@host.test/", "http://u%00:pw@host.test/",
        "http://u%FF:pw@host.test/",
        "http://u:p%7F@host.test/",
        // Not UTF-8: Linux Foundation's removingPercentEncoding turns a lone %A9 into U+FFFD (found
        // by Fuzz/FuzzURLBuilding), which would have sent Basic credentials nobody wrote.
        "http://us%A9r:pw@host.test/", "http://%a9@host.test/", "http://u:x%A9%A9y@host.test/",
        "http://u:%E2%82@host.test/",
    ])
    func userInfoBasicCannotCarryIsAnInvalidURL(_ text: String) throws {
        let url = try #require(URL(string: text))
        #expect(ResolvedTarget.resolve(.url(url), queryItems: [], base: nil) == nil)
    }
}
