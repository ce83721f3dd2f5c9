// What NetworkService adds to one request: the URL resolved against the base, the path judged
// (a PathMonitor on a SimulatedNetwork, started before the first iteration), the policy's checks,
// the attempt through the transport and its outcome, the body collected, the Response made. The
// transport answers from memory at once, so what is measured is the service's own work and none of
// a network's, a server's or an HTTP client's; the baseline is that transport called alone, in the
// same run. What the service costs over real transports on loopback is HTTPOverhead's to measure
// (run-http.sh).
import Benchmark
import Foundation
import HTTPTypes
import NetReach
import NetReachHTTP
import NetReachTesting
import OpenAPIRuntime

/// Answers every request at once with 200 and a short JSON body, from memory.
private struct InstantTransport: HTTPTransport {
    static let body = ArraySlice(#"{"status":"ok"}"#.utf8)

    func send(
        _ request: HTTPRequest, body: HTTPBody?, options: TransportOptions
    ) async throws(TransportError) -> (HTTPResponse, HTTPBody) {
        (HTTPResponse(status: .ok, headerFields: [.contentType: "application/json"]), HTTPBody(Self.body))
    }
}

/// What is measured per request, and how far a run may be from Thresholds/ before the check fails
/// (Benchmarks/README.md says which metrics are checked, and why these tolerances).
private func suiteConfiguration() -> Benchmark.Configuration {
    .init(
        metrics: [.mallocCountTotal, .wallClock],
        maxDuration: .seconds(2), maxIterations: 10_000,
        thresholds: [.mallocCountTotal: .init(absolute: [.p90: 0])])
}

let benchmarks: @Sendable () -> Void = {
    let configuration = suiteConfiguration()
    let transport = InstantTransport()
    let network = SimulatedNetwork.connected()
    let monitor = PathMonitor(source: network)
    let service = NetworkService(
        baseURL: URL(string: "https://api.example.com/v1/"), transport: transport, monitor: monitor)

    Benchmark(
        "GET",
        configuration: configuration,
        closure: { _ in
            do {
                blackHole(try await service.send(.get("status")))
            } catch {
                fatalError("ServiceRequest: \(error)")
            }
        },
        setup: { monitor.start(queue: DispatchQueue(label: "ServiceRequest")) },
        teardown: { monitor.cancel() }
    )

    Benchmark("BaselineTransportAlone", configuration: configuration) { _ in
        let head = HTTPRequest(method: .get, scheme: "https", authority: "api.example.com", path: "/v1/status")
        do {
            let (response, body) = try await transport.send(head, body: nil, options: TransportOptions())
            blackHole(response)
            blackHole(try await Data(collecting: body, upTo: 1 << 20))
        } catch {
            fatalError("ServiceRequest, baseline: \(error)")
        }
    }
}
