import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdBcrypt
import HummingbirdTesting
import NIOCore
import NetReach
import NetReachConnectivity
import NetReachServe
import NetReachSystem
import NetReachTestSupport
import NetReachTesting
import Testing

/// Every endpoint of `serve` through its router, in process (HummingbirdTesting's `.router`: no
/// socket, no root), against a state that `NetworkWatch` keeps from simulated networks: what each
/// answers, what it refuses and how (a bad query, an unknown path, a method it does not take, a
/// missing password), and its `HEAD`. The reference for a path is a `PathMonitor` of the same
/// simulated network; for `/probe`, the kernel's own route (`ip route get`).
@Suite("serve's routes in process")
struct ServeRoutesTests {
    /// The server's parts, on one simulated network per namespace.
    struct Serve {
        let networks = NetworkWatchTests.Networks()
        let state: ServeState
        let hub: EventHub
        let watch: NetworkWatch
        let probe: TargetProbe

        /// Watching the internet and `db` (192.0.2.10) in this namespace, every path read.
        static func start(
            judgesConnectivity: Bool = false, probeLimit: Int = 16,
            destinations: [NamedDestination] = [NamedDestination(name: "db", destination: "192.0.2.10")]
        ) async -> Serve {
            var targets = ServeTargets()
            targets.destinations = destinations
            let hub = EventHub(replayCapacity: 256, clientBuffer: 256)
            let state = ServeState(
                keys: NetworkWatch.keys(of: targets), version: "1", hub: hub, judgesConnectivity: judgesConnectivity)
            let serve = Serve(
                state: state, hub: hub, targets: targets, probe: TargetProbe(namespaces: ["": nil], limit: probeLimit))
            await serve.watch.apply(targets)
            return serve
        }

        private init(state: ServeState, hub: EventHub, targets: ServeTargets, probe: TargetProbe) {
            self.state = state
            self.hub = hub
            self.probe = probe
            watch = NetworkWatch(targets: targets, state: state, sources: networks.sources)
        }

        /// Runs `body` with a client of the router; the watch is stopped afterwards.
        func test(
            web: WebSecurity? = nil,
            reload: (@Sendable () async -> Result<Void, ServeReloader.Failure>)? = nil,
            _ body: @Sendable (any TestClientProtocol) async throws -> Void
        ) async throws {
            let routes = ServeRoutes(state: state, targetProbe: probe, reload: reload, processMetrics: { "" })
            let application = Application(router: routes.router(web: web))
            try await application.test(.router, body)
            await watch.cancel()
        }

        /// What a monitor of the server's own simulated network says now.
        func referencePath(to destination: PathDestination? = nil) -> NetworkPath {
            let monitor =
                destination.map { PathMonitor(destination: $0, source: networks.own) }
                ?? PathMonitor(source: networks.own)
            monitor.start(queue: DispatchQueue(label: "reference"))
            defer { monitor.cancel() }
            return monitor.currentPath
        }
    }

    private static let plain = "text/plain; charset=utf-8"

    // MARK: - Each endpoint

    @Test func thePageIsHTMLThatReadsTheEventStream() async throws {
        let serve = await Serve.start()
        try await serve.test { client in
            let page = try await client.execute(uri: "/", method: .get)
            #expect(page.status == .ok)
            #expect(page.headers[.contentType] == "text/html; charset=utf-8")
            #expect(String(buffer: page.body).contains("new EventSource("))
            try await Self.expectHead(of: "/", like: page, client)
            try await Self.expectBadQuery("/?x=1", client)
            try await Self.expectMethodNotAllowed("/", method: .post, allow: "GET, HEAD", client)
        }
    }

    @Test func metricsSayWhatTheNetworkSaysAtEachScrape() async throws {
        let serve = await Serve.start()
        try await serve.test { client in
            let satisfied = #"netreach_path_satisfied{namespace="",destination=""}"#
            var scrape = try await client.execute(uri: "/metrics", method: .get)
            #expect(scrape.status == .ok)
            #expect(scrape.headers[.contentType] == "text/plain; version=0.0.4; charset=utf-8")
            #expect(serve.referencePath().status == .satisfied)
            #expect(String(buffer: scrape.body).contains("\(satisfied) 1.0\n"))
            #expect(
                String(buffer: scrape.body).contains(#"netreach_path_satisfied{namespace="",destination="db"} 1.0"#))

            serve.networks.own.setLinkUp("eth0", false)
            #expect(serve.referencePath().status == .unsatisfied)
            scrape = try await client.execute(uri: "/metrics", method: .get)
            #expect(String(buffer: scrape.body).contains("\(satisfied) 0.0\n"), "\(String(buffer: scrape.body))")
            #expect(String(buffer: scrape.body).contains(#"netreach_interface_up{namespace="",interface="eth0""#))
            try await Self.expectHead(of: "/metrics", like: scrape, client)
            try await Self.expectBadQuery("/metrics?collect[]=cpu", client)
            try await Self.expectMethodNotAllowed("/metrics", method: .post, allow: "GET, HEAD", client)
        }
    }

    @Test func thePathIsTheOneAMonitorOfTheSameNetworkReads() async throws {
        let serve = await Serve.start()
        try await serve.test { client in
            let internet = try await client.execute(uri: "/api/v1/path", method: .get)
            #expect(internet.status == .ok)
            #expect(internet.headers[.contentType] == "application/json")
            #expect(try Self.path(internet) == serve.referencePath())
            let db = try await client.execute(uri: "/api/v1/path?to=db&namespace=", method: .get)
            #expect(try Self.path(db) == serve.referencePath(to: "192.0.2.10"))

            serve.networks.own.removeDefaultRoutes("eth0")
            let down = try await client.execute(uri: "/api/v1/path", method: .get)
            #expect(try Self.path(down).unsatisfiedReason == serve.referencePath().unsatisfiedReason)
            #expect(try Self.path(down).status == .unsatisfied)
            try await Self.expectHead(of: "/api/v1/path", like: down, client)
        }
    }

    @Test func aPathNotWatchedOrNotReadIsSaidSo() async throws {
        let serve = await Serve.start()
        try await serve.test { client in
            try await Self.expect(
                "/api/v1/path?to=nobody", .notFound,
                "no destination named \"nobody\" is watched (serve --to NAME=DEST)\n", client)
            try await Self.expect(
                "/api/v1/path?namespace=blue", .notFound, "no namespace \"blue\" is watched\n", client)
            try await Self.expectBadQuery("/api/v1/path?too=db", client)
        }
        // A watched path whose monitor has not answered yet.
        let hub = EventHub(replayCapacity: 8, clientBuffer: 8)
        let unread = ServeState(keys: [PathKey(namespace: "", destination: "")], version: "1", hub: hub)
        let routes = ServeRoutes(state: unread, targetProbe: TargetProbe(namespaces: [:]))
        try await Application(router: routes.router()).test(.router) { client in
            _ = try await Self.expect(
                "/api/v1/path", .serviceUnavailable, "the path internet in this namespace has not been read yet\n",
                client)
        }
    }

    @Test(arguments: [
        ("/api/v1/path?to=a&to=b", "query parameter \"to\" is given more than once\n"),
        ("/api/v1/path?to=%zz", "malformed percent-encoding in the query: \"to=%zz\"\n"),
        ("/api/v1/path?too=db", "unknown query parameter \"too\"; this endpoint takes namespace, to\n"),
        ("/livez?x", "this endpoint takes no query parameters (got \"x\")\n"),
        ("/readyz?verbose&x=1", "unknown query parameter \"x\"; this endpoint takes verbose\n"),
        (
            "/probe?target=h&mod=path",
            "unknown query parameter \"mod\"; this endpoint takes module, namespace, target\n"
        ),
    ])
    func aQueryAnEndpointDoesNotTakeIsRefusedWithTheReason(uri: String, reason: String) async throws {
        let serve = await Serve.start()
        try await serve.test { client in try await Self.expect(uri, .badRequest, reason, client) }
    }

    /// `/probe` asks the kernel, not the simulated network: its answer is `ip route get`'s.
    @Test func aProbeReadsTheKernelsRouteToTheTarget() async throws {
        let serve = await Serve.start()
        let kernel = try await LabCommand.ip(["route", "get", "127.0.0.1"])
        #expect(kernel.contains("dev lo"), "\(kernel)")
        try await serve.test { client in
            let probe = try await client.execute(uri: "/probe?target=127.0.0.1&module=path", method: .get)
            #expect(probe.status == .ok)
            let head = try await client.execute(uri: "/probe?target=127.0.0.1", method: .head)
            #expect(head.status == .ok && head.body.readableBytes == 0 && head.headers[.contentLength] != "0")
            #expect(probe.headers[.contentType] == "text/plain; version=0.0.4; charset=utf-8")
            let text = String(buffer: probe.body)
            #expect(text.contains("probe_success 1\n"), "\(text)")
            #expect(text.contains(#"destination="127.0.0.1""#) && text.contains(#"interface="lo""#), "\(text)")
            try await Self.expect(
                "/probe", .badRequest, "the target parameter is missing: /probe?target=HOST\n", client)
            try await Self.expect(
                "/probe?target=", .badRequest, "the target parameter is missing: /probe?target=HOST\n", client)
            try await Self.expect(
                "/probe?target=127.0.0.1&module=icmp", .badRequest,
                "unknown module \"icmp\"; the one module is path\n", client)
            try await Self.expect(
                "/probe?target=127.0.0.1&namespace=blue", .notFound, "no namespace \"blue\" is watched\n", client)
            try await Self.expectMethodNotAllowed("/probe", method: .put, allow: "GET, HEAD", client)
        }
    }

    @Test func probesBeyondTheLimitAreRefusedForNow() async throws {
        let serve = await Serve.start(probeLimit: 0)
        try await serve.test { client in
            try await Self.expect(
                "/probe?target=127.0.0.1", .serviceUnavailable, "0 probes are running; try again\n", client)
        }
    }

    @Test func connectivityIsTheLatestVerdictWhenProbesAreConfigured() async throws {
        let without = await Serve.start()
        try await without.test { client in
            try await Self.expect(
                "/api/v1/connectivity", .notFound, "no probe is configured: serve --internet --probe URL\n", client)
        }
        let judged = await Serve.start(judgesConnectivity: true)
        try await judged.test { client in
            try await Self.expect(
                "/api/v1/connectivity", .serviceUnavailable, "the internet has not been judged yet\n", client)
            let recorded = Connectivity(
                ipv4: .init(level: .portal(loginURL: nil)), ipv6: .init(level: .none), path: judged.referencePath())
            judged.state.record(recorded, namespace: "")
            let verdict = try await client.execute(uri: "/api/v1/connectivity", method: .get)
            #expect(verdict.status == .ok)
            #expect(verdict.headers[.contentType] == "application/json")
            var object = try Self.object(verdict)
            let levels = object["connectivity"] as? [String: Any]
            #expect((levels?["ipv4"] as? [String: Any])?["level"] as? String == "portal", "\(object)")
            #expect((levels?["ipv6"] as? [String: Any])?["level"] as? String == "none", "\(object)")
            // The line `check --json` prints for the same verdict, but for its time.
            #expect(object.removeValue(forKey: "timestamp") != nil)
            let line = try JSONSerialization.jsonObject(with: Data(ConnectivityJSON.line(recorded, at: nil).utf8))
            #expect(try Self.sorted(object) == Self.sorted(line), "\(object)")
            try await Self.expectHead(of: "/api/v1/connectivity", like: verdict, client)
        }
    }

    /// The stream starts with the current state of every path; a client resuming after an id
    /// gets what came after it. The hub is shut down first, so each stream ends and its whole
    /// body can be read.
    @Test func theEventStreamStartsWithTheCurrentPathsAndResumes() async throws {
        let serve = await Serve.start()
        let before = serve.referencePath()
        let lastID = serve.hub.lastID
        serve.networks.own.setLinkUp("eth0", false)
        let after = serve.referencePath()
        #expect(after != before)
        serve.hub.shutDown()
        try await serve.test { client in
            let stream = try await client.execute(uri: "/api/v1/events", method: .get)
            #expect(stream.status == .ok)
            #expect(stream.headers[.contentType] == "text/event-stream")
            #expect(stream.headers[.cacheControl] == "no-cache")
            #expect(stream.headers[HTTPField.Name("X-Accel-Buffering")!] == "no")
            #expect(stream.headers[.contentLength] == nil)
            let events = Self.events(stream)
            #expect(events.filter { $0.name == "path" }.count == 2, "\(events)") // the internet and db, now
            #expect(events.last?.name == "shutdown")
            let internet = try #require(events.first { $0.name == "path" && $0.data.contains(#""destination":"""#) })
            #expect(try Self.eventPath(internet.data) == after, "\(internet)")

            let resumed = try await client.execute(
                uri: "/api/v1/events", method: .get, headers: [HTTPField.Name("Last-Event-ID")!: "\(lastID)"])
            let missed = Self.events(resumed).filter { $0.name == "path" }
            // The link went down under both paths: one event each, after the id the client had.
            #expect(missed.count == 2 && missed.first?.id == lastID + 1, "\(missed)")
            #expect(try missed.map { try Self.eventPath($0.data).status } == [.unsatisfied, .unsatisfied])

            let head = try await client.execute(uri: "/api/v1/events", method: .head)
            #expect(head.status == .ok && head.body.readableBytes == 0)
            #expect(head.headers[.contentType] == "text/event-stream" && head.headers[.contentLength] == "0")
            try await Self.expectBadQuery("/api/v1/events?topic=path", client)
            try await Self.expectMethodNotAllowed("/api/v1/events", method: .post, allow: "GET, HEAD", client)
        }
    }

    @Test func livenessReadinessAndHealthFollowThePaths() async throws {
        let serve = await Serve.start()
        try await serve.test { client in
            try await Self.expectHead(of: "/livez", like: try await Self.expect("/livez", .ok, "ok\n", client), client)
            try await Self.expectHead(
                of: "/readyz", like: try await Self.expect("/readyz", .ok, "ok\n", client), client)
            let verbose = try await client.execute(uri: "/readyz?verbose", method: .get)
            #expect(String(buffer: verbose.body).hasSuffix("readyz check passed\n"), "\(String(buffer: verbose.body))")
            let health = try await Self.expect("/health", .ok, "passing\n", client)
            try await Self.expectHead(of: "/health", like: health, client)

            serve.networks.own.removeDefaultRoutes("eth0")
            let critical = try await client.execute(uri: "/health", method: .get)
            #expect(critical.status == .serviceUnavailable)
            #expect(String(buffer: critical.body).hasPrefix("critical: "), "\(String(buffer: critical.body))")
            try await Self.expectHead(of: "/health", like: critical, client)
            try await Self.expectMethodNotAllowed("/livez", method: .delete, allow: "GET, HEAD", client)
        }
        // A watched path not read yet: not ready, and the check says which.
        let hub = EventHub(replayCapacity: 8, clientBuffer: 8)
        let unread = ServeState(keys: [PathKey(namespace: "", destination: "")], version: "1", hub: hub)
        try await Application(router: ServeRoutes(state: unread, targetProbe: TargetProbe(namespaces: [:])).router())
            .test(.router) { client in
                let ready = try await client.execute(uri: "/readyz", method: .get)
                #expect(ready.status == .serviceUnavailable)
                #expect(String(buffer: ready.body).hasSuffix("readyz check failed\n"))
            }
    }

    @Test func aReloadIsForbiddenWithoutTheLifecycleAPIAndSaysWhyItFailed() async throws {
        let serve = await Serve.start()
        try await serve.test { client in
            try await Self.expect(
                "/-/reload", method: .post, .forbidden,
                "the lifecycle API is not enabled: serve --enable-lifecycle\n", client)
            try await Self.expectMethodNotAllowed("/-/reload", method: .get, allow: "POST", client)
            try await Self.expectMethodNotAllowed("/-/reload", method: .head, allow: "POST", client)
        }
        let outcomes = Locked([Result<Void, ServeReloader.Failure>.success(()), .failure(.init(description: "bad"))])
        let reloaded = await Serve.start()
        let reload: @Sendable () async -> Result<Void, ServeReloader.Failure> = {
            outcomes.withLock { $0.removeFirst() }
        }
        try await reloaded.test(reload: reload) { client in
            try await Self.expect("/-/reload", method: .post, .ok, "reloaded\n", client)
            try await Self.expect(
                "/-/reload", method: .post, .internalServerError,
                "not reloaded, the running configuration is kept: bad\n", client)
            try await Self.expectBadQuery("/-/reload?now", method: .post, client)
        }
        #expect(outcomes.withLock { $0.isEmpty })
    }

    // MARK: - What the router's middleware answers

    /// Paths are exact: what is not an endpoint, a trailing or doubled slash included, is 404;
    /// a method an endpoint does not take is 405 with `Allow`, for a method of any name.
    @Test func anUnknownPathIsNotFoundAndAnUnknownMethodNotAllowed() async throws {
        let serve = await Serve.start()
        try await serve.test { client in
            for path in [
                "/nope", "/metrics/", "//metrics", "/Metrics", "/metric%73", "/api/v1", "/api/v1/path/", "/-/",
            ] {
                try await Self.expect(path, .notFound, "no such endpoint: \(path)\n", client)
            }
            try await Self.expect("/nope", method: .delete, .notFound, "no such endpoint: /nope\n", client)
            let head = try await client.execute(uri: "/nope", method: .head)
            #expect(head.status == .notFound)
            for method in [HTTPRequest.Method.put, .patch, .options, HTTPRequest.Method("PURGE")!] {
                try await Self.expectMethodNotAllowed("/metrics", method: method, allow: "GET, HEAD", client)
            }
        }
    }

    /// The table `EndpointMiddleware` holds requests to and the routes agree: each listed path
    /// and method reaches a handler, never the router's own empty 404 nor the middleware's refusal.
    @Test func everyEndpointListedIsRoutedForEachOfItsMethods() async throws {
        let serve = await Serve.start()
        serve.hub.shutDown() // the event stream ends at once
        try await serve.test { client in
            for (path, methods) in ServeRoutes.endpoints {
                for method in methods {
                    let response = try await client.execute(uri: path, method: method)
                    let body = String(buffer: response.body)
                    #expect(!(response.status == .notFound && body.isEmpty), "\(method) \(path): the router's 404")
                    #expect(!body.hasPrefix("no such endpoint") && !body.contains("only answers"), "\(method) \(path)")
                    #expect(response.headers[.contentType] != nil, "\(method) \(path)")
                }
            }
        }
    }

    /// With `--web.config.file`: every request but the open health checks needs the password,
    /// before it is routed; every answer carries the file's headers.
    @Test func thePasswordIsAskedBeforeRoutingAndTheHeadersGoOnEveryAnswer() async throws {
        let directory = try TemporaryDirectory("netreach-routes-web")
        defer { directory.remove() }
        let file = directory.path("web.yml")
        try """
        basic_auth_users:
          prom: \(Bcrypt.hash("s3cret", cost: 4))
        http_server_config:
          headers:
            X-Frame-Options: deny
        """.write(toFile: file, atomically: true, encoding: .utf8)
        let web = try WebSecurity(path: file)
        let right: HTTPFields = [.authorization: "Basic " + Data("prom:s3cret".utf8).base64EncodedString()]
        let wrong: HTTPFields = [.authorization: "Basic " + Data("prom:guess".utf8).base64EncodedString()]
        let serve = await Serve.start()
        try await serve.test(web: web) { client in
            // Every endpoint and method but the two open checks, and what is no endpoint at all.
            var asked = ServeRoutes.endpoints.flatMap { path, methods in methods.map { (path, $0) } }.filter {
                $0.0 != "/livez" && $0.0 != "/readyz"
            }
            asked += [("/nope", .get), ("/metrics", .post), ("/readyz?verbose", .get), ("/livez/", .get)]
            #expect(asked.count == 19)
            for (uri, method) in asked {
                for headers in [HTTPFields(), wrong] {
                    let refused = try await client.execute(uri: uri, method: method, headers: headers)
                    #expect(refused.status == .unauthorized, "\(method) \(uri)")
                    #expect(refused.headers[.wwwAuthenticate] == "Basic realm=\"netreach\", charset=\"UTF-8\"")
                    #expect(refused.headers[HTTPField.Name("X-Frame-Options")!] == "deny")
                }
            }
            let scrape = try await client.execute(uri: "/metrics", method: .get, headers: right)
            #expect(scrape.status == .ok)
            #expect(scrape.headers[HTTPField.Name("X-Frame-Options")!] == "deny")
            let unknown = try await client.execute(uri: "/nope", method: .get, headers: right)
            #expect(unknown.status == .notFound)
            #expect(unknown.headers[HTTPField.Name("X-Frame-Options")!] == "deny")
            let badQuery = try await client.execute(uri: "/metrics?x", method: .get, headers: right)
            #expect(badQuery.status == .badRequest)
            #expect(badQuery.headers[HTTPField.Name("X-Frame-Options")!] == "deny")
            for uri in ["/livez", "/readyz"] {
                let open = try await client.execute(uri: uri, method: .get)
                #expect(open.status == .ok, "\(uri)")
                #expect(open.headers[HTTPField.Name("X-Frame-Options")!] == "deny")
            }
        }
    }

    // MARK: - Helpers

    /// Asks `uri` and expects `status` with `body` as plain text; returns the answer.
    @discardableResult
    private static func expect(
        _ uri: String, method: HTTPRequest.Method = .get, _ status: HTTPResponse.Status, _ body: String,
        _ client: any TestClientProtocol, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> TestResponse {
        let response = try await client.execute(uri: uri, method: method)
        #expect(response.status == status, "\(method) \(uri)", sourceLocation: sourceLocation)
        #expect(response.headers[.contentType] == plain, "\(method) \(uri)", sourceLocation: sourceLocation)
        #expect(String(buffer: response.body) == body, "\(method) \(uri)", sourceLocation: sourceLocation)
        #expect(
            response.headers[.contentLength] == "\(body.utf8.count)", "\(method) \(uri)",
            sourceLocation: sourceLocation)
        return response
    }

    /// `HEAD uri` answers with `get`'s status and header fields, its length included, and no body.
    private static func expectHead(
        of uri: String, like get: TestResponse, _ client: any TestClientProtocol,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let head = try await client.execute(uri: uri, method: .head)
        #expect(head.status == get.status, sourceLocation: sourceLocation)
        #expect(head.body.readableBytes == 0, sourceLocation: sourceLocation)
        #expect(head.headers[.contentType] == get.headers[.contentType], sourceLocation: sourceLocation)
        #expect(head.headers[.contentLength] != nil, sourceLocation: sourceLocation)
        // A dynamic body's length may differ from one request to the next (a scrape's values).
        if !uri.hasPrefix("/metrics") {
            #expect(head.headers[.contentLength] == get.headers[.contentLength], sourceLocation: sourceLocation)
        }
    }

    private static func expectBadQuery(
        _ uri: String, method: HTTPRequest.Method = .get, _ client: any TestClientProtocol,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let response = try await client.execute(uri: uri, method: method)
        #expect(response.status == .badRequest, "\(uri)", sourceLocation: sourceLocation)
        #expect(String(buffer: response.body).contains("query parameter"), "\(uri)", sourceLocation: sourceLocation)
    }

    private static func expectMethodNotAllowed(
        _ path: String, method: HTTPRequest.Method, allow: String, _ client: any TestClientProtocol,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let response = try await client.execute(uri: path, method: method)
        #expect(response.status == .methodNotAllowed, "\(method) \(path)", sourceLocation: sourceLocation)
        #expect(response.headers[.allow] == allow, "\(method) \(path)", sourceLocation: sourceLocation)
        let methods = allow.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        #expect(
            String(buffer: response.body) == "\(path) only answers \(methods.joined(separator: " and "))\n",
            sourceLocation: sourceLocation)
    }

    private static func path(_ response: TestResponse) throws -> NetworkPath {
        try JSONDecoder().decode(NetworkPath.self, from: Data(response.body.readableBytesView))
    }

    /// The path a `path` event's data carries.
    private static func eventPath(_ data: String) throws -> NetworkPath {
        let object = try #require(try JSONSerialization.jsonObject(with: Data(data.utf8)) as? [String: Any])
        let path = try JSONSerialization.data(withJSONObject: try #require(object["path"]))
        return try JSONDecoder().decode(NetworkPath.self, from: path)
    }

    /// A JSON value written with sorted keys: equal objects read equal.
    private static func sorted(_ value: Any) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: value, options: [.sortedKeys]), as: UTF8.self)
    }

    private static func object(_ response: TestResponse) throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [String: Any])
    }

    /// Each event of an event stream's body: its id, name and data.
    private static func events(_ response: TestResponse) -> [(id: UInt64?, name: String, data: String)] {
        String(buffer: response.body).components(separatedBy: "\n\n").compactMap { block in
            var event: (id: UInt64?, name: String, data: String) = (nil, "", "")
            for line in block.split(separator: "\n") {
                if line.hasPrefix("id: ") { event.id = UInt64(line.dropFirst(4)) }
                if line.hasPrefix("event: ") { event.name = String(line.dropFirst(7)) }
                if line.hasPrefix("data: ") { event.data = String(line.dropFirst(6)) }
            }
            return event.name.isEmpty ? nil : event
        }
    }
}
