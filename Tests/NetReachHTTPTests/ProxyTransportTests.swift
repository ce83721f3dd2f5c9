import Foundation
import NetReachTestSupport
import HTTPTypes
import NetReachAsyncHTTPClient
import NetReachHTTP
import NetReachURLSession
import OpenAPIRuntime
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// curl's proxy rules, as ``ProxySettings`` reads them: which variables count, which wins.
@Suite("Proxy settings")
struct ProxySettingsTests {
    @Test("Lower case wins; HTTP_PROXY in upper case is ignored (httpoxy); all_proxy fills in")
    func environmentRules() {
        let proxy = { (environment: [String: String]) in ProxySettings.environment(environment) }
        #expect(proxy(["HTTP_PROXY": "http://upper:1"]).http == nil)
        #expect(proxy(["http_proxy": "http://lower:1"]).http == URL(string: "http://lower:1"))
        #expect(proxy(["https_proxy": "http://lower:1", "HTTPS_PROXY": "http://upper:1"]).https == URL(string: "http://lower:1"))
        #expect(proxy(["HTTPS_PROXY": "http://upper:1"]).https == URL(string: "http://upper:1"))
        #expect(proxy(["ALL_PROXY": "http://all:1"]).http == URL(string: "http://all:1"))
        #expect(proxy(["all_proxy": "http://all:1", "http_proxy": "http://h:2"]).http == URL(string: "http://h:2"))
        #expect(proxy(["http_proxy": "proxy.example:3128"]).http == URL(string: "http://proxy.example:3128"))
        #expect(proxy(["no_proxy": "a, b", "NO_PROXY": "c"]).noProxy == ["a", "b"])
        #expect(proxy(["NO_PROXY": "c"]).noProxy == ["c"])
        #expect(proxy(["http_proxy": ""]).http == nil)
    }

    @Test("NO_PROXY matches names with their subdomains, addresses, CIDR blocks and '*'", arguments: [
        ("example.com", "example.com", true), ("example.com", "api.example.com", true), (".example.com", "api.example.com", true),
        ("example.com", "notexample.com", false), ("EXAMPLE.com", "Example.COM.", true), ("*", "anything", true),
        ("127.0.0.1", "127.0.0.1", true), ("127.0.0.1", "127.0.0.2", false), ("127.0.0.0/8", "127.9.9.9", true),
        ("10.0.0.0/8", "11.0.0.1", false), ("::1", "[::1]", true), ("fd00::/8", "fd12::1", true), ("localhost", "127.0.0.1", false),
    ])
    func noProxyMatching(entry: String, host: String, bypasses: Bool) {
        #expect(ProxySettings(proxy: URL(string: "http://p:1")!, noProxy: [entry]).bypasses(host: host) == bypasses)
    }

    @Test("The proxy is chosen per scheme, and none for a bypassed host")
    func choice() {
        let settings = ProxySettings(http: URL(string: "http://h:1"), https: URL(string: "http://s:2"), noProxy: ["direct.example"])
        #expect(settings.proxy(forScheme: "http", host: "a.example") == URL(string: "http://h:1"))
        #expect(settings.proxy(forScheme: "HTTPS", host: "a.example") == URL(string: "http://s:2"))
        #expect(settings.proxy(forScheme: "https", host: "direct.example") == nil)
    }

    @Test("URLSession takes the environment's proxies only")
    func urlSessionProxies() throws {
        let environment = ["http_proxy": "http://127.0.0.1:3128"]
        try URLSessionTransport.check(TransportSettings(proxy: .environment(environment)), environment: environment)
        let error = #expect(throws: TransportSettingsError.self) {
            try URLSessionTransport.check(TransportSettings(proxy: ProxySettings(proxy: URL(string: "http://127.0.0.1:3128")!)), environment: [:])
        }
        #expect(error?.kind == .unsupported)
    }
}

/// Requests through a real tinyproxy on loopback: the proxy's log shows what went through it.
@Suite("Proxies through tinyproxy", .offPool, .enabled(if: ExternalServer.available("tinyproxy")), .serialized, .timeLimit(.minutes(2)))
struct ProxyTransportTests {
    @Test("AsyncHTTPClient goes through the proxy it is given, and around it for NO_PROXY hosts")
    func explicitProxy() async throws {
        try await withProxyAndServer { proxy, server in
            let through = try AsyncHTTPClientTransport(settings: TransportSettings(proxy: ProxySettings(proxy: proxy.url)), environment: [:])
            #expect(try await get(through, "http://127.0.0.1:\(server.port)/ok").status == 200)
            #expect(proxy.requests().contains { $0.contains("127.0.0.1:\(server.port)") }, "\(proxy.requests())")

            let around = try AsyncHTTPClientTransport(
                settings: TransportSettings(proxy: ProxySettings(proxy: proxy.url, noProxy: ["127.0.0.1"])), environment: [:])
            let before = proxy.requests().count
            #expect(try await get(around, "http://127.0.0.1:\(server.port)/ok?direct").status == 200)
            #expect(proxy.requests().count == before, "\(proxy.requests())")
            #expect(server.received(path: "/ok").count == 2)
        }
    }

    @Test("Both transports follow http_proxy and no_proxy from the environment alike", arguments: TransportKind.allCases)
    func environmentProxy(kind: TransportKind) async throws {
        try await withProxyAndServer { proxy, server in
            let (proxyPort, serverPort, transport) = (proxy.port, server.port, kind.rawValue)
            // The environment is the process's: changed only in a child process of its own.
            await #expect(processExitsWith: .success) { [proxyPort = proxyPort as Int, serverPort = serverPort as Int, transport = transport as String] in
                setenv("http_proxy", "http://127.0.0.1:\(proxyPort)", 1)
                unsetenv("no_proxy")
                unsetenv("NO_PROXY")
                let made: any HTTPTransport = transport == "urlSession" ? URLSessionTransport() : AsyncHTTPClientTransport()
                let status = try await get(made, "http://127.0.0.1:\(serverPort)/ok?via-environment").status
                guard status == 200 else { exit(1) }
            }
            #expect(proxy.requests().contains { $0.contains("127.0.0.1:\(server.port)") }, "\(proxy.requests())")

            let before = proxy.requests().count
            await #expect(processExitsWith: .success) { [proxyPort = proxyPort as Int, serverPort = serverPort as Int, transport = transport as String] in
                setenv("http_proxy", "http://127.0.0.1:\(proxyPort)", 1)
                setenv("no_proxy", "127.0.0.1", 1)
                let made: any HTTPTransport = transport == "urlSession" ? URLSessionTransport() : AsyncHTTPClientTransport()
                let status = try await get(made, "http://127.0.0.1:\(serverPort)/ok?bypassed").status
                guard status == 200 else { exit(1) }
            }
            #expect(proxy.requests().count == before, "no_proxy was not honoured: \(proxy.requests())")
            #expect(server.received(path: "/ok").count == 2)
        }
    }
}

/// Starts tinyproxy and a fault-injecting server, runs `body`, stops both.
private func withProxyAndServer(_ body: (TinyproxyServer, FaultInjectingServer) async throws -> Void) async throws {
    let proxy = try await TinyproxyServer.start()
    let server = try await FaultInjectingServer.start()
    do {
        try await body(proxy, server)
    } catch {
        await proxy.stop()
        try await server.shutdown()
        throw error
    }
    await proxy.stop()
    try await server.shutdown()
}
