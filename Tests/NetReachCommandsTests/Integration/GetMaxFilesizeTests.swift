#if os(Linux)
import Foundation
import NetReachTestSupport
import Testing

/// `get --max-filesize`: status 63 as with curl, counted in written (decoded) bytes; a body that
/// says it is larger fails before it is written.
@Suite("netreach get --max-filesize", .offPool, .serialized, .timeLimit(.minutes(2)))
struct GetMaxFilesizeTests {
    @Test func aGzipBombStopsAtTheLimitWithStatus63() async throws {
        let server = try await FaultInjectingServer.start()
        defer { Task { try? await server.shutdown() } }
        // 64 MiB of zeros in about 400 KB; the limit is 1 MiB of decoded bytes.
        let url = server.url("/gzip-bomb?bytes=\(64 << 20)").absoluteString
        let ours = try await ChildProcess.run(
            try NetreachProcess.executable().path, ["get", "-q", "--retries", "0", "--max-filesize", "1M", url],
            timeout: .seconds(60))
        #expect(ours.status == 63, "\(ours.status) \(ours.standardError)")
        #expect(ours.output.count <= 1 << 20, "wrote \(ours.output.count) bytes")
        #expect(ours.standardError.contains("1048576"), "\(ours.standardError)")
    }

    @Test func aBodyAnnouncedLargerFailsBeforeItIsWrittenAsWithCurl() async throws {
        let server = try await FaultInjectingServer.start()
        defer { Task { try? await server.shutdown() } }
        let directory = try TemporaryDirectory("netreach-max-filesize")
        defer { directory.remove() }
        let url = server.url("/big?bytes=200000").absoluteString
        let file = directory.path("big.bin")
        let ours = try await ChildProcess.run(
            try NetreachProcess.executable().path,
            ["get", "-q", "--retries", "0", "--max-filesize", "100k", "-o", file, url], timeout: .seconds(60))
        #expect(ours.status == 63, "\(ours.status) \(ours.standardError)")
        #expect(!FileManager.default.fileExists(atPath: file))
        let curl = try await ChildProcess.run(
            try ExternalServer.require("curl"), ["-sS", "--max-filesize", "100k", "-o", file + ".curl", url],
            timeout: .seconds(60))
        #expect(curl.status == 63, "\(curl.standardError)")

        // At or under the limit, the whole body.
        let whole = try await ChildProcess.run(
            try NetreachProcess.executable().path, ["get", "-q", "--max-filesize", "200000", "-o", file, url],
            timeout: .seconds(60))
        #expect(whole.status == 0, "\(whole.standardError)")
        #expect((try? Data(contentsOf: URL(fileURLWithPath: file)))?.count == 200_000)
    }

    @Test(arguments: ["abc", "1T", "-5", "", "10kk"])
    func aValueThatIsNoSizeIsAUsageError(value: String) async throws {
        let result = try await ChildProcess.run(
            try NetreachProcess.executable().path, ["get", "--max-filesize", value, "http://127.0.0.1:9/"],
            timeout: .seconds(60))
        #expect(result.status == 64, "\(value): \(result.status) \(result.standardError)")
    }
}
#endif
