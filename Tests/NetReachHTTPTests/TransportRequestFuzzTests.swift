import Foundation
import HTTPTypes
import NetReachSystem
import NetReachTestSupport
import NetReachURLSession
import Testing

@testable import NetReachAsyncHTTPClient
@testable import NetReachHTTP

/// Random and mutated URLs and header fields through request building on both transports, where
/// nothing is sent: no input crashes, and a target the service resolved is a request each
/// transport builds for the same host (the origin the service named is the one it connects to).
@Suite("Transport request building (fuzz)", .offPool)
struct TransportRequestFuzzTests {
    static let headerNames = [
        "Accept", "X-Custom", "Cookie", "Authorization", "Content-Type", "Host", "X-A_b", "x-ü", "X\u{0}Y",
        "X Y", "X:Y", "", "Transfer-Encoding", "Content-Length", "Connection",
    ]

    @Test func buildingRequestsNeverCrashesAndKeepsTheOrigin() throws {
        var random = SeededRandom(seed: 0x5EED_0F_7A_A5)
        let iterations = Int(ProcessInfo.processInfo.environment["NETREACH_FUZZ_ITERATIONS"] ?? "") ?? 20_000
        let watchdog = StallWatchdog(stall: .seconds(3600), deadline: nil) { _ in }
        defer { watchdog.stop() }
        var built = 0
        var problems: [String] = []
        for _ in 0..<iterations {
            let text = FuzzCorpus.mutatedURL(&random)
            guard let url = URL(string: text),
                let target = ResolvedTarget.resolve(.url(url), queryItems: FuzzCorpus.queryItems(&random), base: nil)
            else { continue }
            var head = HTTPRequest(
                method: .get, scheme: target.scheme, authority: target.authority, path: target.pathAndQuery)
            for _ in 0..<Int(random.next() % 4) {
                let name = Self.headerNames[Int(random.next() % UInt64(Self.headerNames.count))]
                let value = (0..<Int(random.next() % 4)).map { _ in
                    FuzzCorpus.pieces[Int(random.next() % UInt64(FuzzCorpus.pieces.count))]
                }.joined()
                if let field = HTTPField.Name(name) { head.headerFields.append(HTTPField(name: field, value: value)) }
            }
            built += 1
            let host = AsyncHTTPClientTransport.host(of: target.authority)
            do {
                let request = try AsyncHTTPClientTransport.makeClientRequest(head, body: nil, watchdog: watchdog)
                if !request.url.hasPrefix("\(target.scheme)://\(target.authority)") {
                    problems.append("AsyncHTTPClient: \(request.url) for \(target.url)")
                }
                // Another port to connect to (--connect-to): the same host, that port, the Host
                // field the URL's.
                let moved = try AsyncHTTPClientTransport.makeClientRequest(
                    head, body: nil, watchdog: watchdog, connectPort: 8443)
                let authority = String(
                    moved.url.dropFirst("\(target.scheme)://".count).prefix { $0 != "/" && $0 != "?" })
                if AsyncHTTPClientTransport.host(of: authority) != host
                    || AsyncHTTPClientTransport.port(of: authority, scheme: target.scheme) != 8443
                    || moved.headers.first(name: "host") != request.headers.first(name: "host")
                {
                    problems.append("AsyncHTTPClient to port 8443: \(moved.url) for \(target.url)")
                }
            } catch {
                problems.append("AsyncHTTPClient refused \(target.url): \(error)")
            }
            do {
                let request = try URLSessionTransport.makeURLRequest(head, body: nil, stallTimeout: .seconds(60)).value
                let sentHost = request.url?.host(percentEncoded: true).map {
                    $0.hasPrefix("[") ? String($0.dropFirst().dropLast()) : $0
                }
                if sentHost?.lowercased() != host.lowercased() {
                    problems.append(
                        "URLSession would connect to \(String(describing: sentHost)) for \(target.url) (authority \(target.authority))"
                    )
                }
            } catch {
                // Refusing is allowed (IPv6 literals, on Linux), as long as it says nothing was sent.
                if !error.requestWasProvablyNotSent { problems.append("URLSession: \(error) is not provably unsent") }
            }
            if problems.count > 20 { break }
        }
        #expect(problems.isEmpty, "\(problems.prefix(20).joined(separator: "\n"))")
        #expect(built > iterations / 10, "too few inputs resolved to exercise the transports: \(built)")
    }
}
