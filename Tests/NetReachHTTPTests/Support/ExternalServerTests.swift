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
    @Test func theProcessThatListensIsFoundAndAnotherIsNot() throws {
        let other = try ChildProcess("/bin/sleep", ["30"])
        defer { other.kill() }
        let (fd, port) = try FreePort.listener()
        #expect(ExternalServer.listens(processID: getpid(), port: port))
        #expect(!ExternalServer.listens(processID: other.pid, port: port))
        close(fd)
        #expect(!ExternalServer.listens(processID: getpid(), port: port))
    }

    /// The kernel's socket table is read whole: the parallel suite keeps hundreds of sockets, and
    /// one page of /proc/net/tcp (all `String(contentsOfFile:)` reads of it) holds 27.
    @Test func theListenerIsFoundAmongHundredsOfSockets() throws {
        var descriptors: [Int32] = []
        defer { descriptors.forEach { close($0) } }
        for _ in 0..<300 { descriptors.append(try FreePort.listener().descriptor) }
        let (fd, port) = try FreePort.listener()
        descriptors.append(fd)
        #expect(ExternalServer.listens(processID: getpid(), port: port))
        let free = try FreePort.pick()
        #expect(ExternalServer.portsNotListenedOn(by: getpid(), [port, free]) == [free])
    }

    @Test func aServerWhosePortAnotherProgramTookDoesNotStart() async throws {
        let (fd, port) = try FreePort.listener()
        defer { close(fd) }
        let log = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("external-\(port).log")
        defer { try? FileManager.default.removeItem(at: log) }
        // `sleep` listens nowhere, but the port accepts (this test listens there).
        do {
            _ = try await ExternalServer.start(executable: "/bin/sleep", arguments: ["30"], logFile: log, ports: [port])
            Issue.record("started although the port is this test's")
        } catch ExternalServerError.portTaken(let taken) {
            #expect(taken == port)
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
