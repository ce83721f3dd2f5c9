import Foundation
import NetReachSystem
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A server program (nginx, tinyproxy) run by a test: started with a configuration in a temporary
/// directory, waited for until its port accepts connections, and terminated at the end.
///
/// ```swift
/// let server = try await ExternalServer.start(executable: nginx, arguments: ["-c", conf], ports: [port])
/// defer { server.stop() }
/// ```
package final class ExternalServer: Sendable {
    private let process: ChildProcess
    /// What the program wrote on standard output and standard error, for failure messages.
    package let logFile: URL

    private init(process: ChildProcess, logFile: URL) {
        self.process = process
        self.logFile = logFile
    }

    /// Starts `executable` and waits (up to 10 s) until every port in `ports` on `host` accepts,
    /// and checks that the program is what listens there: ``freePort()`` only found the port free
    /// a moment before, and another test's server may have taken it since (a request to it would
    /// then be answered by that server). Throws ``ExternalServerError/portTaken(_:)`` then: choose
    /// new ports and start again (``withFreePorts(_:attempts:_:)``).
    package static func start(
        executable: String, arguments: [String], logFile: URL, host: String = "127.0.0.1", ports: [Int]
    ) async throws -> ExternalServer {
        _ = FileManager.default.createFile(atPath: logFile.path, contents: nil)
        let process = try ChildProcess(executable, arguments, output: .file(logFile.path), error: .file(logFile.path))
        let server = ExternalServer(process: process, logFile: logFile)
        let clock = ContinuousClock()
        let deadline = clock.now + .seconds(10)
        for port in ports {
            while !canConnect(host: host, port: port) {
                guard process.isRunning, clock.now < deadline else {
                    await server.stop()
                    let log = (try? String(contentsOf: logFile, encoding: .utf8)) ?? ""
                    throw ExternalServerError.didNotStart("\(executable) did not listen on \(host):\(port): \(log)")
                }
                try await Task.sleep(for: .milliseconds(20))
            }
        }
        if let taken = portsNotListenedOn(by: process.pid, ports).first {
            await server.stop()
            throw ExternalServerError.portTaken(taken)
        }
        return server
    }

    /// Runs `body` with `count` ports from ``freePort()``, again with new ones (up to `attempts`
    /// times) while it throws ``ExternalServerError/portTaken(_:)``.
    ///
    /// ```swift
    /// let server = try await ExternalServer.withFreePorts(2) { ports in try await start(on: ports) }
    /// ```
    package static func withFreePorts<T>(
        _ count: Int, attempts: Int = 5, _ body: ([Int]) async throws -> T
    ) async throws -> T {
        var attempt = 1
        while true {
            // Distinct: two equal draws would put two servers on one port, where nginx answers
            // with the first one's certificate for both.
            var ports: [Int] = []
            while ports.count < count {
                let port = try freePort()
                if !ports.contains(port) { ports.append(port) }
            }
            do {
                return try await body(ports)
            } catch ExternalServerError.portTaken where attempt < attempts {
                attempt += 1
            }
        }
    }

    /// Whether process `processID` (or a child of it: nginx's workers) holds the socket that
    /// listens on TCP port `port`.
    package static func listens(processID: pid_t, port: Int) -> Bool {
        portsNotListenedOn(by: processID, [port]).isEmpty
    }

    /// The ports of `ports` whose listening socket neither process `processID` nor a child of it
    /// holds (/proc/net/tcp and tcp6, matched to their descriptors by inode), each table and
    /// process read once for all of them.
    package static func portsNotListenedOn(by processID: pid_t, _ ports: [Int]) -> [Int] {
        let listening = listeningInodes(ports: Set(ports))
        let held = socketInodes(ofProcessAndChildren: processID)
        return ports.filter { listening[$0, default: []].isDisjoint(with: held) }
    }

    /// The inodes of the sockets process `processID` and its children hold.
    private static func socketInodes(ofProcessAndChildren processID: pid_t) -> Set<UInt64> {
        var processes = [processID]
        // Its children, from each process's parent in /proc/PID/stat (after the name's last ')').
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let child = pid_t(entry),
                let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                let end = stat.lastIndex(of: ")")
            else { continue }
            let fields = stat[stat.index(after: end)...].split(separator: " ")
            if fields.count > 1, pid_t(fields[1]) == processID { processes.append(child) }
        }
        var inodes = Set<UInt64>()
        for process in processes {
            let directory = "/proc/\(process)/fd"
            for fd in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] {
                guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "\(directory)/\(fd)"),
                    target.hasPrefix("socket:["), let inode = UInt64(target.dropFirst(8).dropLast())
                else { continue }
                inodes.insert(inode)
            }
        }
        return inodes
    }

    /// The inodes of the sockets listening on each of `ports` (TCP, any address).
    private static func listeningInodes(ports: Set<Int>) -> [Int: Set<UInt64>] {
        var inodes: [Int: Set<UInt64>] = [:]
        for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
            // Not `String(contentsOfFile:)`: a procfs file says its size is 0, and Foundation then
            // reads one page of it (27 sockets); with the parallel suite's hundreds of sockets the
            // server's own listening one was missed and taken for another program's.
            guard let bytes = SystemCall.readFile(table, limit: 4 << 20) else { continue }
            let text = String(decoding: bytes, as: UTF8.self)
            for line in text.split(separator: "\n").dropFirst() {
                let fields = line.split(separator: " ")
                // sl, local address:port, remote, state (0A: listening), ..., inode (10th).
                guard fields.count > 9, fields[3] == "0A", let colon = fields[1].lastIndex(of: ":"),
                    let port = Int(fields[1][fields[1].index(after: colon)...], radix: 16), ports.contains(port),
                    let inode = UInt64(fields[9])
                else { continue }
                inodes[port, default: []].insert(inode)
            }
        }
        return inodes
    }

    /// Terminates the program (SIGTERM, then SIGKILL after 1 s) and waits for it, on a thread of
    /// its own: the tests' cooperative threads (two here) must never block.
    package func stop() async {
        await offPool { self.stopNow() }
    }

    private func stopNow() {
        guard process.isRunning else { return }
        process.terminate()
        if process.waitBlocking(timeout: .seconds(1)) == nil {
            process.kill()
            _ = process.waitBlocking(timeout: .seconds(10))
        }
    }

    /// A port on 127.0.0.1 that nothing listens on now, below the kernel's ephemeral range
    /// (32768 and up): other tests take "a closed port" from that range and expect nothing to
    /// answer there, which a server started here must never break.
    package static func freePort() throws -> Int {
        for _ in 0..<200 {
            let port = Int.random(in: 20_000..<32_000)
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { break }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            close(fd)
            if bound == 0 { return port }
        }
        throw ExternalServerError.didNotStart("no free port in 20000..<32000")
    }

    /// `true` when a TCP connection to `host:port` is accepted.
    package static func canConnect(host: String, port: Int) -> Bool {
        let isV6 = host.contains(":")
        let fd = socket(isV6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        if isV6 {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = in_port_t(UInt16(port).bigEndian)
            inet_pton(AF_INET6, host, &address.sin6_addr)
            return withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size))
                }
            } == 0
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr(host)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        } == 0
    }

    /// The full path of `name` in `PATH` (or /usr/sbin, where Debian puts nginx), or `nil`.
    package static func tool(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        for directory in path.split(separator: ":").map(String.init) + ["/usr/sbin", "/usr/bin", "/sbin"] {
            let candidate = directory + "/" + name
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }

    /// Whether the tests that need `tools` should run: when all are installed, and always under CI
    /// (where a missing tool must fail the run, not skip it: scripts/test.sh installs them).
    package static func available(_ tools: String...) -> Bool {
        ProcessInfo.processInfo.environment["CI"] == "true" || tools.allSatisfy { tool($0) != nil }
    }

    /// The path of `name`, or a failure saying how to install it.
    package static func require(_ name: String) throws -> String {
        guard let path = tool(name) else {
            throw ExternalServerError.missingTool(
                "\(name) is not installed: apt-get install -y nginx tinyproxy openssl")
        }
        return path
    }
}

package enum ExternalServerError: Error, CustomStringConvertible {
    case missingTool(String)
    case didNotStart(String)
    case commandFailed(String)
    /// Another program listens on a port the server was given.
    case portTaken(Int)

    package var description: String {
        switch self {
        case .missingTool(let text), .didNotStart(let text), .commandFailed(let text): text
        case .portTaken(let port): "another program listens on 127.0.0.1:\(port)"
        }
    }
}

/// A fresh directory under the system's temporary directory, removed by `remove()`.
package struct TemporaryDirectory {
    package let url: URL

    package init(_ prefix: String) throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    package func path(_ name: String) -> String { url.appendingPathComponent(name).path }

    package func remove() { try? FileManager.default.removeItem(at: url) }
}

/// Runs a command to its end; throws with its output if it fails.
package func runCommand(_ executable: String, _ arguments: [String], in directory: URL? = nil) throws {
    let finished = try ChildProcess.runBlocking(executable, arguments, directory: directory?.path)
    guard finished.status == 0 else {
        throw ExternalServerError.commandFailed(
            "\(executable) \(arguments.joined(separator: " ")) failed: \(finished.standardOutput)\(finished.standardError)"
        )
    }
}
