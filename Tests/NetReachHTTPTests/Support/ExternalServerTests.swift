import Foundation
import NetReachTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The test servers' start-up check: a port that accepts is not enough, the server must be what
/// listens there (another test's server may have taken a port `freePort()` found free).
@Suite("external servers' ports", .offPool)
struct ExternalServerTests {
    /// Listens on a free port of 127.0.0.1 in this process; returns the descriptor and the port.
    private func listenHere() throws -> (fd: Int32, port: Int) {
        let port = try ExternalServer.freePort()
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        try #require(bound == 0 && listen(fd, 8) == 0)
        return (fd, port)
    }

    @Test func theProcessThatListensIsFoundAndAnotherIsNot() throws {
        let (fd, port) = try listenHere()
        defer { close(fd) }
        #expect(ExternalServer.listens(processID: getpid(), port: port))
        let other = try ChildProcess("/bin/sleep", ["30"])
        defer { other.kill() }
        #expect(!ExternalServer.listens(processID: other.pid, port: port))
        close(fd)
        #expect(!ExternalServer.listens(processID: getpid(), port: port))
    }

    @Test func aServerWhosePortAnotherProgramTookDoesNotStart() async throws {
        let (fd, port) = try listenHere()
        defer { close(fd) }
        let log = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("external-\(port).log")
        defer { try? FileManager.default.removeItem(at: log) }
        // `sleep` listens nowhere, but the port accepts (this test listens there).
        await #expect(throws: ExternalServerError.self) {
            _ = try await ExternalServer.start(executable: "/bin/sleep", arguments: ["30"], logFile: log, ports: [port])
        }
        var attempts = 0
        let ports = try await ExternalServer.withFreePorts(1, attempts: 3) { ports in
            attempts += 1
            if attempts < 3 { throw ExternalServerError.portTaken(ports[0]) }
            return ports
        }
        #expect(attempts == 3 && ports.count == 1)
    }
}
