import Foundation

/// tinyproxy on 127.0.0.1, started by a test with a configuration in a temporary directory; its
/// log (``log()``) names every request and `CONNECT` it handled, so a test can tell a proxied
/// request from a direct one.
///
/// ```swift
/// let proxy = try await TinyproxyServer.start()
/// // ... and at the end: await proxy.stop()
/// // ... send through http://127.0.0.1:\(proxy.port) ...
/// #expect(proxy.log().contains { $0.contains("127.0.0.1:\(server.port)") })
/// ```
package final class TinyproxyServer: Sendable {
    package let port: Int
    private let directory: TemporaryDirectory
    private let process: ExternalServer

    private init(port: Int, directory: TemporaryDirectory, process: ExternalServer) {
        self.port = port
        self.directory = directory
        self.process = process
    }

    /// The proxy's URL, `http://127.0.0.1:PORT`.
    package var url: URL { URL(string: "http://127.0.0.1:\(port)")! }

    /// Starts tinyproxy. `connectPorts` are the ports `CONNECT` may reach: Debian's stock
    /// configuration (443 and 563) unless a test needs tunnels to its own servers (`[]`: any port);
    /// `basicAuth` makes it ask for credentials (407).
    package static func start(
        connectPorts: [Int] = [443, 563], basicAuth: (user: String, password: String)? = nil
    ) async throws -> TinyproxyServer {
        try await ExternalServer.withFreePorts(1) { ports in
            try await start(connectPorts: connectPorts, basicAuth: basicAuth, port: ports[0])
        }
    }

    private static func start(
        connectPorts: [Int], basicAuth: (user: String, password: String)?, port: Int
    ) async throws -> TinyproxyServer {
        let tinyproxy = try ExternalServer.require("tinyproxy")
        let directory = try TemporaryDirectory("netreach-tinyproxy")
        let configuration = """
            Port \(port)
            Listen 127.0.0.1
            Timeout 30
            LogFile "\(directory.path("tinyproxy.log"))"
            LogLevel Connect
            MaxClients 32
            Allow 127.0.0.1
            DisableViaHeader Yes
            \(connectPorts.map { "ConnectPort \($0)" }.joined(separator: "\n"))
            \(basicAuth.map { "BasicAuth \($0.user) \($0.password)" } ?? "")
            """
        try configuration.write(toFile: directory.path("tinyproxy.conf"), atomically: true, encoding: .utf8)
        do {
            let process = try await ExternalServer.start(
                executable: tinyproxy, arguments: ["-d", "-c", directory.path("tinyproxy.conf")],
                logFile: directory.url.appendingPathComponent("stdout.log"), ports: [port])
            return TinyproxyServer(port: port, directory: directory, process: process)
        } catch {
            directory.remove()
            throw error
        }
    }

    /// The `Request` lines of the log: `GET http://127.0.0.1:8080/ok HTTP/1.1` or
    /// `CONNECT 127.0.0.1:8080 HTTP/1.1`.
    package func requests() -> [String] {
        let data = (try? Data(contentsOf: directory.url.appendingPathComponent("tinyproxy.log"))) ?? Data()
        return String(decoding: data, as: UTF8.self).split(separator: "\n").compactMap { line in
            guard let range = line.range(of: "): "), line.contains("Request (file descriptor") else { return nil }
            return String(line[range.upperBound...])
        }
    }

    /// Terminates tinyproxy and removes its directory.
    package func stop() async {
        await process.stop()
        directory.remove()
    }
}
