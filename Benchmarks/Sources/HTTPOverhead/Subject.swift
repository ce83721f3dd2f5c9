import Foundation
import HTTPTypes
import OpenAPIRuntime
import NetReachHTTP

/// How one GET ended.
enum Outcome: Sendable {
    case ok
    /// A success that the service got only after retrying: counted apart, never hidden.
    case retried
    case failed(String)
}

/// One way of sending the benchmark's GET, and checking that the server's answer came back.
///
/// Both sides do only the work their caller cannot skip: the bare side sends a request head built
/// once (the transport's own minimum); the service side sends a `Request` built once, so what it
/// adds is exactly `NetworkService.send`: URL resolution, the head, the policy, the path check
/// against the started default monitor, the response.
struct Subject: Sendable {
    private enum Route: Sendable {
        case bare(any HTTPTransport, HTTPRequest, TransportOptions)
        case bareWithServiceSteps(any HTTPTransport, URL, TransportOptions)
        case service(NetworkService, Request)
    }

    private let route: Route

    /// `GET http://127.0.0.1:<port>/small`.
    init(mode: Mode, transport: any HTTPTransport, port: Int) {
        let baseURL = URL(string: "http://127.0.0.1:\(port)")!
        // The service's default request timeout, so both sides ask the transport for the same.
        let options = TransportOptions(stallTimeout: RequestPolicy().timeoutIntervalForRequest)
        switch mode {
        case .bare:
            route = .bare(transport, HTTPRequest(method: .get, scheme: "http", authority: "127.0.0.1:\(port)", path: "/small"), options)
        case .bareWithServiceSteps:
            route = .bareWithServiceSteps(transport, baseURL, options)
        case .service:
            route = .service(NetworkService(baseURL: baseURL, transport: transport), .get("/small"))
        case .serviceWithoutMonitor:
            route = .service(NetworkService(baseURL: baseURL, transport: transport, monitor: nil), .get("/small"))
        }
    }

    func get() async -> Outcome {
        switch route {
        case .bare(let transport, let head, let options):
            do {
                // The body read whole, as the service's `send` does.
                let (response, body) = try await transport.send(head, body: nil, options: options)
                return Self.check(status: response.status.code, body: try await Data(collecting: body, upTo: 1 << 20), attempts: 1)
            } catch {
                return .failed("transport: \(error)")
            }
        case .bareWithServiceSteps(let transport, let baseURL, let options):
            guard let url = ServiceSteps.resolveURL("/small", relativeTo: baseURL) else { return .failed("no URL") }
            do {
                let (response, body) = try await transport.send(ServiceSteps.makeHead(url: url), body: nil, options: options)
                return Self.check(status: response.status.code, body: try await Data(collecting: body, upTo: 1 << 20), attempts: 1)
            } catch {
                return .failed("transport: \(error)")
            }
        case .service(let service, let request):
            do {
                let response = try await service.send(request)
                return Self.check(status: response.status.code, body: response.body, attempts: response.attempts)
            } catch {
                return .failed("service: \(error)")
            }
        }
    }

    private static let expectedBody = Data("ok".utf8)

    private static func check(status: Int, body: Data, attempts: Int) -> Outcome {
        guard status == 200, body == expectedBody else {
            return .failed("status \(status), \(body.count)-byte body")
        }
        return attempts == 1 ? .ok : .retried
    }
}
