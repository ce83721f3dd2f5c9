import Foundation
import HTTPTypes
import NetReachAsyncHTTPClient
import NetReachHTTP
import NetReachTestSupport
import OpenAPIRuntime
import Testing

/// Both transports on bodies cut short and in every content coding, from the server the `get`
/// tests compare with curl (coding-server.py): the same kinds of failure (curl's 18 and 61) and the
/// same decoded bytes, and the service's downloads resuming coded bodies in identity bytes.
@Suite(
    "Bodies cut short and content codings, both transports", .offPool, .serialized,
    .enabled(if: ExternalServer.available("curl", "python3")), .timeLimit(.minutes(3)))
struct CodingTransportTests {
    @Test(
        "A close before Content-Length or the last chunk is partialBody; a reset is connectionLost",
        arguments: TransportKind.allCases)
    func cutShort(kind: TransportKind) async throws {
        try await CodingServer.with { server in
            let document = try await server.document()
            let cases: [(String, TransportError.Kind?)] = [
                ("framing=length&cut=1000", .partialBody),
                ("framing=chunked&cut=1000", .partialBody),
                ("coding=gzip&framing=length&cut=50000", .partialBody),
                ("framing=length&cut=1000&reset=1", .connectionLost),
                ("framing=close&cut=1000", nil),
            ]
            for (query, expected) in cases {
                let (bytes, failure) = try await Self.read(kind.make(), server.url("/body?\(query)"))
                #expect(failure?.kind == expected, "\(kind) \(query): \(String(describing: failure))")
                #expect(document.starts(with: bytes), "\(kind) \(query): \(bytes.count) bytes")
                #expect(failure.map { !$0.requestWasProvablyNotSent } ?? true)
            }
        }
    }

    @Test(
        "gzip, x-gzip, zlib and raw deflate, stacked and with identity, decode to the same bytes",
        arguments: TransportKind.allCases)
    func decodedCodings(kind: TransportKind) async throws {
        try await CodingServer.with { server in
            let document = try await server.document()
            for coding in ["gzip", "x-gzip", "deflate", "raw-deflate", "gzip-gzip", "gzip-identity", "identity-named"] {
                for framing in ["length", "chunked", "close"] {
                    let (bytes, failure) = try await Self.read(
                        kind.make(), server.url("/body?coding=\(coding)&framing=\(framing)"))
                    #expect(failure == nil, "\(kind) \(coding) \(framing): \(String(describing: failure))")
                    #expect(bytes == document, "\(kind) \(coding) \(framing): \(bytes.count) bytes")
                }
            }
        }
    }

    @Test(
        "A coding not decoded is badContentEncoding, never bytes passed on as decoded",
        arguments: TransportKind.allCases)
    func refusedCodings(kind: TransportKind) async throws {
        try await CodingServer.with { server in
            for coding in ["unknown", "six-gzip"] {
                let (bytes, failure) = try await Self.read(kind.make(), server.url("/body?coding=\(coding)"))
                #expect(failure?.kind == .badContentEncoding, "\(kind) \(coding): \(String(describing: failure))")
                #expect(bytes.isEmpty, "\(kind) \(coding): \(bytes.count) bytes handed on")
            }
            for coding in ["br", "zstd"] {
                let (bytes, failure) = try await Self.read(kind.make(), server.url("/body?coding=\(coding)"))
                switch kind {
                case .asyncHTTPClient:
                    // No decoder here for them: refused, with the coding named.
                    #expect(failure?.kind == .badContentEncoding, "\(coding): \(String(describing: failure))")
                    #expect(failure?.detail.contains("coded with \(coding)") == true)
                    #expect(bytes.isEmpty)
                case .urlSession:
                    // libcurl (Debian's, built with brotli and zstd) decodes them itself.
                    #expect(failure == nil && bytes == Data("ok\n".utf8), "\(coding): \(String(describing: failure))")
                }
            }
        }
    }

    @Test("AsyncHTTPClient hands a coding the caller asked for over as it came")
    func askedCodingPassesAsItCame() async throws {
        try await CodingServer.with { server in
            let (bytes, failure) = try await Self.read(
                AsyncHTTPClientTransport(), server.url("/body?coding=br"), headers: [.acceptEncoding: "br"])
            #expect(failure == nil)
            #expect(bytes == Data([0x20, 0x00, 0x10]) + Data("ok\n".utf8) + Data([0x03]))
        }
    }

    @Test("A download in gzip that breaks resumes in identity bytes and ends whole", arguments: TransportKind.allCases)
    func codedDownloadResumes(kind: TransportKind) async throws {
        let scratch = try TemporaryDirectory("netreach-coded-download")
        defer { scratch.remove() }
        try await CodingServer.with { server in
            let curl = try ExternalServer.require("curl")
            let whole = try await ChildProcess.run(curl, ["-sS", "--compressed", server.url("/file?client=curl")])
            try #require(whole.status == 0)
            var policy = RequestPolicy()
            var retries = DefaultRetryPolicy()
            retries.retryLimit = 3
            retries.exponentialScale = .milliseconds(10)
            policy.retryPolicy = retries
            let service = NetworkService(policy: policy, transport: kind.make(), monitor: nil)
            for mode in ["", "&coded206=1", "&ranges=none"] {
                server.clear()
                let file = URL(fileURLWithPath: scratch.path("file-\(kind)-\(mode.count)"))
                let result = try await service.download(
                    .get(server.url("/file?cut=40000\(mode)&client=\(kind)")), to: file)
                #expect(try Data(contentsOf: file) == whole.output, "\(kind) \(mode)")
                let heads = server.heads()
                #expect(heads.count >= 2 && CodingServer.field("Accept-Encoding", heads[1]) == "identity", "\(heads)")
                switch mode {
                case "": #expect(result.resumedAt.count == 1 && result.restarts == 0, "\(result)")
                default: #expect(result.resumedAt.isEmpty && result.restarts == 1, "\(mode): \(result)")
                }
            }
        }
    }

    /// GETs `url`; returns what the body handed over and the failure that ended it, if any.
    private static func read(
        _ transport: any HTTPTransport, _ url: String, headers: HTTPFields = [:]
    ) async throws -> (Data, TransportError?) {
        let components = try #require(URLComponents(string: url))
        let request = HTTPRequest(
            method: .get, scheme: "http", authority: "\(components.host ?? ""):\(components.port ?? 80)",
            path: components.percentEncodedPath + (components.percentEncodedQuery.map { "?\($0)" } ?? ""),
            headerFields: headers)
        var bytes = Data()
        do {
            let (_, body) = try await transport.send(
                request, body: nil, options: TransportOptions(stallTimeout: .seconds(20)))
            for try await chunk in body { bytes.append(contentsOf: chunk) }
        } catch let error as TransportError {
            return (bytes, error)
        }
        return (bytes, nil)
    }
}
