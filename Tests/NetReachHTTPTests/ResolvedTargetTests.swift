import Foundation
@testable import NetReachHTTP
import Testing

/// How a request's target becomes a URL and a request head. Plain paths are joined to the base URL
/// as text; everything else goes through Foundation. Both ways must agree wherever the fast one applies.
@Suite("ResolvedTarget")
struct ResolvedTargetTests {
    static let bases = [
        "http://service.test", "http://service.test/", "https://service.test:8443/api/", "http://service.test/api/v1",
        "http://127.0.0.1:8080", "http://[::1]:8080/base/", "HTTP://Service.Test/x/y/", "http://service.test/api?base=1",
    ]
    static let paths = [
        "/items", "items", "/items?page=2", "items/42?q=a%20b&sort=-date", "/a/b/c/", "~user/x", "/v1/it;ems,(1)*!$'+@",
        "/path:with:colons", "a/b:c", "/%E2%82%AC", "/items?", "/items?x=/y?z:1", "/.well-known/x", "/a.b/..c/c..",
    ]
    static let queries: [[URLQueryItem]] = [
        [], [URLQueryItem(name: "q", value: "a b")], [URLQueryItem(name: "k", value: "1+1=2&3"), URLQueryItem(name: "flag", value: nil)],
        [URLQueryItem(name: "€", value: "ü/?:@")],
    ]

    @Test func plainPathsTakeTheFastWayAndAgreeWithFoundation() throws {
        var fast = 0
        for baseText in Self.bases {
            let base = ResolvedTarget.Base(URL(string: baseText)!)
            for path in Self.paths {
                for items in Self.queries {
                    let general = ResolvedTarget.resolveGenerally(.path(path), queryItems: items, baseURL: base.url)
                    let resolved = ResolvedTarget.resolve(.path(path), queryItems: items, base: base)
                    #expect(resolved == general, "\(path) + \(items) against \(baseText)")
                    #expect(resolved?.url.absoluteString == resolved.map { "\($0.scheme)://\($0.authority)\($0.pathAndQuery)" },
                            "\(path) against \(baseText)")
                    if base.parts != nil, ResolvedTarget.isPlain(path) { fast += 1 }
                }
            }
        }
        #expect(fast == Self.bases.count * Self.paths.count * Self.queries.count, "every plain path against every base took the fast way")
    }

    @Test(arguments: [
        "", "//other.test/x", "../up", "/a/./b", "/a/../b", "a/..", ".", "..", "/x#frag", "/with space", "/ü", "/100%",
        "/%zz", "mailto:someone", "http://elsewhere.test/", "?only=query", "/a\"b", "/a<b>", "/a\\b", "/a|b", "/a^b", "/a`b", "/a{b}",
    ])
    func anythingElseGoesTheGeneralWay(_ path: String) {
        #expect(!ResolvedTarget.isPlain(path))
        let base = ResolvedTarget.Base(URL(string: "http://service.test/api/")!)
        #expect(ResolvedTarget.resolve(.path(path), queryItems: [], base: base)
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
        let target = try #require(ResolvedTarget.resolve(.url(url), queryItems: [URLQueryItem(name: "page", value: "2")], base: nil))
        #expect(target.authority == "other.test:9000")
        #expect(target.pathAndQuery == "/search?q=a+b&page=2")
        #expect(target.url.absoluteString == "https://other.test:9000/search?q=a+b&page=2")
    }

    @Test func queryItemsEncodeWhatAServerWouldMisread() {
        let items = [URLQueryItem(name: "q", value: "1+1=2 & more"), URLQueryItem(name: "path", value: "/a?b:c@d"),
                     URLQueryItem(name: "empty", value: ""), URLQueryItem(name: "bare", value: nil), URLQueryItem(name: "€", value: "#")]
        #expect(ResolvedTarget.query(nil, appending: items) == "q=1%2B1%3D2%20%26%20more&path=/a?b:c@d&empty=&bare&%E2%82%AC=%23")
        #expect(ResolvedTarget.query("", appending: [URLQueryItem(name: "a", value: "1")]) == "a=1")
        #expect(ResolvedTarget.query("x=%2B", appending: []) == "x=%2B")
    }

    @Test func ipv6HostsAreBracketed() throws {
        let base = ResolvedTarget.Base(URL(string: "http://[::1]:8080/")!)
        let target = try #require(ResolvedTarget.resolve(.path("/ok"), queryItems: [], base: base))
        #expect(target.authority == "[::1]:8080")
        #expect(target.url.absoluteString == "http://[::1]:8080/ok")
    }
}
