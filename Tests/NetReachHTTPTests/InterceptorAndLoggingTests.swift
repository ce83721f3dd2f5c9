import Foundation
import HTTPTypes
import Logging
import NetReach
import NetReachTesting
import Synchronization
import Testing

@testable import NetReachHTTP

/// The request interceptor (adapt each attempt, one more after a 401, within the safety rule),
/// the swift-log logger, and absolute URLs given as text.
@Suite("Interceptor and logging")
struct InterceptorAndLoggingTests {
    /// Adds `Bearer tokenN`, where N grows each time a 401 makes it refresh.
    final class Tokens: RequestInterceptor {
        let generation = Mutex(1)
        let adapted = Mutex(0)

        func adapt(_ request: inout HTTPRequest, attempt: Int) async throws {
            adapted.withLock { $0 += 1 }
            request.headerFields[.authorization] = "Bearer token\(generation.withLock { $0 })"
        }

        func retry(after response: HTTPResponse, attempt: Int) async -> Bool {
            guard response.status.code == 401 else { return false }
            generation.withLock { $0 += 1 }
            return true
        }
    }

    private func service(
        _ steps: [ScriptedTransport.Step], interceptor: Tokens? = nil, logger: Logger? = nil
    )
        -> (NetworkService, ScriptedTransport)
    {
        let transport = ScriptedTransport(steps)
        let service = NetworkService(
            baseURL: NetworkServiceTests.base, policy: NetworkServiceTests.policy(),
            transport: transport, monitor: nil, interceptor: interceptor, logger: logger)
        return (service, transport)
    }

    @Test func a401IsSentOnceMoreWithTheRefreshedToken() async throws {
        let tokens = Tokens()
        let (service, transport) = service([.status(401), .status(200, body: "me")], interceptor: tokens)
        let response = try await service.send(.get("/me"))
        #expect(response.text == "me")
        #expect(response.attempts == 2)
        #expect(transport.sent.map { $0.head.headerFields[.authorization] } == ["Bearer token1", "Bearer token2"])
    }

    @Test func onlyOnceEvenIfThe401Stays() async {
        let tokens = Tokens()
        let (service, transport) = service([.status(401)], interceptor: tokens)
        await #expect(throws: NetworkError.self) { try await service.send(.get("/me")) }
        #expect(transport.sent.count == 2)
    }

    @Test func aPostWithoutAKeyIsNotSentAgainForTheInterceptor() async {
        let tokens = Tokens()
        let (service, transport) = service([.status(401), .status(200)], interceptor: tokens)
        await #expect(throws: NetworkError.self) { try await service.send(.post("/transfer", body: Data("100".utf8))) }
        #expect(transport.sent.count == 1, "the safety rule holds for the interceptor too")
        // With a key, the server promised to apply it once: the refreshed attempt goes.
        let (keyed, keyedTransport) = self.service([.status(401), .status(200)], interceptor: Tokens())
        _ = try? await keyed.send(.post("/transfer", body: Data("100".utf8)).withIdempotencyKey("k1"))
        #expect(keyedTransport.sent.count == 2)
    }

    @Test func everyAttemptIsAdapted() async throws {
        let tokens = Tokens()
        let (service, transport) = service([.failure(.connectionLost), .status(200)], interceptor: tokens)
        _ = try await service.send(.get("/feed"))
        #expect(tokens.adapted.withLock { $0 } == 2)
        #expect(transport.sent.allSatisfy { $0.head.headerFields[.authorization] == "Bearer token1" })
    }

    @Test func attemptsAreLoggedAtDebugAndRetriesAtInfo() async throws {
        let records = Records()
        var logger = Logger(label: "test") { _ in CapturingHandler(records: records) }
        logger.logLevel = .debug
        let (service, _) = service([.status(503), .status(200)], logger: logger)
        _ = try await service.send(.get("/flaky"))
        let seen = records.all
        #expect(seen.filter { $0.0 == .debug && $0.1 == "attempt" }.count == 2)
        #expect(seen.contains { $0.0 == .info && $0.1 == "retrying" })
    }

    @Test func anAbsoluteURLAsTextIsNotAPath() async throws {
        let (service, transport) = service([.status(200)])
        _ = try await service.send(.get("https://other.test/x?y=1"))
        #expect(transport.sent.first?.head.authority == "other.test")
        #expect(transport.sent.first?.head.scheme == "https")
        #expect(transport.sent.first?.head.path == "/x?y=1")
        _ = try await service.send(.get("relative/http://not-a-url"))
        #expect(transport.sent.last?.head.authority == "service.test")
    }
}

/// Messages with their levels, from any thread.
private final class Records: Sendable {
    private let storage = Mutex<[(Logger.Level, String)]>([])
    var all: [(Logger.Level, String)] { storage.withLock { $0 } }
    func append(_ level: Logger.Level, _ message: String) { storage.withLock { $0.append((level, message)) } }
}

/// Records each message with its level.
private struct CapturingHandler: LogHandler {
    let records: Records
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .trace

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        records.append(event.level, event.message.description)
    }
}

/// A monitor handed to the service unstarted is started only when a path is needed.
@Suite("Lazily started monitor")
struct LazyMonitorTests {
    @Test func aSuccessfulRequestNeverStartsItAFailureDoesAndIsExplained() async throws {
        let network = SimulatedNetwork.connected()
        let monitor = PathMonitor(source: network)
        defer { monitor.cancel() }
        let transport = ScriptedTransport([.status(200), .failure(.cannotConnect)])
        var policy = NetworkServiceTests.policy()
        var retries = DefaultRetryPolicy()
        retries.retryLimit = 0
        policy.retryPolicy = retries
        let service = NetworkService(
            baseURL: NetworkServiceTests.base, policy: policy, transport: transport, monitor: monitor)
        _ = try await service.send(.get("/ok"))
        #expect(network.subscriberCount == 0, "a request that succeeded read the system's state")
        let error = await #expect(throws: NetworkError.self) { try await service.send(.get("/down")) }
        #expect(network.subscriberCount == 1)
        guard case .transport(_, let path)? = error?.reason else {
            Issue.record("expected a transport error, got \(String(describing: error))")
            return
        }
        #expect(path?.status == .satisfied, "explained with the path, not 'monitor unavailable'")
    }

    @Test func waitingStartsItBeforeTheFirstAttempt() async throws {
        let network = SimulatedNetwork.connected()
        let monitor = PathMonitor(source: network)
        defer { monitor.cancel() }
        let service = NetworkService(
            baseURL: NetworkServiceTests.base,
            policy: NetworkServiceTests.policy { $0.waitsForConnectivity = true },
            transport: ScriptedTransport([.status(200)]), monitor: monitor)
        _ = try await service.send(.get("/ok"))
        #expect(network.subscriberCount == 1)
        #expect(monitor.currentPath.status == .satisfied)
    }
}
