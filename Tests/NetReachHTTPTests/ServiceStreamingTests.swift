import Dispatch
import Foundation
import HTTPTypes
import NetReach
import NetReachHTTP
import NetReachTestSupport
import NetReachTesting
import NetReachURLSession
import OpenAPIRuntime
import Testing

/// `send`'s buffered limit, `bytes(_:)` streaming, and the request timeout as a stall timeout,
/// through the service on each real transport against the fault-injecting server on 127.0.0.1.
@Suite("NetworkService streaming", .offPool, .timeLimit(.minutes(1)))
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
            guard case .bodyTooLarge(let limit)? = error?.reason else {
                Issue.record("expected bodyTooLarge, got \(String(describing: error))")
                return
            }
            #expect(limit == 100_000)
            // Not a transient failure: asked once.
            #expect(server.received(path: "/big").count == 1)
            // At the limit exactly, it is a body like any other.
            let exact = try await service.send(.get("/big?bytes=100000"))
            #expect(byteDifference(exact.body, FaultInjectingServer.bigBody(count: 100_000)) == nil)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func bytesHandsOverLinesAsTheyCome(kind: TransportKind) async throws {
        try await withServer { server in
            let (service, monitor) = ServiceSafetyTests.service(kind, server)
            defer { monitor.cancel() }
            _ = try await service.send(.get("/ok")) // the transport's first use is not what is timed
            // One line, then nothing more on an open connection: the line can only arrive if the
            // stream hands over what has come (waiting for the end would wait for ever, until the
            // stall timeout's error). No clock decides.
            let stream = try await service.bytes(.get("/drip?count=3&ms=10&stallAfter=1"))
            #expect(stream.status == .ok)
            var lines = stream.body.makeAsyncIterator()
            let first = try await lines.next()
            #expect(first.map { String(decoding: $0, as: UTF8.self) } == "line 0\n")
        }
    }

    @Test(arguments: TransportKind.allCases)
    func theRequestTimeoutIsAStallTimeoutNotATotal(kind: TransportKind) async throws {
        try await withServer { server in
            let (service, monitor) = ServiceSafetyTests.service(kind, server) { policy, _ in
                policy.timeoutIntervalForRequest = .seconds(3)
            }
            defer { monitor.cancel() }
            _ = try await service.send(.get("/ok")) // the transport's first use is not what is timed
            // 30 lines 200 ms apart: 6 s in all, twice the request timeout, and every gap a
            // fifteenth of it (a busy machine stretches gaps, not to 3 s).
            let response = try await service.send(.get("/drip?count=30&ms=200"))
            #expect(response.text.hasSuffix("line 29\n"))
            #expect(response.attempts == 1)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aStalledBodyIsRetriedWhenSafeAndTimesOut(kind: TransportKind) async throws {
        try await withServer { server in
            let (service, monitor) = ServiceSafetyTests.service(kind, server) { policy, retries in
                // Long enough for a loaded machine to connect and send (300 ms was not: the
                // request timed out before it left), the stall after 3 lines is for ever.
                policy.timeoutIntervalForRequest = .seconds(3)
                retries.retryLimit = 1
            }
            defer { monitor.cancel() }
            let error = await #expect(throws: NetworkError.self) {
                try await service.send(.get("/drip?count=10&ms=20&stallAfter=3"))
            }
            guard case .timedOut? = error?.reason else {
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
                guard case .connectionLost = error.reason else {
                    Issue.record("expected connectionLost, got \(error)")
                    return
                }
                #expect(error.attempts == stream.attempts)
                #expect(error.description.hasSuffix("; 1 attempt"), "\(error)")
            }
            #expect(received <= 100)
            #expect(server.received(path: "/reset-mid-body").count == 1, "a body being read is never retried")
        }
    }

    @Test("A body cut short is explained by a monitor that looked, even one given unstarted")
    func aCutBodyIsExplainedByAStartedMonitor() async throws {
        try await withServer { server in
            // Not started: the service starts it when it must explain.
            let monitor = PathMonitor(source: SimulatedNetwork.connected())
            defer { monitor.cancel() }
            let service = NetworkService(
                baseURL: URL(string: "http://127.0.0.1:\(server.port)")!,
                transport: TransportKind.asyncHTTPClient.make(), monitor: monitor)
            let stream = try await service.bytes(.get("/reset-mid-body"))
            do {
                for try await _ in stream.body {}
                Issue.record("a reset body ended normally")
            } catch let error as NetworkError {
                guard case .connectionLost(_, let path?) = error.reason else {
                    Issue.record("expected connectionLost with a path, got \(error)")
                    return
                }
                #expect(path.status == .satisfied && path.unsatisfiedReason != .monitorUnavailable, "\(error)")
            }
        }
    }

    // MARK: Downloads

    static func temporaryFile() -> URL {
        URL(fileURLWithPath: NSTemporaryDirectory() + "netreach-download-" + UUID().uuidString)
    }

    @Test(arguments: TransportKind.allCases)
    func aDownloadThatBreaksResumesWithRangeAndIfRange(kind: TransportKind) async throws {
        try await withServer { server in
            let (service, monitor) = ServiceSafetyTests.service(kind, server)
            defer { monitor.cancel() }
            let file = Self.temporaryFile()
            defer { try? FileManager.default.removeItem(at: file) }
            // The first two attempts break after 300 kB each; the third brings the rest.
            let result = try await service.download(.get("/ranged?bytes=1000000&failAt=300000&times=2"), to: file)
            #expect(try byteDifference(Data(contentsOf: file), FaultInjectingServer.bigBody(count: 1_000_000)) == nil)
            #expect(result.bytes == 1_000_000)
            #expect(result.attempts == 3)
            // Each attempt continues where the file ended. (Up to 300 kB each: a client may drop
            // bytes it had read but not handed over when the close arrives, AsyncHTTPClient
            // under load does; the range then simply starts earlier.)
            #expect(result.resumedAt.count == 2)
            #expect(zip(result.resumedAt, result.resumedAt.dropFirst()).allSatisfy { $0 < $1 })
            #expect(result.resumedAt.first.map { $0 > 0 && $0 <= 300_000 } == true, "\(result.resumedAt)")
            #expect(result.restarts == 0)
            #expect(result.status.code == 206)
            let requests = server.received(path: "/ranged")
            #expect(requests.map { $0.headers["range"] } == [nil] + result.resumedAt.map { "bytes=\($0)-" })
            #expect(requests.dropFirst().allSatisfy { $0.headers["if-range"] == "\"v1\"" })
            #expect(!FileManager.default.fileExists(atPath: file.path + ".part"))
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aServerThatIgnoresRangesStartsOverAndSaysSo(kind: TransportKind) async throws {
        try await withServer { server in
            let (service, monitor) = ServiceSafetyTests.service(kind, server)
            defer { monitor.cancel() }
            let file = Self.temporaryFile()
            defer { try? FileManager.default.removeItem(at: file) }
            let result = try await service.download(
                .get("/ranged?bytes=500000&failAt=200000&times=1&ranges=no"), to: file)
            #expect(try byteDifference(Data(contentsOf: file), FaultInjectingServer.bigBody(count: 500_000)) == nil)
            #expect(result.restarts == 1)
            #expect(result.resumedAt.isEmpty)
            #expect(result.status.code == 200)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func withoutAValidatorARetryStartsOverRatherThanSplice(kind: TransportKind) async throws {
        try await withServer { server in
            let (service, monitor) = ServiceSafetyTests.service(kind, server)
            defer { monitor.cancel() }
            let file = Self.temporaryFile()
            defer { try? FileManager.default.removeItem(at: file) }
            let result = try await service.download(
                .get("/ranged?bytes=400000&failAt=100000&times=1&etag=none"), to: file)
            #expect(try byteDifference(Data(contentsOf: file), FaultInjectingServer.bigBody(count: 400_000)) == nil)
            #expect(server.received(path: "/ranged").allSatisfy { $0.headers["range"] == nil })
            #expect(result.restarts == 1)
        }
    }

    @Test(arguments: TransportKind.allCases)
    func aFailedDownloadKeepsItsPartAndResumeContinuesIt(kind: TransportKind) async throws {
        try await withServer { server in
            let (service, monitor) = ServiceSafetyTests.service(kind, server) { _, retries in retries.retryLimit = 0 }
            defer { monitor.cancel() }
            let file = Self.temporaryFile()
            defer {
                try? FileManager.default.removeItem(at: file)
                try? FileManager.default.removeItem(atPath: file.path + ".part")
            }
            try Data("old".utf8).write(to: file)
            await #expect(throws: NetworkError.self) {
                try await service.download(.get("/ranged?bytes=600000&failAt=250000&times=1"), to: file)
            }
            // The final name still holds the old file; the partial body waits beside it.
            #expect(try Data(contentsOf: file) == Data("old".utf8))
            let part = try Data(contentsOf: URL(fileURLWithPath: file.path + ".part"))
            #expect(part.count > 0 && part.count <= 250_000)
            #expect(byteDifference(part, FaultInjectingServer.bigBody(count: 250_000).prefix(part.count)) == nil)
            let result = try await service.download(
                .get("/ranged?bytes=600000&failAt=250000&times=1"), to: file, resume: true)
            #expect(result.resumedAt == [Int64(part.count)])
            #expect(try byteDifference(Data(contentsOf: file), FaultInjectingServer.bigBody(count: 600_000)) == nil)
            #expect(server.received(path: "/ranged").last?.headers["range"] == "bytes=\(part.count)-")
        }
    }

    @Test(arguments: TransportKind.allCases)
    func anUploadFromAFileArrivesWholeAndIsResentOnARetry(kind: TransportKind) async throws {
        try await withServer { server in
            let (service, monitor) = ServiceSafetyTests.service(kind, server)
            defer { monitor.cancel() }
            let file = Self.temporaryFile()
            defer { try? FileManager.default.removeItem(at: file) }
            let payload = FaultInjectingServer.bigBody(count: 300_000)
            try payload.write(to: file)
            let response = try await service.upload(.put("/echo"), fromFile: file)
            #expect(byteDifference(response.body, payload) == nil)
            #expect(byteDifference(server.received(path: "/echo").first?.body ?? Data(), payload) == nil)
            // A PUT answered 503 is repeated, with the whole file again each time.
            _ = try? await service.upload(.put("/status/503"), fromFile: file)
            let sent = server.received(path: "/status/503")
            #expect(sent.count == 3)
            #expect(sent.allSatisfy { $0.body == payload })
        }
    }

    @Test func aFileOverURLSessionsInMemoryLimitIsStillSentWhole() async throws {
        try await withServer { server in
            let (service, monitor) = ServiceSafetyTests.service(.urlSession, server)
            defer { monitor.cancel() }
            let file = Self.temporaryFile()
            defer { try? FileManager.default.removeItem(at: file) }
            // Over the 64 MiB a URLSession request body may take in memory: the file is streamed.
            let size = URLSessionTransport.maximumRequestBodySize + (1 << 20)
            try Data(count: size).write(to: file)
            let response = try await service.upload(.put("/ok"), fromFile: file)
            #expect(response.status == .ok)
            #expect(server.received(path: "/ok").first?.body.count == size)
        }
    }

    @Test func aDirectoryOrMissingFileIsCannotReadAndNothingIsSent() async throws {
        try await withServer { server in
            let (service, monitor) = ServiceSafetyTests.service(.asyncHTTPClient, server)
            defer { monitor.cancel() }
            for path in [NSTemporaryDirectory(), "/nonexistent/netreach-upload"] {
                let error = await #expect(throws: NetworkError.self) {
                    try await service.upload(.put("/echo"), fromFile: URL(fileURLWithPath: path))
                }
                guard case .cannotRead(let detail)? = error?.reason else {
                    Issue.record("expected cannotRead, got \(String(describing: error))")
                    continue
                }
                #expect(
                    detail.contains(path.hasPrefix("/nonexistent") ? "No such file" : "is a directory"), "\(detail)")
            }
            #expect(server.received(path: "/echo").isEmpty)
        }
    }

    @Test func credentialsInTheURLAreSentAsBasicAuthentication() async throws {
        try await withServer { server in
            let (service, monitor) = ServiceSafetyTests.service(.asyncHTTPClient, server)
            defer { monitor.cancel() }
            let url = URL(string: "http://alice:s%40cret@127.0.0.1:\(server.port)/ok")!
            let response = try await service.send(Request(method: .get, target: .url(url)))
            #expect(response.status == .ok)
            #expect(!response.url.absoluteString.contains("s%40cret"))
            let authorization = server.received(path: "/ok").first?.headers["authorization"]
            #expect(authorization == "Basic " + Data("alice:s@cret".utf8).base64EncodedString())
        }
    }
}
