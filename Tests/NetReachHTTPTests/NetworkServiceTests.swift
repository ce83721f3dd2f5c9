import Dispatch
import Foundation
import HTTPTypes
import NetReach
import NetReachTesting
import Testing

@testable import NetReachHTTP

/// NetworkService against a scripted transport and a simulated network: no sockets, no root.
@Suite("NetworkService")
struct NetworkServiceTests {
    static let base = URL(string: "http://service.test")!

    /// A fast policy: no jitter, short back-off.
    static func policy(_ change: (inout RequestPolicy) -> Void = { _ in }) -> RequestPolicy {
        var retries = DefaultRetryPolicy()
        retries.jitter = .none
        retries.exponentialScale = .milliseconds(5)
        var policy = RequestPolicy()
        policy.retryPolicy = retries
        change(&policy)
        return policy
    }

    static func service(
        _ transport: ScriptedTransport, network: SimulatedNetwork = .connected(), policy: RequestPolicy = policy(),
        onWaiting: (@Sendable (WaitingEvent) -> Void)? = nil
    ) -> (NetworkService, PathMonitor) {
        let monitor = PathMonitor(source: network)
        monitor.start(queue: DispatchQueue(label: "monitor"))
        return (
            NetworkService(baseURL: base, policy: policy, transport: transport, monitor: monitor, onWaiting: onWaiting),
            monitor
        )
    }

    @Test func getIsRetriedToSuccess() async throws {
        let transport = ScriptedTransport([.failure(.connectionLost), .status(503), .status(200, body: "ok")])
        let (service, monitor) = Self.service(transport)
        defer { monitor.cancel() }
        let response = try await service.send(.get("/items"))
        #expect(response.status == .ok)
        #expect(response.attempts == 3)
        #expect(response.text == "ok")
        #expect(transport.sent.map(\.head.path) == ["/items", "/items", "/items"])
    }

    @Test func postWithoutAKeyIsNeverRepeatedAfterItMayHaveBeenSent() async {
        for failure in [
            ScriptedTransport.Step.failure(.connectionLost), .failure(.timedOut), .status(503), .status(500),
        ] {
            let transport = ScriptedTransport([failure, .status(200)])
            let (service, monitor) = Self.service(transport)
            defer { monitor.cancel() }
            await #expect(throws: NetworkError.self) {
                try await service.send(.post("/transfer", body: Data("100".utf8)))
            }
            #expect(transport.sent.count == 1, "a POST was sent twice after \(failure)")
        }
    }

    @Test func noCustomPolicyCanRepeatAnUnsafePost() async {
        struct Always: RetryPolicy {
            func decision(for attempt: RetryAttempt) -> RetryDecision { .retry(after: .zero) }
        }
        let transport = ScriptedTransport([.failure(.connectionLost), .status(200)])
        let (service, monitor) = Self.service(transport, policy: Self.policy { $0.retryPolicy = Always() })
        defer { monitor.cancel() }
        await #expect(throws: NetworkError.self) { try await service.send(.post("/transfer")) }
        #expect(transport.sent.count == 1)
    }

    @Test func postThatProvablyNeverLeftIsRetried() async throws {
        let transport = ScriptedTransport([.failure(.cannotConnect), .status(201)])
        let (service, monitor) = Self.service(transport)
        defer { monitor.cancel() }
        let response = try await service.send(.post("/orders"))
        #expect(response.status == .created)
        #expect(transport.sent.count == 2)
    }

    @Test func postWithAKeyIsRetriedWithTheSameKey() async throws {
        let transport = ScriptedTransport([.failure(.connectionLost), .status(502), .status(201)])
        let (service, monitor) = Self.service(transport)
        defer { monitor.cancel() }
        let request = Request.post("/orders", body: Data("{}".utf8)).withIdempotencyKey()
        let response = try await service.send(request)
        #expect(response.attempts == 3)
        let keys = transport.sent.map(\.idempotencyKey)
        #expect(keys.count == 3 && Set(keys).count == 1 && keys[0] == request.idempotencyKey)
    }

    @Test func retryAfterIsHonoured() async throws {
        let transport = ScriptedTransport([.status(503, headers: ["Retry-After": "1"]), .status(200)])
        let (service, monitor) = Self.service(transport)
        defer { monitor.cancel() }
        let clock = ContinuousClock()
        let started = clock.now
        _ = try await service.send(.get("/busy"))
        #expect(clock.now - started >= .seconds(1))
    }

    @Test func retryAfterBeyondTheMaximumGivesUp() async {
        let transport = ScriptedTransport([.status(503, headers: ["Retry-After": "3600"]), .status(200)])
        let (service, monitor) = Self.service(transport)
        defer { monitor.cancel() }
        do {
            _ = try await service.send(.get("/busy"))
            Issue.record("expected a failure")
        } catch {
            guard case .unsuccessfulStatus(let status, _) = error.reason else {
                Issue.record("got \(error)")
                return
            }
            #expect(status.code == 503)
        }
        #expect(transport.sent.count == 1)
    }

    @Test("A failure says how many attempts it took, in its description too")
    func failuresCountTheirAttempts() async {
        // Retried until the policy gives up: every attempt counted.
        let transport = ScriptedTransport(Array(repeating: .status(503), count: 10))
        let (service, monitor) = Self.service(transport)
        defer { monitor.cancel() }
        do {
            _ = try await service.send(.get("/busy"))
            Issue.record("expected a failure")
        } catch {
            #expect(transport.sent.count > 1)
            #expect(error.attempts == transport.sent.count)
            #expect(error.description.hasSuffix("; \(transport.sent.count) attempts"), "\(error)")
        }

        // A POST whose connection broke is not repeated: one attempt.
        let once = ScriptedTransport([.failure(.connectionLost), .status(200)])
        let (post, postMonitor) = Self.service(once)
        defer { postMonitor.cancel() }
        do {
            _ = try await post.send(Request(method: .post, target: .path("/pay")))
            Issue.record("expected a failure")
        } catch {
            #expect(error.attempts == 1)
            #expect(error.description.hasPrefix("connection lost"), "\(error)")
            #expect(error.description.hasSuffix("; 1 attempt"), "\(error)")
        }

        // Refused before any attempt: nothing sent, and the description says so.
        let never = ScriptedTransport([.status(200)])
        let noBase = NetworkService(transport: never, monitor: monitor)
        do {
            _ = try await noBase.send(.get("/relative-without-base"))
            Issue.record("expected a failure")
        } catch {
            #expect(error.attempts == 0)
            #expect(error.description.hasSuffix("; not sent"), "\(error)")
        }
        #expect(never.sent.isEmpty)
    }

    @Test func unacceptableStatusCarriesStatusAndBody() async {
        let transport = ScriptedTransport([.status(404, body: "no such item")])
        let (service, monitor) = Self.service(transport)
        defer { monitor.cancel() }
        do {
            _ = try await service.send(.get("/items/9"))
            Issue.record("expected a failure")
        } catch {
            guard case .unsuccessfulStatus(let status, let body) = error.reason else {
                Issue.record("got \(error)")
                return
            }
            #expect(status.code == 404)
            #expect(String(decoding: body, as: UTF8.self) == "no such item")
            #expect(error.description.contains("404"))
        }
    }

    @Test func acceptableStatusesAreConfigurable() async throws {
        let transport = ScriptedTransport([.status(304)])
        let (service, monitor) = Self.service(transport, policy: Self.policy { $0.acceptableStatusCodes = 200..<400 })
        defer { monitor.cancel() }
        #expect(try await service.send(.get("/cached")).status.code == 304)
    }

    @Test(arguments: ["ftp://example.test/file", "http://", "not a url at all"])
    func badURLsAreInvalidURL(_ text: String) async {
        let transport = ScriptedTransport([.status(200)])
        let (service, monitor) = Self.service(transport)
        defer { monitor.cancel() }
        let target: Request.Target = URL(string: text).map { .url($0) } ?? .path(text)
        let noBase = NetworkService(transport: transport, monitor: monitor)
        do {
            _ = try await noBase.send(Request(method: .get, target: target))
            Issue.record("expected invalidURL for \(text)")
        } catch {
            guard case .invalidURL = error.reason else {
                Issue.record("got \(error)")
                return
            }
        }
        _ = service
        #expect(transport.sent.isEmpty)
    }

    @Test func headersQueryAndDefaultsAreSent() async throws {
        let transport = ScriptedTransport([.status(200)])
        let monitor = PathMonitor(source: SimulatedNetwork.connected())
        monitor.start(queue: DispatchQueue(label: "monitor"))
        defer { monitor.cancel() }
        let service = NetworkService(
            baseURL: URL(string: "http://service.test:8080/api/")!,
            defaultHeaderFields: [.userAgent: "netreach-tests", .accept: "text/plain"],
            transport: transport, monitor: monitor)
        var request = Request.get("items", query: ["q": "a b", "page": "2"])
        request.headerFields[.accept] = "application/json"
        _ = try await service.send(request)
        let head = try #require(transport.sent.first?.head)
        #expect(head.authority == "service.test:8080")
        #expect(head.path == "/api/items?q=a%20b&page=2")
        #expect(head.headerFields[.accept] == "application/json")
        #expect(head.headerFields[.userAgent] == "netreach-tests")
    }

    @Test func decodingIsApartFromTransport() async throws {
        struct Item: Decodable { var id: Int }
        let transport = ScriptedTransport([.status(200, body: "{\"name\": 1}")])
        let (service, monitor) = Self.service(transport)
        defer { monitor.cancel() }
        let response = try await service.send(.get("/item"))
        #expect(throws: DecodingError.self) { try response.decode(Item.self) }
    }

    // MARK: Connectivity

    @Test(.timeLimit(.minutes(1))) func waitsForConnectivityThenCompletes() async throws {
        let network = SimulatedNetwork.connected()
        network.removeDefaultRoutes("eth0")
        let events = EventLog()
        let transport = ScriptedTransport([.status(200)])
        let (service, monitor) = Self.service(
            transport, network: network, policy: Self.policy { $0.waitsForConnectivity = true },
            onWaiting: { events.append($0) })
        defer { monitor.cancel() }
        let request = Task { try await service.send(.get("/feed")) }
        while events.all.isEmpty { try await Task.sleep(for: .milliseconds(5)) }
        let eventSeen = ContinuousClock.now // the wait began before this
        try await Task.sleep(for: .milliseconds(100))
        #expect(transport.sent.isEmpty, "nothing is sent while waiting")
        #expect(events.all.map(\.reason) == [.noPath(.noDefaultRoute)])
        let routeAdded = ContinuousClock.now // and ended after this
        network.addDefaultRoute("eth0", gateway: IPAddress("192.0.2.1")!)
        let response = try await request.value
        #expect(response.waitedForConnectivity >= routeAdded - eventSeen)
        #expect(events.all.count == 1, "one event per wait")
    }

    @Test func withoutWaitingAnUnsatisfiedPathIsStillAttemptedAndExplained() async {
        let network = SimulatedNetwork.connected()
        network.removeDefaultRoutes("eth0")
        let transport = ScriptedTransport([.failure(.cannotConnect)])
        var retries = DefaultRetryPolicy()
        retries.retryLimit = 0
        let (service, monitor) = Self.service(
            transport, network: network, policy: Self.policy { $0.retryPolicy = retries })
        defer { monitor.cancel() }
        do {
            _ = try await service.send(.get("/feed"))
            Issue.record("expected notConnected")
        } catch {
            guard case .notConnected(let reason, let path) = error.reason else {
                Issue.record("got \(error)")
                return
            }
            #expect(reason == .noPath(.noDefaultRoute))
            #expect(path.unsatisfiedReason == .noDefaultRoute)
        }
        #expect(transport.sent.count == 1, "don't preflight: the request was attempted")
    }

    @Test func withoutWaitingNoRetryIsSpentOnAPathThatIsNotThere() async {
        let network = SimulatedNetwork.connected()
        network.removeDefaultRoutes("eth0")
        let transport = ScriptedTransport([.failure(.cannotConnect), .status(200)])
        let (service, monitor) = Self.service(transport, network: network) // default: 2 retries
        defer { monitor.cancel() }
        do {
            _ = try await service.send(.get("/feed"))
            Issue.record("expected notConnected")
        } catch {
            guard case .notConnected(.noPath(.noDefaultRoute), _) = error.reason else {
                Issue.record("got \(error)")
                return
            }
        }
        #expect(transport.sent.count == 1, "one attempt, then the path explains the failure")
    }

    @Test func aRefusedConnectionOnAUsablePathIsStillRetried() async throws {
        let transport = ScriptedTransport([.failure(.cannotConnect), .status(200)])
        let (service, monitor) = Self.service(transport)
        defer { monitor.cancel() }
        let response = try await service.send(.get("/feed"))
        #expect(response.attempts == 2)
    }

    @Test func expensiveDenialFailsWithoutSending() async {
        let transport = ScriptedTransport([.status(200)])
        let (service, monitor) = Self.service(
            transport, network: .connected(.cellular),
            policy: Self.policy { $0.allowsExpensiveNetworkAccess = false })
        defer { monitor.cancel() }
        do {
            _ = try await service.send(.get("/video"))
            Issue.record("expected notConnected")
        } catch {
            guard case .notConnected(let reason, let path) = error.reason else {
                Issue.record("got \(error)")
                return
            }
            #expect(reason == .expensiveDenied)
            #expect(path.usesInterfaceType(.cellular))
        }
        #expect(transport.sent.isEmpty)
    }

    @Test func perRequestOverridesDenyCellularAndConstrained() async throws {
        let network = SimulatedNetwork.connected(.cellular)
        let transport = ScriptedTransport([.status(200)])
        let (service, monitor) = Self.service(transport, network: network)
        defer { monitor.cancel() }
        await #expect(throws: NetworkError.self) {
            try await service.send(Request.get("/sync").with { $0.allowsCellularAccess = false })
        }
        #expect(try await service.send(.get("/sync")).status == .ok)
        #expect(transport.sent.count == 1)
    }

    @Test func aFailureIsExplainedWithTheRequestsOwnPolicy() async {
        // The service denies cellular, this request allows it: its refused connection on a usable
        // cellular path is a transport failure, not "cellular denied".
        let transport = ScriptedTransport([.failure(.cannotConnect)])
        let (service, monitor) = Self.service(
            transport, network: .connected(.cellular),
            policy: Self.policy {
                $0.allowsCellularAccess = false
                var noRetries = DefaultRetryPolicy()
                noRetries.retryLimit = 0
                $0.retryPolicy = noRetries
            })
        defer { monitor.cancel() }
        do {
            _ = try await service.send(Request.get("/sync").with { $0.allowsCellularAccess = true })
            Issue.record("expected a failure")
        } catch {
            guard case .transport(let underlying, let path) = error.reason else {
                Issue.record("got \(error)")
                return
            }
            #expect(underlying.kind == .cannotConnect)
            #expect(path?.usesInterfaceType(.cellular) == true)
        }
        #expect(transport.sent.count == 1)
    }

    @Test(.timeLimit(.minutes(1))) func cellularDeniedWaitsForWifi() async throws {
        let network = SimulatedNetwork.connected(.cellular)
        let transport = ScriptedTransport([.status(200)])
        let (service, monitor) = Self.service(
            transport, network: network,
            policy: Self.policy {
                $0.waitsForConnectivity = true
                $0.allowsCellularAccess = false
            })
        defer { monitor.cancel() }
        let request = Task { try await service.send(.get("/backup")) }
        try await Task.sleep(for: .milliseconds(50))
        #expect(transport.sent.isEmpty)
        network.addInterface("wlan0", type: .wifi, metric: 10)
        #expect(try await request.value.status == .ok)
    }

    @Test(.timeLimit(.minutes(1))) func waitingEndsAtTheResourceTimeout() async {
        let network = SimulatedNetwork.connected()
        network.removeDefaultRoutes("eth0")
        let transport = ScriptedTransport([.status(200)])
        let (service, monitor) = Self.service(
            transport, network: network,
            policy: Self.policy {
                $0.waitsForConnectivity = true
                $0.timeoutIntervalForResource = .milliseconds(200)
            })
        defer { monitor.cancel() }
        do {
            _ = try await service.send(.get("/feed"))
            Issue.record("expected a timeout")
        } catch {
            guard case .waitingForConnectivityTimedOut(let reason, let path) = error.reason else {
                Issue.record("got \(error)")
                return
            }
            #expect(reason == .noPath(.noDefaultRoute))
            #expect(path.unsatisfiedReason == .noDefaultRoute)
        }
        #expect(transport.sent.isEmpty)
    }

    @Test(.timeLimit(.minutes(5))) func cancellationStopsWaitingBackOffAndTransport() async {
        // Each would otherwise go on for an hour: waiting (the resource timeout is a week), backing
        // off (Retry-After 3600) or in the transport (a 3600 s answer). Ending at all, as
        // cancelled, is the cancellation's doing; the bound below is 60 times short of the
        // alternative, so a loaded machine cannot fail it.
        let hour = Duration.seconds(3600)
        // While waiting.
        let offline = SimulatedNetwork.connected()
        offline.removeDefaultRoutes("eth0")
        let waitingTransport = ScriptedTransport([.status(200)])
        let (waitingService, m1) = Self.service(
            waitingTransport, network: offline, policy: Self.policy { $0.waitsForConnectivity = true })
        // While backing off.
        let busyTransport = ScriptedTransport([.status(503, headers: ["Retry-After": "3600"]), .status(200)])
        var patientRetries = DefaultRetryPolicy()
        patientRetries.maximumDelay = hour
        let (busyService, m2) = Self.service(busyTransport, policy: Self.policy { $0.retryPolicy = patientRetries })
        // While the transport is busy.
        let slowTransport = ScriptedTransport([.slow(hour)])
        let (slowService, m3) = Self.service(slowTransport)
        defer { [m1, m2, m3].forEach { $0.cancel() } }

        for (service, path) in [(waitingService, "/wait"), (busyService, "/busy"), (slowService, "/slow")] {
            let clock = ContinuousClock()
            let task = Task { try await service.send(.get(path)) }
            try? await Task.sleep(for: .milliseconds(50))
            let cancelledAt = clock.now
            task.cancel()
            do {
                _ = try await task.value
                Issue.record("\(path): expected cancellation")
            } catch let error as NetworkError {
                guard case .cancelled = error.reason else {
                    Issue.record("\(path): got \(error)")
                    continue
                }
            } catch {
                Issue.record("\(path): got \(error)")
            }
            #expect(clock.now - cancelledAt < hour / 60, "\(path) took \(clock.now - cancelledAt) to stop")
        }
        #expect(busyTransport.sent.count == 1)
    }

    @Test(.timeLimit(.minutes(1))) func completionHandlerDeliversOnTheGivenQueue() async {
        let transport = ScriptedTransport([.status(200, body: "ok")])
        let (service, monitor) = Self.service(transport)
        defer { monitor.cancel() }
        let queue = DispatchQueue(label: "completion")
        let key = DispatchSpecificKey<Bool>()
        queue.setSpecific(key: key, value: true)
        let outcome = await withCheckedContinuation { (continuation: CheckedContinuation<(Bool, String?), Never>) in
            service.send(.get("/ok"), queue: queue) { result in
                continuation.resume(returning: (DispatchQueue.getSpecific(key: key) == true, try? result.get().text))
            }
        }
        #expect(outcome.0)
        #expect(outcome.1 == "ok")
    }

    @Test(.timeLimit(.minutes(1))) func completionHandleCancels() async {
        let transport = ScriptedTransport([.slow(.seconds(20))])
        let (service, monitor) = Self.service(transport)
        defer { monitor.cancel() }
        let result = await withCheckedContinuation {
            (continuation: CheckedContinuation<Result<Response, NetworkError>, Never>) in
            let handle = service.send(.get("/slow"), queue: DispatchQueue(label: "completion")) {
                continuation.resume(returning: $0)
            }
            DispatchQueue.global().asyncAfter(deadline: .now() + 0.05) { handle.cancel() }
        }
        guard case .failure(let error) = result, error.isCancelled else {
            Issue.record("got \(result)")
            return
        }
    }
}

/// Waiting events, from any thread.
final class EventLog: @unchecked Sendable {
    // @unchecked: `events` is only touched while `lock` is held.
    private let lock = NSLock()
    private var events: [WaitingEvent] = []
    func append(_ event: WaitingEvent) { lock.withLock { events.append(event) } }
    var all: [WaitingEvent] { lock.withLock { events } }
}
