import Dispatch
import Foundation
import HTTPTypes
import NetReach
import NetReachHTTP
import NetReachTestSupport
import NetReachTesting
import OpenAPIRuntime
import Synchronization
import Testing

/// `NetworkService` over each real transport against the fault-injecting server on 127.0.0.1,
/// counting what the server actually received: the promise "never sends a bank transfer twice"
/// checked on real sockets, not on a scripted transport.
@Suite("NetworkService over real transports", .timeLimit(.minutes(1)))
struct ServiceSafetyTests {
    /// Transient faults after which the server may have received the request: retried when safe.
    static let transientFaults = [
        "/reset-after-headers", "/reset-mid-body", "/close-before-response",
        "/status/503", "/retry-after?seconds=0", "/too-many", "/status/500",
    ]
    /// Every fault after which the server may have received the request; garbage instead of HTTP
    /// is not transient, so it is never retried at all.
    static let faultsAfterSending = transientFaults + ["/malformed"]

    static func service(
        _ kind: TransportKind, _ server: FaultInjectingServer,
        _ change: (inout RequestPolicy, inout DefaultRetryPolicy) -> Void = { _, _ in }
    ) -> (NetworkService, PathMonitor) {
        var retries = DefaultRetryPolicy()
        retries.jitter = .none
        retries.exponentialScale = .milliseconds(10)
        var policy = RequestPolicy()
        change(&policy, &retries)
        policy.retryPolicy = retries
        let monitor = PathMonitor(source: SimulatedNetwork.connected())
        monitor.start(queue: DispatchQueue(label: "ServiceSafetyTests.monitor"))
        let service = NetworkService(
            baseURL: URL(string: "http://127.0.0.1:\(server.port)")!, policy: policy,
            transport: kind.make(), monitor: monitor)
        return (service, monitor)
    }

    static func path(_ target: String) -> String { String(target.split(separator: "?").first!) }

    @Test(arguments: TransportKind.allCases, faultsAfterSending)
    func aPostWithoutAKeyIsNeverReceivedTwice(kind: TransportKind, fault: String) async throws {
        try await withServer { server in
            let (service, monitor) = Self.service(kind, server)
            defer { monitor.cancel() }
            await #expect(throws: NetworkError.self) {
                try await service.send(.post(fault, body: Data("transfer 100".utf8)))
            }
            #expect(server.received(path: Self.path(fault)).count == 1, "\(server.received)")
        }
    }

    @Test(arguments: TransportKind.allCases, transientFaults)
    func aPostWithAKeyIsRetriedWithTheSameKey(kind: TransportKind, fault: String) async throws {
        try await withServer { server in
            let (service, monitor) = Self.service(kind, server)
            defer { monitor.cancel() }
            let request = Request.post(fault, body: Data("transfer 100".utf8)).withIdempotencyKey("key-1")
            _ = try? await service.send(request)
            let received = server.received(path: Self.path(fault))
            #expect(received.count == 3, "1 attempt + 2 retries: \(received)")
            #expect(received.allSatisfy { $0.idempotencyKey == "key-1" }, "\(received.map(\.idempotencyKey))")
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aGetIsRetriedToSuccess(kind: TransportKind) async throws {
        try await withServer { server in
            let (service, monitor) = Self.service(kind, server)
            defer { monitor.cancel() }
            let response = try await service.send(.get("/fail-then-ok", query: ["status": "502", "times": "2"]))
            #expect(response.status == .ok)
            #expect(response.attempts == 3)
            #expect(server.received(path: "/fail-then-ok").count == 3)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aGetIsRetriedAfterAResetToSuccess(kind: TransportKind) async throws {
        try await withServer { server in
            let (service, monitor) = Self.service(kind, server)
            defer { monitor.cancel() }
            // Reset on every attempt: connection lost after two retries, all three received.
            do throws(NetworkError) {
                _ = try await service.send(.get("/reset-after-headers"))
                Issue.record("expected connectionLost")
            } catch {
                guard case .connectionLost = error.reason else {
                    Issue.record("got \(error)")
                    return
                }
            }
            #expect(server.received(path: "/reset-after-headers").count == 3)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func retryAfterIsHonouredOnRealSockets(kind: TransportKind) async throws {
        try await withServer { server in
            let (service, monitor) = Self.service(kind, server)
            defer { monitor.cancel() }
            let clock = ContinuousClock()
            let start = clock.now
            let response = try await service.send(.get("/retry-after", query: ["seconds": "1", "times": "1"]))
            let elapsed = clock.now - start
            #expect(response.status == .ok)
            #expect(response.attempts == 2)
            #expect(elapsed >= .milliseconds(950), "retried after \(elapsed), before Retry-After: 1")
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aRetryAfterBeyondTheMaximumDelayGivesUpAtOnce(kind: TransportKind) async throws {
        try await withServer { server in
            // Waiting out the cap before giving up would take 600 s: the bound below is a twentieth.
            let (service, monitor) = Self.service(kind, server) { _, retries in retries.maximumDelay = .seconds(600) }
            defer { monitor.cancel() }
            let clock = ContinuousClock()
            let start = clock.now
            do throws(NetworkError) {
                _ = try await service.send(.get("/retry-after", query: ["seconds": "3600"]))
                Issue.record("expected unsuccessfulStatus")
            } catch {
                guard case .unsuccessfulStatus(let status, _) = error.reason else {
                    Issue.record("got \(error)")
                    return
                }
                #expect(status.code == 503)
            }
            #expect(clock.now - start < .seconds(30), "gave up only after \(clock.now - start)")
            #expect(server.received(path: "/retry-after").count == 1)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aPortAbove65535IsAnInvalidURLNotACrash(kind: TransportKind) async throws {
        let service = NetworkService(transport: kind.make(), monitor: nil)
        do throws(NetworkError) {
            _ = try await service.send(.get("http://127.0.0.1:99999/"))
            Issue.record("expected invalidURL")
        } catch {
            guard case .invalidURL = error.reason else {
                Issue.record("got \(error)")
                return
            }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aRefusedPostIsRetriedBecauseItNeverLeft(kind: TransportKind) async throws {
        let closed = try ClosedLoopbackPort()
        let port = closed.port
        defer { withExtendedLifetime(closed) {} }
        var retries = DefaultRetryPolicy()
        retries.jitter = .none
        retries.exponentialScale = .milliseconds(10)
        var policy = RequestPolicy()
        policy.retryPolicy = retries
        let monitor = PathMonitor(source: SimulatedNetwork.connected())
        monitor.start(queue: DispatchQueue(label: "ServiceSafetyTests.monitor"))
        defer { monitor.cancel() }
        let attempts = AttemptCounter(kind.make())
        let service = NetworkService(
            baseURL: URL(string: "http://127.0.0.1:\(port)")!, policy: policy,
            transport: attempts, monitor: monitor)
        do throws(NetworkError) {
            _ = try await service.send(.post("/orders", body: Data("order".utf8)))
            Issue.record("expected a failure")
        } catch {
            guard case .transport(let underlying, _) = error.reason else {
                Issue.record("got \(error)")
                return
            }
            #expect(underlying.kind == .cannotConnect)
        }
        #expect(attempts.count == 3, "connection refused is provably unsent, so even a POST is retried")
    }

    @Test(arguments: TransportKind.allCases, [404, 408, 500])
    func statusesMapToUnsuccessfulStatusWithTheBody(kind: TransportKind, status: Int) async throws {
        try await withServer { server in
            let (service, monitor) = Self.service(kind, server) { _, retries in retries.retryLimit = 0 }
            defer { monitor.cancel() }
            do throws(NetworkError) {
                _ = try await service.send(.get("/status/\(status)"))
                Issue.record("expected unsuccessfulStatus")
            } catch {
                guard case .unsuccessfulStatus(let got, let body) = error.reason else {
                    Issue.record("got \(error)")
                    return
                }
                #expect(got.code == status)
                #expect(String(decoding: body, as: UTF8.self) == "status \(status)")
            }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func slowHeadersTimeOutAsTimedOutWithThePath(kind: TransportKind) async throws {
        try await withServer { server in
            let (service, monitor) = Self.service(kind, server) { policy, retries in
                policy.timeoutIntervalForRequest = .milliseconds(300)
                retries.retryLimit = 0
            }
            defer { monitor.cancel() }
            do throws(NetworkError) {
                _ = try await service.send(.get("/slow-headers", query: ["ms": "2000"]))
                Issue.record("expected timedOut")
            } catch {
                guard case .timedOut(let path) = error.reason else {
                    Issue.record("got \(error)")
                    return
                }
                #expect(path?.status == .satisfied)
            }
        }
    }

    @Test(arguments: TransportKind.allCases)
    func cancellingStopsTheBackOffAndNothingMoreIsSent(kind: TransportKind) async throws {
        try await withServer { server in
            // A 600 s back-off: the bound below is a twentieth of it.
            let (service, monitor) = Self.service(kind, server) { _, retries in
                retries.exponentialScale = .seconds(600)
                retries.maximumDelay = .seconds(600)
            }
            defer { monitor.cancel() }
            let clock = ContinuousClock()
            let start = clock.now
            let task = Task { try await service.send(.get("/status/503")) }
            while server.received(path: "/status/503").isEmpty { try await Task.sleep(for: .milliseconds(5)) }
            try await Task.sleep(for: .milliseconds(50))
            task.cancel()
            let result = await task.result
            guard case .failure(let error as NetworkError) = result, case .cancelled = error.reason else {
                Issue.record("expected cancelled, got \(result)")
                return
            }
            #expect(clock.now - start < .seconds(30), "cancel did not cut the 600 s back-off")
            try await Task.sleep(for: .milliseconds(100))
            #expect(server.received(path: "/status/503").count == 1)
        }
    }
}

/// Counts the attempts that reach a transport.
final class AttemptCounter: HTTPTransport {
    private let wrapped: any HTTPTransport
    private let attempts = Mutex(0)

    init(_ wrapped: any HTTPTransport) { self.wrapped = wrapped }

    var count: Int { attempts.withLock { $0 } }

    func send(
        _ request: HTTPRequest, body: HTTPBody?, options: TransportOptions
    ) async throws(TransportError) -> (HTTPResponse, HTTPBody) {
        attempts.withLock { $0 += 1 }
        return try await wrapped.send(request, body: body, options: options)
    }
}
