import Foundation
import HTTPTypes
import OpenAPIRuntime

@testable import NetReachHTTP

/// An in-memory transport that answers from a script and records every request it was given.
final class ScriptedTransport: HTTPTransport, @unchecked Sendable {
    // @unchecked: `script` and `requests` are only touched while `lock` is held.
    enum Step: Sendable {
        case status(Int, headers: [String: String] = [:], body: String = "")
        case failure(TransportError.Kind)
        /// Waits (cancellably) before answering 200; a cancelled wait reports `.cancelled`.
        case slow(Duration)
    }

    struct Sent: Sendable {
        var head: HTTPRequest
        var body: Data?
        var idempotencyKey: String? { head.headerFields[HTTPField.Name("Idempotency-Key")!] }
    }

    private let lock = NSLock()
    private var script: [Step]
    private var requests: [Sent] = []

    /// The last step repeats once the script runs out.
    init(_ script: [Step]) { self.script = script }

    var sent: [Sent] { lock.withLock { requests } }

    func send(
        _ request: HTTPRequest, body: HTTPBody?, options: TransportOptions
    ) async throws(TransportError) -> (HTTPResponse, HTTPBody) {
        var bytes: Data?
        if let body {
            do { bytes = try await Data(collecting: body, upTo: 1 << 20) } catch {
                throw TransportError(.invalidRequest, "scripted: body unreadable: \(error)")
            }
        }
        let step = lock.withLock { () -> Step in
            requests.append(Sent(head: request, body: bytes))
            return script.count > 1 ? script.removeFirst() : script[0]
        }
        switch step {
        case .status(let code, let headers, let body):
            var fields = HTTPFields()
            for (name, value) in headers { fields[HTTPField.Name(name)!] = value }
            return (HTTPResponse(status: .init(code: code), headerFields: fields), HTTPBody(body))
        case .failure(let kind):
            throw TransportError(kind, "scripted \(kind)")
        case .slow(let duration):
            do { try await Task.sleep(for: duration) } catch {
                throw TransportError(.cancelled, "cancelled while slow")
            }
            return (HTTPResponse(status: .ok), HTTPBody("slow ok"))
        }
    }
}
