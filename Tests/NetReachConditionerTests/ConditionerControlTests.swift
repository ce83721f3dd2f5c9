import Foundation
import NIOHTTP1
import NetReachTestSupport
import Testing

@testable import NetReachConditioner

#if canImport(Glibc)
import Glibc
#endif

/// The control API: its routes called directly, then over HTTP on loopback with bytes that are
/// not HTTP at all.
@Suite("Conditioner control API", .offPool, .timeLimit(.minutes(2)))
struct ConditionerControlTests {
    /// A listener in front of an echo server, and the routes over it.
    private static func fixture(
        host: String = "127.0.0.1"
    ) async throws -> (server: LoopbackServer, proxy: ConditionedProxy, routes: ControlRoutes) {
        let server = try LoopbackServer(.echo)
        let proxy = try await ConditionedProxy.start(host: host, upstreamHost: "127.0.0.1", upstreamPort: server.port)
        return (server, proxy, ControlRoutes(listeners: [ConditionedListener(name: "api", proxy: proxy)]))
    }

    private static func json(_ response: ControlResponse) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: response.body)) as? [String: Any] ?? [:]
    }

    @Test("A profile, conditions, faults and statistics through the routes")
    func routes() async throws {
        let (server, proxy, routes) = try await Self.fixture()
        defer { server.stop() }
        let listed = await routes.respond(method: .GET, uri: "/listeners", body: Data())
        #expect(listed.status == .ok)
        let listener = (Self.json(listed)["listeners"] as? [[String: Any]])?.first
        #expect(listener?["name"] as? String == "api" && listener?["listening"] as? Bool == true)
        #expect(listener?["listen"] as? String == "127.0.0.1:\(proxy.port)")

        let profile = await routes.respond(
            method: .PUT, uri: "/listeners/api/conditions", body: Data(#"{"profile":"edge"}"#.utf8))
        #expect(profile.status == .ok && Self.json(profile)["profile"] as? String == "edge")
        #expect(proxy.conditions == LinkProfile.edge.conditions)

        let custom = await routes.respond(
            method: .PUT, uri: "/listeners/api/conditions",
            body: Data(#"{"upstream":{"delayMilliseconds":30},"seed":4}"#.utf8))
        #expect(custom.status == .ok && Self.json(custom)["profile"] == nil)
        #expect(proxy.conditions == LinkConditions(upstream: .init(delay: .milliseconds(30)), seed: 4))

        let added = await routes.respond(
            method: .POST, uri: "/listeners/api/faults",
            body: Data(#"{"name":"cut","direction":"downstream","type":"limit_data","bytes":3}"#.utf8))
        #expect(added.status == .created)
        #expect(proxy.faults == [NamedFault(name: "cut", fault: .limitData(bytes: 3), directions: [.downstream])])
        let echoed = try await offPool {
            try LoopbackClient.exchange(port: proxy.port, send: Array("hello".utf8), expect: nil)
        }
        #expect(echoed == Array("hel".utf8), "the fault acts")
        let duplicate = await routes.respond(
            method: .POST, uri: "/listeners/api/faults",
            body: Data(#"{"name":"cut","type":"timeout"}"#.utf8))
        #expect(duplicate.status == .conflict)
        #expect(
            await routes.respond(method: .DELETE, uri: "/listeners/api/faults/cut", body: Data()).status == .noContent)
        #expect(
            await routes.respond(method: .DELETE, uri: "/listeners/api/faults/cut", body: Data()).status == .notFound)
        #expect(proxy.faults.isEmpty)

        let stats = await routes.respond(method: .GET, uri: "/stats", body: Data())
        let connections =
            ((Self.json(stats)["listeners"] as? [[String: Any]])?.first?["connections"] as? [[String: Any]]) ?? []
        #expect(connections.count == 1)
        #expect((connections.first?["downstream"] as? [String: Any])?["bytesDelivered"] as? Int == 3)
        try await proxy.stop()
    }

    @Test(
        "Malformed requests get 400, 404, 405 or 413 with the reason, and change nothing",
        arguments: [
            ("PUT", "/listeners/api/conditions", "not json", 400, "not a JSON object"),
            ("PUT", "/listeners/api/conditions", #"{"profile":"gprs"}"#, 400, "unknown profile gprs"),
            ("PUT", "/listeners/api/conditions", #"{"profile":3}"#, 400, "unknown profile 3"),
            ("PUT", "/listeners/api/conditions", #"{"profile":"3g","seed":2}"#, 400, "a profile comes alone"),
            (
                "PUT", "/listeners/api/conditions", #"{"upstream":{"delayMs":5}}"#, 400,
                "unknown key delayMs in upstream"
            ),
            ("PUT", "/listeners/api/conditions", #"{"upsteam":{}}"#, 400, "unknown key upsteam"),
            (
                "PUT", "/listeners/api/conditions", #"{"upstream":{"loss":2}}"#, 400,
                "upstream loss must be between 0 and 1"
            ),
            ("PUT", "/listeners/api/conditions", #"{"upstream":{"bandwidth":"fast"}}"#, 400, "upstream.bandwidth"),
            ("PUT", "/listeners/api/conditions", #"[1,2]"#, 400, "not a JSON object"),
            ("POST", "/listeners/api/faults", #"{"name":"x","type":"explode"}"#, 400, "unknown fault type explode"),
            ("POST", "/listeners/api/faults", #"{"name":"x","type":"limit_data"}"#, 400, "bytes is missing"),
            ("POST", "/listeners/api/faults", #"{"name":"x","type":"limit_data","byte":3}"#, 400, "unknown key byte"),
            ("POST", "/listeners/api/faults", #"{"name":"a/b","type":"timeout"}"#, 400, "a fault's name is"),
            (
                "POST", "/listeners/api/faults", #"{"name":"x","type":"slicer","averageSize":0}"#, 400,
                "averageSize must be at least 1"
            ),
            (
                "POST", "/listeners/api/faults", #"{"name":"x","type":"timeout","direction":"sideways"}"#, 400,
                "unknown direction sideways"
            ),
            ("GET", "/listeners/db", "", 404, "no listener is named db"),
            ("GET", "/nowhere", "", 404, "no such path"),
            ("GET", "/listeners/api/bogus", "", 404, "no such path"),
            ("DELETE", "/listeners", "", 405, "only GET"),
            ("GET", "/listeners/api/down", "", 405, "only POST"),
            ("PATCH", "/listeners/api/conditions", "{}", 405, "only GET, PUT"),
        ])
    func malformed(method: String, uri: String, body: String, status: Int, reason: String) async throws {
        let (server, proxy, routes) = try await Self.fixture()
        defer { server.stop() }
        let response = await routes.respond(method: HTTPMethod(rawValue: method), uri: uri, body: Data(body.utf8))
        #expect(Int(response.status.code) == status)
        let error = Self.json(response)["error"] as? String ?? ""
        #expect(error.contains(reason), "\(error)")
        #expect(proxy.conditions == .none && proxy.faults.isEmpty)
        try await proxy.stop()
    }

    @Test("Down refuses new connections and closes open ones; up listens on the same port again")
    func downAndUp() async throws {
        // While the listener is down, no other test's server can take its port there and answer
        // the connection that must be refused.
        let host = otherLoopbackAddress()
        let (server, proxy, routes) = try await Self.fixture(host: host)
        defer { server.stop() }
        let open = try LoopbackClient(host: host, port: proxy.port)
        defer { open.close() }
        _ = try await offPool { try open.roundTrip(Array("x".utf8)) }
        let down = await routes.respond(method: .POST, uri: "/listeners/api/down", body: Data())
        #expect(down.status == .ok && Self.json(down)["listening"] as? Bool == false)
        // Refused, at once or within a moment: a child another test spawns holds a copy of every
        // descriptor, the closed listener's too, from its fork until it closes them before exec.
        let refused = await offPool { () -> Bool in
            let deadline = ContinuousClock.now + .seconds(10)
            while ContinuousClock.now < deadline {
                do {
                    try LoopbackClient(host: host, port: proxy.port).close()
                    usleep(20_000)
                } catch {
                    return error as? LoopbackClient.Failure == .system(ECONNREFUSED)
                }
            }
            return false
        }
        #expect(refused, "the listener that is down still accepts")
        let closed = try await offPool { try open.read(upTo: nil) }
        #expect(closed.isEmpty, "the open connection was closed")

        let up = await routes.respond(method: .POST, uri: "/listeners/api/up", body: Data())
        #expect(up.status == .ok && Self.json(up)["listening"] as? Bool == true)
        let echoed = try await offPool {
            try LoopbackClient.exchange(host: host, port: proxy.port, send: Array("again".utf8), expect: 5)
        }
        #expect(echoed == Array("again".utf8))

        // Down again, someone else takes the port: up is a conflict that says why.
        await proxy.takeDown()
        // The same copies can keep the closed listener's port bound for a moment: retry.
        let squatter = try await offPool { () throws -> Int32 in
            let deadline = ContinuousClock.now + .seconds(10)
            while true {
                do {
                    return try LoopbackServer.listen(host: host, port: proxy.port)
                } catch LoopbackClient.Failure.system(EADDRINUSE) where ContinuousClock.now < deadline {
                    usleep(20_000)
                }
            }
        }
        defer { close(squatter) }
        let taken = await routes.respond(method: .POST, uri: "/listeners/api/up", body: Data())
        #expect(taken.status == .conflict)
        #expect((Self.json(taken)["error"] as? String ?? "").contains("Address already in use"))
        try await proxy.stop()
    }

    @Test("Over HTTP: curl-shaped requests answer; bytes that are not HTTP get 400 and the API lives on")
    func overHTTP() async throws {
        let (server, proxy, _) = try await Self.fixture()
        defer { server.stop() }
        let control = try await ConditionerControl.start(listeners: [ConditionedListener(name: "api", proxy: proxy)])
        let answer = try await offPool {
            try LoopbackClient.exchange(
                port: control.port,
                send: Array(
                    "PUT /listeners/api/conditions HTTP/1.1\r\nHost: x\r\nContent-Length: 17\r\nConnection: close\r\n\r\n{\"profile\":\"3g\"}\n"
                        .utf8), expect: nil)
        }
        let text = String(decoding: answer, as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 200 OK\r\n"), "\(text)")
        #expect(text.contains(#""profile":"3g""#))
        #expect(proxy.conditions == LinkProfile.threeG.conditions)

        let garbage = try await offPool {
            try LoopbackClient.exchange(
                port: control.port, send: Array("\u{01}\u{02}NOT HTTP AT ALL\r\n\r\n".utf8), expect: nil)
        }
        #expect(
            String(decoding: garbage, as: UTF8.self).hasPrefix("HTTP/1.1 400"),
            "\(String(decoding: garbage, as: UTF8.self))")

        let huge =
            "POST /listeners/api/faults HTTP/1.1\r\nContent-Length: 70000\r\n\r\n"
            + String(repeating: "x", count: 70_000)
        let tooLarge = try await offPool {
            try LoopbackClient.exchange(port: control.port, send: Array(huge.utf8), expect: nil)
        }
        #expect(String(decoding: tooLarge, as: UTF8.self).hasPrefix("HTTP/1.1 413"))

        let still = try await offPool {
            try LoopbackClient.exchange(
                port: control.port, send: Array("GET /listeners HTTP/1.1\r\nConnection: close\r\n\r\n".utf8),
                expect: nil)
        }
        #expect(String(decoding: still, as: UTF8.self).hasPrefix("HTTP/1.1 200 OK"))
        try await control.stop()
        try await proxy.stop()
    }

    @Test("The control API listens on loopback only")
    func loopbackOnly() async throws {
        await #expect { try await ConditionerControl.start(host: "0.0.0.0", listeners: []) } throws: { error in
            guard case .cannotListen(_, let why) = error as? ConditionerError else { return false }
            return why.contains("loopback only")
        }
        #expect(
            ConditionerControl.isLoopback("127.0.0.1") && ConditionerControl.isLoopback("127.8.9.1")
                && ConditionerControl.isLoopback("::1"))
        #expect(
            !ConditionerControl.isLoopback("10.0.0.1") && !ConditionerControl.isLoopback("::")
                && !ConditionerControl.isLoopback("example"))
    }

    @Test("A connect delay holds a connection's first bytes (high-latency-dns, shortened)")
    func connectDelay() async throws {
        let server = try LoopbackServer(.echo)
        defer { server.stop() }
        let proxy = try await ConditionedProxy.start(
            upstreamHost: "127.0.0.1", upstreamPort: server.port,
            conditions: LinkConditions(connectDelay: .seconds(2)))
        let client = try LoopbackClient(port: proxy.port)
        defer { client.close() }
        let first = try await offPool { try client.roundTrip(Array("a".utf8)) }
        let second = try await offPool { try client.roundTrip(Array("b".utf8)) }
        // At least the delay (less a timer's millisecond of slack; the timer starts at accept).
        #expect(first >= .milliseconds(1995), "the first exchange waited for the delay: \(first)")
        // A loopback round trip against the 2 s delay: a long way below half of it.
        #expect(second < .seconds(1), "the delay is paid once per connection: \(second)")
        try await proxy.stop()
    }
}
