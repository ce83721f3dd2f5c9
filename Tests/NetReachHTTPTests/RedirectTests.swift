import Foundation
import HTTPTypes
import OpenAPIRuntime
import Testing

@testable import NetReachHTTP

/// The service follows redirects itself: methods, bodies and credentials per RFC 9110 and what
/// browsers and curl do, limits, and https to http.
@Suite("Redirects")
struct RedirectTests {
    private func service(
        _ steps: [ScriptedTransport.Step], _ change: (inout RequestPolicy) -> Void = { _ in }
    )
        -> (NetworkService, ScriptedTransport)
    {
        let transport = ScriptedTransport(steps)
        let (service, monitor) = NetworkServiceTests.service(transport, policy: NetworkServiceTests.policy(change))
        monitor.cancel() // nothing here waits for a path
        return (service, transport)
    }

    private static func redirect(_ status: Int, to location: String) -> ScriptedTransport.Step {
        .status(status, headers: ["Location": location], body: "moved")
    }

    @Test(arguments: [301, 302, 303])
    func aPostFollowedThrough301To303BecomesAGetWithoutBody(status: Int) async throws {
        let (service, transport) = service([Self.redirect(status, to: "/landing"), .status(200, body: "landed")])
        var request = Request.post("/form", body: Data("a=1".utf8))
        request.headerFields[.contentType] = "application/x-www-form-urlencoded"
        let response = try await service.send(request)
        #expect(response.text == "landed")
        #expect(response.url.absoluteString == "http://service.test/landing")
        let sent = transport.sent
        #expect(sent.map(\.head.method) == [.post, .get])
        #expect(sent[1].body == nil)
        #expect(sent[1].head.headerFields[.contentType] == nil)
        #expect(response.attempts == 1, "a hop is not an attempt")
    }

    @Test(arguments: [307, 308])
    func a307Or308KeepsTheMethodAndSendsTheBodyAgain(status: Int) async throws {
        let (service, transport) = service([Self.redirect(status, to: "http://service.test/v2/orders"), .status(201)])
        let response = try await service.send(.post("/orders", body: Data("order".utf8)))
        #expect(response.status.code == 201)
        #expect(transport.sent.map(\.head.method) == [.post, .post])
        #expect(transport.sent.map(\.body) == [Data("order".utf8), Data("order".utf8)])
        #expect(transport.sent[1].head.path == "/v2/orders")
    }

    @Test func aSinglePassBodyCannotBeSentAgainAndSaysSo() async throws {
        let (service, transport) = service([Self.redirect(307, to: "/elsewhere"), .status(200)])
        let stream = AsyncStream<HTTPBody.ByteChunk> { continuation in
            continuation.yield(Array("streamed".utf8)[...])
            continuation.finish()
        }
        let request = Request(method: .put, target: .path("/upload"), body: HTTPBody(stream, length: .unknown))
        let error = await #expect(throws: NetworkError.self) { try await service.send(request) }
        guard case .redirectRefused(let why, let location)? = error?.reason else {
            Issue.record("expected redirectRefused, got \(String(describing: error))")
            return
        }
        #expect(why.contains("single-pass"))
        #expect(location.absoluteString == "http://service.test/elsewhere")
        #expect(transport.sent.count == 1)
    }

    @Test func credentialsAreDroppedWhenTheOriginChangesAndKeptWhenItDoesNot() async throws {
        let (service, transport) = service([
            Self.redirect(302, to: "/same-origin"),
            Self.redirect(302, to: "http://other.test/x"),
            .status(200),
        ])
        var request = Request.get("/start")
        request.headerFields[.authorization] = "Bearer secret"
        request.headerFields[.cookie] = "session=1"
        request.headerFields[.proxyAuthorization] = "Basic cHJveHk="
        request.headerFields[.accept] = "text/plain"
        _ = try await service.send(request)
        let sent = transport.sent
        #expect(sent.count == 3)
        #expect(sent[1].head.headerFields[.authorization] == "Bearer secret")
        #expect(sent[1].head.headerFields[.cookie] == "session=1")
        #expect(sent[2].head.authority == "other.test")
        #expect(sent[2].head.headerFields[.authorization] == nil)
        #expect(sent[2].head.headerFields[.cookie] == nil)
        #expect(sent[2].head.headerFields[.proxyAuthorization] == nil)
        #expect(sent[2].head.headerFields[.accept] == "text/plain")
    }

    @Test func anotherPortIsAnotherOrigin() async throws {
        let (service, transport) = service([Self.redirect(301, to: "http://service.test:8080/x"), .status(200)])
        var request = Request.get("/start")
        request.headerFields[.authorization] = "Bearer secret"
        _ = try await service.send(request)
        #expect(transport.sent[1].head.headerFields[.authorization] == nil)
    }

    @Test func httpsToHttpIsRefusedUnlessAllowed() async throws {
        let steps: [ScriptedTransport.Step] = [Self.redirect(302, to: "http://service.test/plain"), .status(200)]
        let transport = ScriptedTransport(steps)
        let (service, monitor) = NetworkServiceTests.service(transport)
        monitor.cancel()
        let secure = Request(method: .get, target: .url(URL(string: "https://service.test/secure")!))
        let error = await #expect(throws: NetworkError.self) { try await service.send(secure) }
        guard case .redirectRefused(let why, _)? = error?.reason else {
            Issue.record("expected redirectRefused, got \(String(describing: error))")
            return
        }
        #expect(why.contains("https to http"))
        #expect(transport.sent.count == 1)

        let (again, _) = self.service(steps)
        let allowed = try await again.send(secure.with { $0.redirects = .follow(allowsHTTPSToHTTP: true) })
        #expect(allowed.url.absoluteString == "http://service.test/plain")
    }

    @Test func moreHopsThanTheLimitIsRefused() async throws {
        let (service, transport) = service([Self.redirect(302, to: "/loop")]) { $0.redirects = .follow(limit: 3) }
        let error = await #expect(throws: NetworkError.self) { try await service.send(.get("/loop")) }
        guard case .redirectRefused(let why, _)? = error?.reason else {
            Issue.record("expected redirectRefused, got \(String(describing: error))")
            return
        }
        #expect(why.contains("more than 3"))
        #expect(transport.sent.count == 4)
    }

    @Test func neverFollowingMakesTheRedirectAStatus() async throws {
        let (service, transport) = service([Self.redirect(301, to: "/elsewhere")]) { $0.redirects = .never }
        let error = await #expect(throws: NetworkError.self) { try await service.send(.get("/old")) }
        guard case .unsuccessfulStatus(let status, _)? = error?.reason else {
            Issue.record("expected unsuccessfulStatus, got \(String(describing: error))")
            return
        }
        #expect(status.code == 301)
        #expect(transport.sent.count == 1)
        // Accepting 3xx returns the redirect itself, Location included.
        let (raw, _) = self.service([Self.redirect(301, to: "/elsewhere")]) {
            $0.redirects = .never
            $0.acceptableStatusCodes = 200..<400
        }
        let response = try await raw.send(.get("/old"))
        #expect(response.status.code == 301)
        #expect(response.headerFields[.location] == "/elsewhere")
    }

    @Test func aRedirectWithoutAUsableLocationIsJudgedAsAStatus() async throws {
        let (service, _) = service([Self.redirect(302, to: "ftp://files.test/x")])
        let error = await #expect(throws: NetworkError.self) { try await service.send(.get("/start")) }
        guard case .unsuccessfulStatus(let status, _)? = error?.reason else {
            Issue.record("expected unsuccessfulStatus, got \(String(describing: error))")
            return
        }
        #expect(status.code == 302)
    }

    @Test func credentialsInTheLocationAreItsOwn() async throws {
        let (service, transport) = service([Self.redirect(302, to: "http://bob:pw@other.test/"), .status(200)])
        var request = Request.get("/start")
        request.headerFields[.authorization] = "Bearer secret"
        let response = try await service.send(request)
        #expect(
            transport.sent[1].head.headerFields[.authorization] == "Basic " + Data("bob:pw".utf8).base64EncodedString())
        #expect(!response.url.absoluteString.contains("pw"))
    }
}
