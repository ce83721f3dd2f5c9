import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The loopback server as a child process: this same executable, started with `--serve`.
///
/// The child reads its stdin until end of file, so it ends when this process ends, whatever way.
final class ServerProcess {
    let port: Int
    let pid: Int32
    private let process: Process
    private let stdin: Pipe

    private init(port: Int, process: Process, stdin: Pipe) {
        self.port = port
        self.pid = process.processIdentifier
        self.process = process
        self.stdin = stdin
    }

    static func launch(lifetimeSeconds: Int) throws -> ServerProcess {
        let executable = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["--serve", "--serve-seconds", String(lifetimeSeconds)]
        let stdin = Pipe()
        let stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = FileHandle.standardError
        try process.run()

        // The first line is the port; end of file first means the server could not start.
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = stdout.fileHandleForReading.availableData
            if chunk.isEmpty { fail("the server exited before printing its port") }
            line.append(chunk)
        }
        guard let port = Int(String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) else {
            fail("the server printed no port: \(String(decoding: line, as: UTF8.self))")
        }
        return ServerProcess(port: port, process: process, stdin: stdin)
    }

    /// Closes the server's stdin and waits (at most 5 s) for it to exit.
    func stop() {
        try? stdin.fileHandleForWriting.close()
        let end = monotonicNanoseconds() + 5_000_000_000
        while process.isRunning && monotonicNanoseconds() < end { usleep(10_000) }
        if process.isRunning { process.terminate() }
    }
}
