import Dispatch
import Foundation
import HTTPTypes
import NetReach
import NetReachHTTP
import NetReachTesting
import OpenAPIRuntime
import Testing

/// `send`'s buffered limit, `bytes(_:)` streaming, and the request timeout as a stall timeout,
/// through the service on each real transport against the fault-injecting server on 127.0.0.1.
@Suite("NetworkService streaming", .timeLimit(.minutes(1)))
struct ServiceStreamingTests {
    @Test(arguments: TransportKind.allCases)
    func aBodyOverTheBufferedLimitIsATypedErrorNotMemory(kind: TransportKind) async throws {
        try await withServer { server in
            let (service, monitor) = ServiceSafetyTests.service(kind, server) { policy, _ in
                policy.maximumBufferedBodySize = 100_000
            }
            defer { monitor.cancel() }
            let error = await #expect(throws: NetworkError.self) {
                try await service.send(.get("/big?bytes=1000000"))
            }
            guard case .bodyTooLarge(let limit)? = error else {
                Issue.record("expected bodyTooLarge, got \(String(describing: error))")
                return
            }
            #expect(limit == 100_000)
            // Not a transient failure: asked once.
            #expect(server.received(path: "/big").count == 1)
            // At the limit exactly, it is a body like any other.
            let exact = try await service.send(.get("/big?bytes=100000"))
            #expect(exact.body == FaultInjectingServer.bigBody(count: 100_000))
        }
    }

    @Test(arguments: TransportKind.allCases)
    func bytesHandsOverLinesAsTheyCome(kind: TransportKind) async throws {
        try await withServer { server in
            let (service, monitor) = ServiceSafetyTests.service(kind, server)
            defer { monitor.cancel() }
            let clock = ContinuousClock()
            let stream = try await service.bytes(.get("/drip?count=3&ms=500"))
            #expect(stream.status == .ok)
            var firstAt: Duration?
            var text = ""
            let start = clock.now
            for try await chunk in stream.body {
                if firstAt == nil { firstAt = clock.now - start }
                text += String(decoding: chunk, as: UTF8.self)
            }
            #expect(text == "line 0\nline 1\nline 2\n")
            // The last line comes ~1 s after the first: the first was readable before it existed.
            #expect(try #require(firstAt) < .milliseconds(800), "first line after \(String(describing: firstAt))")
        }
    }

    @Test(arguments: TransportKind.allCases)
    func theRequestTimeoutIsAStallTimeoutNotATotal(kind: TransportKind) async throws {
        try await withServer { server in
            let (service, monitor) = ServiceSafetyTests.service(kind, server) { policy, _ in
                policy.timeoutIntervalForRequest = .milliseconds(1500)
            }
            defer { monitor.cancel() }
            // 10 lines 300 ms apart: 3 s in all, twice the request timeout, never a 1.5 s gap.
            let response = try await service.send(.get("/drip?count=10&ms=300"))
            #expect(response.text.hasSuffix("line 9\n"))
            #expect(response.attempts == 1)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aStalledBodyIsRetriedWhenSafeAndTimesOut(kind: TransportKind) async throws {
        try await withServer { server in
            let (service, monitor) = ServiceSafetyTests.service(kind, server) { policy, retries in
                policy.timeoutIntervalForRequest = .milliseconds(300)
                retries.retryLimit = 1
            }
            defer { monitor.cancel() }
            let error = await #expect(throws: NetworkError.self) {
                try await service.send(.get("/drip?count=10&ms=20&stallAfter=3"))
            }
            guard case .timedOut? = error else {
                Issue.record("expected timedOut, got \(String(describing: error))")
                return
            }
            // A GET that stalled is safe to repeat: two attempts reached the server.
            #expect(server.received(path: "/drip").count == 2)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aFailureWhileReadingAStreamIsANetworkError(kind: TransportKind) async throws {
        try await withServer { server in
            let (service, monitor) = ServiceSafetyTests.service(kind, server)
            defer { monitor.cancel() }
            let stream = try await service.bytes(.get("/reset-mid-body"))
            var received = 0
            do {
                for try await chunk in stream.body { received += chunk.count }
                Issue.record("a reset body ended normally after \(received) bytes")
            } catch let error as NetworkError {
                guard case .connectionLost = error else {
                    Issue.record("expected connectionLost, got \(error)")
                    return
                }
            }
            #expect(received <= 100)
            #expect(server.received(path: "/reset-mid-body").count == 1, "a body being read is never retried")
        }
    }
}
