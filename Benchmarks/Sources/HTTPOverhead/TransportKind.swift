import ArgumentParser
import NetReachAsyncHTTPClient
import NetReachHTTP
import NetReachURLSession

/// The transports under test, each in its default configuration (what `init()` gives users).
enum TransportKind: String, CaseIterable, Codable, Sendable, ExpressibleByArgument {
    case asyncHTTPClient = "ahc"
    case urlSession = "urlsession"

    var name: String {
        switch self {
        case .asyncHTTPClient: "AsyncHTTPClient"
        case .urlSession: "URLSession"
        }
    }

    func makeTransport() -> any HTTPTransport {
        switch self {
        case .asyncHTTPClient: AsyncHTTPClientTransport()
        case .urlSession: URLSessionTransport()
        }
    }
}
