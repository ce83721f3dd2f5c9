import BenchStatistics
import Foundation
import HTTPTypes
import OpenAPIRuntime
import NetReach
import NetReachHTTP

/// NetworkService's own work per request, without a network: a transport that answers from memory
/// at once, called bare and through a service, one call after another in one task. The difference
/// is what the service adds to every request, whatever the transport.
///
/// The "step" variants time parts of what `NetworkService.send` does per request (``ServiceSteps``),
/// to see where that time goes.
enum ServiceCost {
    struct Result: Codable {
        var calls: Int
        var repetitions: Int
        /// Calls that did not return the expected response; must be 0.
        var failures: Int
        var variants: [Variant]
    }

    struct Variant: Codable {
        var name: String
        /// Median over the repetitions.
        var nanosecondsPerCall: Double
        var eachRepetition: [Double]
    }

    private struct Probe {
        var name: String
        /// Makes `calls` calls and returns how many failed.
        var body: (_ calls: Int) async -> Int
    }

    static let repetitions = 3

    static func measure(calls: Int, deadline: Deadline) async -> Result {
        let base = URL(string: "http://127.0.0.1:8080")!
        let instant: any HTTPTransport = InstantTransport()
        let head = HTTPRequest(method: .get, scheme: "http", authority: "127.0.0.1:8080", path: "/small")
        let options = TransportOptions(stallTimeout: RequestPolicy().timeoutIntervalForRequest)
        let request = Request.get("/small")
        let withMonitor = NetworkService(baseURL: base, transport: instant)
        let withoutMonitor = NetworkService(baseURL: base, transport: instant, monitor: nil)
        let resolved = URL(string: "http://127.0.0.1:8080/small")!

        let probes = [
            Probe(name: "bare: transport.send (in-memory transport)") { calls in
                var failures = 0
                for _ in 0..<calls {
                    do throws(TransportError) {
                        let (response, _) = try await instant.send(head, body: nil, options: options)
                        if response.status.code != 200 { failures += 1 }
                    } catch { failures += 1 }
                }
                return failures
            },
            Probe(name: "service: send, monitor PathMonitor.shared (default)") { calls in
                await sendAll(withMonitor, request, calls: calls)
            },
            Probe(name: "service: send, monitor nil") { calls in
                await sendAll(withoutMonitor, request, calls: calls)
            },
            Probe(name: "old step (ce854e0): Request.url(relativeTo:) (URL + URLComponents)") { calls in
                var failures = 0
                for _ in 0..<calls where ServiceSteps.resolveURL("/small", relativeTo: base) == nil { failures += 1 }
                return failures
            },
            Probe(name: "old step (ce854e0): makeHead (URLComponents + HTTPRequest)") { calls in
                var failures = 0
                for _ in 0..<calls where ServiceSteps.makeHead(url: resolved).path != "/small" { failures += 1 }
                return failures
            },
            Probe(name: "step: PathMonitor.shared.currentPath + status check") { calls in
                var failures = 0
                let monitor = PathMonitor.shared
                for _ in 0..<calls where monitor.currentPath.status != .satisfied { failures += 1 }
                return failures
            },
            Probe(name: "step: policy.applying(request.policyOverrides)") { calls in
                var failures = 0
                let policy = withMonitor.policy
                for _ in 0..<calls where policy.applying(request.policyOverrides).waitsForConnectivity { failures += 1 }
                return failures
            },
            Probe(name: "(caller) Request.get(\"/small\"), not in the HTTP cells") { calls in
                var failures = 0
                for _ in 0..<calls where Request.get("/small").queryItems.count != 0 { failures += 1 }
                return failures
            },
        ]

        var failures = 0
        for probe in probes { failures += await probe.body(max(calls / 10, 1)) }   // warm-up
        var times: [[Double]] = Array(repeating: [], count: probes.count)
        for _ in 0..<repetitions {
            for (index, probe) in probes.enumerated() {
                deadline.check("timing \(probe.name)")
                let start = monotonicNanoseconds()
                failures += await probe.body(calls)
                times[index].append(Double(monotonicNanoseconds() - start) / Double(calls))
            }
        }
        let variants = zip(probes, times).map { Variant(name: $0.name, nanosecondsPerCall: median($1), eachRepetition: $1) }
        return Result(calls: calls, repetitions: repetitions, failures: failures, variants: variants)
    }

    private static func sendAll(_ service: NetworkService, _ request: Request, calls: Int) async -> Int {
        var failures = 0
        for _ in 0..<calls {
            do throws(NetworkError) {
                if try await service.send(request).body.count != 2 { failures += 1 }
            } catch { failures += 1 }
        }
        return failures
    }
}

/// Answers every request at once with `200`, body `ok`, from memory.
private struct InstantTransport: HTTPTransport {
    private let response = HTTPResponse(status: .ok)
    private let body = Data("ok".utf8)

    func send(_ request: HTTPRequest, body: HTTPBody?, options: TransportOptions) async throws(TransportError) -> (HTTPResponse, HTTPBody) {
        (response, HTTPBody(self.body))
    }
}
