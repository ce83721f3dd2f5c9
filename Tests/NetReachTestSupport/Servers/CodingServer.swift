import Foundation
import Testing

/// Tests/NetReachCommandsTests/Integration/Scripts/coding-server.py on 127.0.0.1 at a port of its
/// own, and its log: bodies cut short, in content codings and in ranges, for comparing netreach's
/// transports and `get` with curl on the same server.
public struct CodingServer: Sendable {
    public let port: Int
    public let log: String

    /// The script, beside the other servers the command tests start.
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
        .appendingPathComponent("NetReachCommandsTests/Integration/Scripts/coding-server.py").path

    public func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    /// The document uncoded, as curl gets it.
    public func document(size: Int = 200_000) async throws -> Data {
        let curl = try ExternalServer.require("curl")
        let got = try await ChildProcess.run(curl, ["-sS", url("/body?size=\(size)")])
        try #require(got.status == 0 && got.output.count == size, "\(got.standardError)")
        return got.output
    }

    /// Every request head logged, in order.
    public func heads() -> [String] {
        let lines = ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n")
        return lines.compactMap {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any])?["head"] as? String
        }
    }

    /// The value of `name` in the last request logged.
    public func lastField(_ name: String) -> String? { heads().last.flatMap { Self.field(name, $0) } }

    public func clear() { try? Data().write(to: URL(fileURLWithPath: log)) }

    /// The value of field `name` in `head`, trimmed; `nil` when absent.
    public static func field(_ name: String, _ head: String) -> String? {
        for line in head.split(separator: "\r\n").dropFirst() {
            guard let colon = line.firstIndex(of: ":"), line[..<colon].lowercased() == name.lowercased() else {
                continue
            }
            return line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return nil
    }

    /// Runs `body` with a server started for it.
    public static func with(_ body: (CodingServer) async throws -> Void) async throws {
        let scratch = try TemporaryDirectory("netreach-coding-server")
        defer { scratch.remove() }
        let log = scratch.path("requests.log")
        var lastError = ""
        for _ in 0..<5 {
            let port = try FreePort.pick()
            let server = try ChildProcess("/usr/bin/python3", [Self.script, String(port), log])
            defer { server.kill() }
            guard await server.nextLine(timeout: .seconds(30)) == "ready" else {
                lastError = server.diagnosis()
                continue
            }
            try await body(CodingServer(port: port, log: log))
            return
        }
        Issue.record("the coding server did not start: \(lastError)")
    }
}
