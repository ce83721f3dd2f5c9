import NetReachHTTP
import NetReachURLSession
import Testing

/// curl's `--resolve` and `--connect-to`, as ``ConnectionOverrides`` reads and applies them.
@Suite("Connection overrides (--resolve, --connect-to)")
struct ConnectionOverridesTests {
    private typealias Target = ConnectionOverrides.Target

    @Test("--resolve: the host and port named, then '*' for the port; addresses in order")
    func resolve() throws {
        let overrides = try ConnectionOverrides(
            resolve: ["Example.com:443:127.0.0.1,[::1]", "*:443:127.0.0.2", "v6.test:8443:::1"], connectTo: [])
        #expect(
            overrides.target(host: "example.com", port: 443)
                == Target(host: "example.com", port: 443, addresses: ["127.0.0.1", "::1"]))
        #expect(overrides.target(host: "EXAMPLE.com", port: 443)?.addresses == ["127.0.0.1", "::1"])
        #expect(overrides.target(host: "other.test", port: 443)?.addresses == ["127.0.0.2"])
        #expect(overrides.target(host: "v6.test", port: 8443)?.addresses == ["::1"])
        #expect(overrides.target(host: "example.com", port: 80) == nil)
        #expect(overrides.target(host: "v6.test", port: 443)?.addresses == ["127.0.0.2"])
    }

    @Test("A later entry replaces an earlier one; -HOST:PORT removes it; + is accepted")
    func replaceAndRemove() throws {
        let replaced = try ConnectionOverrides(resolve: ["a.test:80:10.0.0.1", "+a.test:80:10.0.0.2"], connectTo: [])
        #expect(replaced.resolve.count == 1)
        #expect(replaced.target(host: "a.test", port: 80)?.addresses == ["10.0.0.2"])
        let removed = try ConnectionOverrides(resolve: ["a.test:80:10.0.0.1", "-A.test:80"], connectTo: [])
        #expect(removed.isEmpty)
        #expect(removed.target(host: "a.test", port: 80) == nil)
    }

    @Test("--connect-to: empty parts are wildcards or the URL's; the first entry that matches wins")
    func connectTo() throws {
        let overrides = try ConnectionOverrides(
            resolve: ["backend.test:9000:192.0.2.7"],
            connectTo: [
                "a.test:443:backend.test:9000", "a.test::[::1]:", ":8080::9090", "b.test:443::", "b.test:443:c.test:",
            ])
        #expect(
            overrides.target(host: "a.test", port: 443)
                == Target(host: "backend.test", port: 9000, addresses: ["192.0.2.7"]))
        #expect(overrides.target(host: "a.test", port: 80) == Target(host: "::1", port: 80, addresses: []))
        #expect(overrides.target(host: "any.test", port: 8080) == Target(host: "any.test", port: 9090, addresses: []))
        // An entry that changes nothing does not stop the search.
        #expect(overrides.target(host: "b.test", port: 443) == Target(host: "c.test", port: 443, addresses: []))
        #expect(overrides.target(host: "[::1]", port: 80) == nil)
        let v6 = try ConnectionOverrides(resolve: [], connectTo: ["[::1]:80:127.0.0.1:8080"])
        #expect(v6.target(host: "[::1]", port: 80) == Target(host: "127.0.0.1", port: 8080, addresses: []))
        #expect(v6.target(host: "::1", port: 80)?.port == 8080)
    }

    @Test(
        "Entries that cannot be read say which and why",
        arguments: [
            ("garbage", "", "no port"), (":443:127.0.0.1", "", "no host name"),
            ("a.test:0:127.0.0.1", "", "'0' is not a port"), ("a.test:65536:127.0.0.1", "", "'65536' is not a port"),
            ("a.test:+80:127.0.0.1", "", "'+80' is not a port"), ("a.test:80", "", "no address"),
            ("a.test:80:", "", "no address"), ("a.test:80:127.0.0.1,", "", "'' is not an IPv4"),
            ("a.test:80:name.test", "", "'name.test' is not an IPv4 or IPv6 address"),
            ("a.test:80:[127.0.0.1", "", "'[127.0.0.1' is not an address"),
            ("a.test:80:fe80::1%eth0", "", "is not an IPv4 or IPv6 address"),
            ("-a.test:80:127.0.0.1", "", "-HOST:PORT alone"), ("a/b:80:127.0.0.1", "", "'a/b' is not a host name"),
            ("", "garbage", "no port after the first host"), ("", "a:443", "no host and port to connect to"),
            ("", "a:x:b:1", "'x' is not a port"), ("", "[::1:443:b:1", "without its ']'"),
            ("", "[1.2.3.4]:443:b:1", "'[1.2.3.4]' is not an IPv6 address"), ("", "a:443:b:1:2", "'1:2' is not a port"),
            ("", "a:443:[::1]x", "'x' follows the host"),
        ])
    func unreadable(_ resolve: String, _ connectTo: String, _ says: String) {
        let error = #expect(throws: ConnectionOverrides.ParseError.self) {
            _ = try ConnectionOverrides(
                resolve: resolve.isEmpty ? [] : [resolve], connectTo: connectTo.isEmpty ? [] : [connectTo])
        }
        let text = error?.description ?? ""
        #expect(text.contains(says) && text.hasPrefix(resolve.isEmpty ? "--connect-to" : "--resolve"), "\(text)")
    }

    @Test("URLSessionTransport refuses them rather than ignore them")
    func urlSessionRefuses() throws {
        var settings = TransportSettings(proxy: .environment([:]))
        settings.connectionOverrides = try ConnectionOverrides(resolve: ["a.test:80:127.0.0.1"], connectTo: [])
        #expect(throws: TransportSettingsError.self) {
            _ = try URLSessionTransport(settings: settings, environment: [:])
        }
    }
}
