import Dispatch
import Foundation
import HTTPTypes
import NetReach
import NetReachTesting
import Testing

@testable import NetReachHTTP

/// What the service hands a transport and what its ``Response`` says name one origin, and never
/// carry a password (end to end, through a scripted transport).
@Suite("NetworkService origin")
struct ServiceOriginTests {
    static func service(_ transport: ScriptedTransport, baseURL: URL?) -> (NetworkService, PathMonitor) {
        let monitor = PathMonitor(source: SimulatedNetwork.connected())
        monitor.start(queue: DispatchQueue(label: "monitor"))
        return (NetworkService(baseURL: baseURL, transport: transport, monitor: monitor), monitor)
    }

    @Test(arguments: [
        "http://evil.test%2F.trusted.example/x", "http://evil.test%23.trusted.example/x",
        "http://evil.test%40.trusted.example/x",
    ])
    func aHostThatDecodesToAnotherIsNeverSent(_ text: String) async throws {
        let transport = ScriptedTransport([.status(200)])
        let (service, monitor) = Self.service(transport, baseURL: nil)
        defer { monitor.cancel() }
        let url = try #require(URL(string: text))
        do throws(NetworkError) {
            _ = try await service.send(Request(method: .get, target: .url(url)))
            Issue.record("expected invalidURL for \(text)")
        } catch {
            guard case .invalidURL = error.reason else {
                Issue.record("got \(error)")
                return
            }
        }
        #expect(transport.sent.isEmpty)
    }

    @Test func userInfoReachesNeitherTheHeadNorTheResponse() async throws {
        let transport = ScriptedTransport([.status(200)])
        let (service, monitor) = Self.service(
            transport, baseURL: URL(string: "http://user:pa%40ss@service.test:8080/api/")!)
        defer { monitor.cancel() }
        let response = try await service.send(.get("items"))
        let head = try #require(transport.sent.first?.head)
        #expect(head.authority == "service.test:8080")
        #expect(head.path == "/api/items")
        #expect(response.url.absoluteString == "http://service.test:8080/api/items")
        #expect(
            URL(string: "\(head.scheme ?? "")://\(head.authority ?? "")\(head.path ?? "")")?.host == response.url.host)
    }

    @Test func anIDNIsSentAsASCII() async throws {
        let transport = ScriptedTransport([.status(200)])
        let (service, monitor) = Self.service(transport, baseURL: URL(string: "https://xn--bcher-kva.example/")!)
        defer { monitor.cancel() }
        let response = try await service.send(.get("/buch"))
        #expect(transport.sent.first?.head.authority == "xn--bcher-kva.example")
        #expect(response.url.absoluteString == "https://xn--bcher-kva.example/buch")
    }
}
