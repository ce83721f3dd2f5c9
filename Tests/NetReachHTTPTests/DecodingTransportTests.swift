import Foundation
import HTTPTypes
import NetReachAsyncHTTPClient
import NetReachHTTP
import NetReachTestSupport
import OpenAPIRuntime
import Testing

/// gzip from a real server: nginx compresses a 5 MB JSON file about 100 times and more, past the
/// ratio AsyncHTTPClient used to refuse (25); both transports hand over the decoded bytes.
@Suite(
    "Decoding nginx's gzip", .offPool, .enabled(if: ExternalServer.available("nginx", "openssl")), .serialized,
    .timeLimit(.minutes(2)))
struct DecodingTransportTests {
    @Test("A highly compressible JSON sent gzipped arrives decoded and whole", arguments: TransportKind.allCases)
    func gzipFromNginx(kind: TransportKind) async throws {
        let certificates = try await TestCertificates.make()
        defer { certificates.remove() }
        let nginx = try await NginxServer.start(certificates: certificates)
        do {
            let (status, body) = try await getData(kind.make(), "http://127.0.0.1:\(nginx.plain)/data.json")
            #expect(status == 200)
            #expect(byteDifference(body, nginx.json) == nil)
            // How much nginx actually compressed it: the log's bytes sent against the file's size.
            // nginx logs a request once it has finished it, which can be after the client has read
            // the whole body (the line was missing once in a CI run): wait for it.
            await LabPoll.until("nginx logs the request") {
                nginx.accessLog().contains { $0.contains("/data.json") }
            }
            let line = try #require(nginx.accessLog().last { $0.contains("/data.json") })
            let fields = line.split(separator: " ")
            let sent = try #require(fields.count > 9 ? Int(fields[9]) : nil)
            #expect(nginx.json.count / max(sent, 1) > 36, "nginx sent \(sent) bytes for \(nginx.json.count): \(line)")
        } catch {
            await nginx.stop()
            throw error
        }
        await nginx.stop()
    }
}
