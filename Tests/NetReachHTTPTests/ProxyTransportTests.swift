import Foundation
import HTTPTypes
import NetReachAsyncHTTPClient
import NetReachHTTP
import NetReachTestSupport
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
        #expect(
            proxy(["https_proxy": "http://lower:1", "HTTPS_PROXY": "http://upper:1"]).https
                == URL(string: "http://lower:1"))
        #expect(proxy(["HTTPS_PROXY": "http://upper:1"]).https == URL(string: "http://upper:1"))
        #expect(proxy(["ALL_PROXY": "http://all:1"]).http == URL(string: "http://all:1"))
        #expect(proxy(["all_proxy": "http://all:1", "http_proxy": "http://h:2"]).http == URL(string: "http://h:2"))
        #expect(proxy(["http_proxy": "proxy.example:3128"]).http == URL(string: "http://proxy.example:3128"))
        #expect(proxy(["no_proxy": "a, b", "NO_PROXY": "c"]).noProxy == ["a", "b"])
        #expect(proxy(["NO_PROXY": "c"]).noProxy == ["c"])
        #expect(proxy(["http_proxy": ""]).http == nil)
    }

    @Test(
        "NO_PROXY matches names with their subdomains, addresses, CIDR blocks and '*'",
        arguments: [
            ("example.com", "example.com", true), ("example.com", "api.example.com", true),
            (".example.com", "api.example.com", true),
            ("example.com", "notexample.com", false), ("EXAMPLE.com", "Example.COM.", true), ("*", "anything", true),
            ("127.0.0.1", "127.0.0.1", true), ("127.0.0.1", "127.0.0.2", false), ("127.0.0.0/8", "127.9.9.9", true),
            ("10.0.0.0/8", "11.0.0.1", false), ("::1", "[::1]", true), ("fd00::/8", "fd12::1", true),
            ("localhost", "127.0.0.1", false),
        ])
    func noProxyMatching(entry: String, host: String, bypasses: Bool) {
        #expect(ProxySettings(proxy: URL(string: "http://p:1")!, noProxy: [entry]).bypasses(host: host) == bypasses)
    }

    @Test("The proxy is chosen per scheme, and none for a bypassed host")
    func choice() {
        let settings = ProxySettings(
            http: URL(string: "http://h:1"), https: URL(string: "http://s:2"), noProxy: ["direct.example"])
        #expect(settings.proxy(forScheme: "http", host: "a.example") == URL(string: "http://h:1"))
        #expect(settings.proxy(forScheme: "HTTPS", host: "a.example") == URL(string: "http://s:2"))
        #expect(settings.proxy(forScheme: "https", host: "direct.example") == nil)
    }

    @Test("URLSession takes the environment's proxies only")
    func urlSessionProxies() throws {
        let environment = ["http_proxy": "http://127.0.0.1:3128"]
        try URLSessionTransport.check(TransportSettings(proxy: .environment(environment)), environment: environment)
        let error = #expect(throws: TransportSettingsError.self) {
            try URLSessionTransport.check(
                TransportSettings(proxy: ProxySettings(proxy: URL(string: "http://127.0.0.1:3128")!)), environment: [:])
        }
        #expect(error?.kind == .unsupported)
    }
}

/// Requests through a real tinyproxy on loopback: the proxy's log shows what went through it.
@Suite(
    "Proxies through tinyproxy", .offPool, .enabled(if: ExternalServer.available("tinyproxy")), .serialized,
    .timeLimit(.minutes(2)))
struct ProxyTransportTests {
    @Test("AsyncHTTPClient goes through the proxy it is given, and around it for NO_PROXY hosts")
    func explicitProxy() async throws {
        try await withProxyAndServer { proxy, server in
            let through = try AsyncHTTPClientTransport(
                settings: TransportSettings(proxy: ProxySettings(proxy: proxy.url)), environment: [:])
            #expect(try await get(through, "http://127.0.0.1:\(server.port)/ok").status == 200)
            // As curl sends it: the target in absolute form, no CONNECT (a stock tinyproxy allows
            // CONNECT to 443 and 563 only).
            #expect(proxy.requests().contains("GET http://127.0.0.1:\(server.port)/ok HTTP/1.1"), "\(proxy.requests())")
            #expect(!proxy.requests().contains { $0.hasPrefix("CONNECT") }, "\(proxy.requests())")
            #expect(server.received(path: "/ok").first?.headers["host"] == "127.0.0.1:\(server.port)")
            #expect(server.received(path: "/ok").first?.headers["x-netreach-absolute-uri"] == nil)

            let around = try AsyncHTTPClientTransport(
                settings: TransportSettings(proxy: ProxySettings(proxy: proxy.url, noProxy: ["127.0.0.1"])),
                environment: [:])
            let before = proxy.requests().count
            #expect(try await get(around, "http://127.0.0.1:\(server.port)/ok?direct").status == 200)
            #expect(proxy.requests().count == before, "\(proxy.requests())")
            #expect(server.received(path: "/ok").count == 2)
        }
    }

    @Test("Plain http through a stock proxy is sent as curl sends it: absolute form, the same request line")
    func absoluteFormAsCurl() async throws {
        let curl = try ExternalServer.require("curl")
        try await withProxyAndServer { proxy, server in
            let transport = try AsyncHTTPClientTransport(
                settings: TransportSettings(proxy: ProxySettings(proxy: proxy.url)), environment: [:])
            #expect(try await get(transport, "http://127.0.0.1:\(server.port)/ok?ours").status == 200)
            let curlRun = try await ChildProcess.run(
                curl,
                [
                    "-sS", "-o", "/dev/null", "-x", proxy.url.absoluteString,
                    "http://127.0.0.1:\(server.port)/ok?curl",
                ])
            #expect(curlRun.status == 0, "\(curlRun.standardError)")
            let lines = proxy.requests()
            #expect(
                lines.contains("GET http://127.0.0.1:\(server.port)/ok?ours HTTP/1.1")
                    && lines.contains("GET http://127.0.0.1:\(server.port)/ok?curl HTTP/1.1"), "\(lines)")
        }
    }

    @Test("A proxy that refuses the tunnel or asks for credentials is a proxy failure naming the proxy, tried once")
    func proxyRefusals() async throws {
        // https to a port the stock configuration does not tunnel to: 403 to CONNECT.
        try await withProxyAndServer { proxy, server in
            let transport = try AsyncHTTPClientTransport(
                settings: TransportSettings(proxy: ProxySettings(proxy: proxy.url)), environment: [:])
            let refused = try await expectFailure(transport, "https://127.0.0.1:\(server.port)/ok")
            #expect(refused.kind == .proxyFailure, "\(refused)")
            #expect(
                refused.detail
                    == "the proxy 127.0.0.1:\(proxy.port) refused to open a tunnel to 127.0.0.1:\(server.port)",
                "\(refused.detail)")
            #expect(refused.requestWasProvablyNotSent)
            #expect(
                DefaultRetryPolicy().decision(for: RetryAttempt(method: .get, number: 1, failure: .transport(refused)))
                    != .retry(after: .zero))
        }
        let guarded = try await TinyproxyServer.start(connectPorts: [], basicAuth: ("netreach", "secret"))
        defer { Task { await guarded.stop() } }
        let server = try await FaultInjectingServer.start()
        defer { Task { try await server.shutdown() } }
        let without = try AsyncHTTPClientTransport(
            settings: TransportSettings(proxy: ProxySettings(proxy: guarded.url)), environment: [:])
        let asked = try await expectFailure(without, "https://127.0.0.1:\(server.port)/ok")
        #expect(asked.kind == .proxyFailure && asked.detail.contains("asks for authentication (407)"), "\(asked)")
        // Plain http: the proxy's 407 is its answer, as curl reports it.
        #expect(try await get(without, "http://127.0.0.1:\(server.port)/ok").status == 407)
        let withCredentials = try AsyncHTTPClientTransport(
            settings: TransportSettings(
                proxy: ProxySettings(proxy: URL(string: "http://netreach:secret@127.0.0.1:\(guarded.port)")!)),
            environment: [:])
        #expect(try await get(withCredentials, "http://127.0.0.1:\(server.port)/ok?authorized").status == 200)
        #expect(
            server.received(path: "/ok").first?.headers["proxy-authorization"] == nil,
            "the proxy's credentials go no further")
    }

    @Test("Nothing listening at the proxy is a proxy failure naming it")
    func proxyNotListening() async throws {
        let port = try ExternalServer.freePort()
        let transport = try AsyncHTTPClientTransport(
            settings: TransportSettings(proxy: ProxySettings(proxy: URL(string: "http://127.0.0.1:\(port)")!)),
            environment: [:])
        for url in ["http://example.invalid/", "https://example.invalid/"] {
            let error = try await expectFailure(transport, url)
            #expect(
                error.kind == .proxyFailure
                    && error.detail.hasPrefix("cannot connect to the proxy 127.0.0.1:\(port): Connection refused"),
                "\(url): \(error)")
        }
    }

    @Test(
        "Both transports follow http_proxy and no_proxy from the environment alike", arguments: TransportKind.allCases)
    func environmentProxy(kind: TransportKind) async throws {
        try await withProxyAndServer { proxy, server in
            let (proxyPort, serverPort, transport) = (proxy.port, server.port, kind.rawValue)
            // The environment is the process's: changed only in a child process of its own.
            await #expect(processExitsWith: .success) {
                [proxyPort = proxyPort as Int, serverPort = serverPort as Int, transport = transport as String] in
                setenv("http_proxy", "http://127.0.0.1:\(proxyPort)", 1)
                unsetenv("no_proxy")
                unsetenv("NO_PROXY")
                let made: any HTTPTransport =
                    transport == "urlSession" ? URLSessionTransport() : AsyncHTTPClientTransport()
                let status = try await get(made, "http://127.0.0.1:\(serverPort)/ok?via-environment").status
                guard status == 200 else { exit(1) }
            }
            #expect(proxy.requests().contains { $0.contains("127.0.0.1:\(server.port)") }, "\(proxy.requests())")

            let before = proxy.requests().count
            await #expect(processExitsWith: .success) {
                [proxyPort = proxyPort as Int, serverPort = serverPort as Int, transport = transport as String] in
                setenv("http_proxy", "http://127.0.0.1:\(proxyPort)", 1)
                setenv("no_proxy", "127.0.0.1", 1)
                let made: any HTTPTransport =
                    transport == "urlSession" ? URLSessionTransport() : AsyncHTTPClientTransport()
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
