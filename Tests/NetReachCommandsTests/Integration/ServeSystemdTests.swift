import Foundation
import NetReachTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `serve` under systemd's `Type=notify`, with the test in systemd's place: READY=1 once the
/// paths are read, WATCHDOG=1 at half of WATCHDOG_USEC, STOPPING=1 on SIGTERM.
@Suite("netreach serve notifies systemd", .offPool)
struct ServeSystemdTests {
    @Test func readyThenWatchdogThenStopping() async throws {
        let directory = try TemporaryDirectory("netreach-notify")
        defer { directory.remove() }
        let path = directory.url.appendingPathComponent("notify").path
        let receiver = try DatagramReceiver(path: path)
        defer { receiver.close() }
        var environment = ProcessInfo.processInfo.environment
        environment["NOTIFY_SOCKET"] = path
        environment["WATCHDOG_USEC"] = "200000"
        let port = try FreePort.pick()
        let serve = try ChildProcess(
            try NetreachProcess.executable().path, ["serve", "--listen", "127.0.0.1:\(port)"], environment: environment)
        defer { serve.kill() }

        let ready = try #require(receiver.next(timeout: .seconds(60)), "\(serve.standardError)")
        #expect(ready.hasPrefix("READY=1\n"), "\(ready)")
        // READY promises a bound socket: asked at once, the server answers.
        #expect(try await ServeClient.get("http://127.0.0.1:\(port)/livez").status == 200, "READY=1 before listening")
        for _ in 0..<3 {
            #expect(receiver.next(timeout: .seconds(30)) == "WATCHDOG=1")
        }
        serve.signal(SIGTERM)
        #expect(await serve.exitStatus() == 0, "\(serve.standardError)")
        var rest: [String] = []
        while let message = receiver.next(timeout: .seconds(1)) { rest.append(message) }
        #expect(rest.last == "STOPPING=1", "\(rest)")
    }
}

/// A Unix datagram socket bound at a path, read with a time limit.
final class DatagramReceiver {
    private let descriptor: Int32

    init(path: String) throws {
        descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw ExternalServerError.commandFailed("socket: errno \(errno)") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8).prefix($0.count - 1)) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard bound == 0 else { throw ExternalServerError.commandFailed("bind \(path): errno \(errno)") }
    }

    /// The next datagram as text, or `nil` if none came within `timeout`.
    func next(timeout: Duration) -> String? {
        var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        let milliseconds = Int32(
            timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        guard poll(&poller, 1, milliseconds) == 1 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = recv(descriptor, &buffer, buffer.count, 0)
        guard count > 0 else { return nil }
        return String(decoding: buffer[..<count], as: UTF8.self)
    }

    func close() { Glibc.close(descriptor) }
}
