import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A probe server on 127.0.0.1 in a process of its own (this executable with `--serve`): `204` to
/// every request, `Connection: close`, one line on standard output per request, so the harness
/// counts probes without sharing a thread or a byte of memory with the server.
enum ProbeServer {
    static func serve() -> Never {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var one: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(listener, pointer, length) == 0 && listen(listener, 64) == 0 && getsockname(listener, pointer, &length) == 0
            }
        }
        guard bound else { fail("server: cannot listen on 127.0.0.1") }
        say("\(UInt16(bigEndian: address.sin_port))")
        // Ends with the harness: it holds our standard input open and never writes.
        Thread {
            var byte: UInt8 = 0
            while read(0, &byte, 1) > 0 {}
            exit(0)
        }.start()
        let response = Array("HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n".utf8)
        while true {
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else { continue }
            var request: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while request.count < 65_536 {
                let count = read(connection, &buffer, buffer.count)
                guard count > 0 else { break }
                request += buffer.prefix(count)
                if request.count >= 4, request.suffix(4) == [13, 10, 13, 10] { break }
            }
            _ = response.withUnsafeBytes { write(connection, $0.baseAddress, $0.count) }
            close(connection)
            say("request")
        }
    }

    /// A line on standard output, written at once (no stdio buffer between us and the harness).
    private static func say(_ line: String) {
        let bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
    }

    /// The harness's side: starts the server, reads its port, counts its request lines.
    final class Client: Sendable {
        let port: UInt16
        private let process: Process
        private let stdin: Pipe
        private let count = Counter()

        init() {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/proc/self/exe")
            process.arguments = ["--serve"]
            let output = Pipe(), input = Pipe()
            process.standardOutput = output
            process.standardInput = input
            do { try process.run() } catch { fail("cannot start the probe server: \(error)") }
            self.process = process
            stdin = input
            let handle = output.fileHandleForReading
            var firstLine = ""
            while !firstLine.hasSuffix("\n") {
                let data = handle.availableData
                guard !data.isEmpty else { fail("the probe server did not start") }
                firstLine += String(decoding: data, as: UTF8.self)
            }
            let lines = firstLine.split(separator: "\n")
            guard let port = UInt16(lines[0]) else { fail("the probe server said \(firstLine)") }
            self.port = port
            let count = self.count
            count.add(lines.dropFirst().count)
            Thread {
                while true {
                    let data = handle.availableData
                    if data.isEmpty { break }
                    count.add(data.filter { $0 == 10 }.count)
                }
            }.start()
        }

        /// Requests the server has answered so far.
        var requests: Int { count.value }

        func stop() {
            try? stdin.fileHandleForWriting.close()
            process.waitUntilExit()
        }
    }
}

/// A count shared between threads.
final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var total = 0
    func add(_ amount: Int) { lock.withLock { total += amount } }
    var value: Int { lock.withLock { total } }
}
