import ArgumentParser
import NetReachCLI
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// `netreach get …` runs `netreach-http get …` in this process's place.
///
/// The HTTP stack (SwiftNIO, AsyncHTTPClient, FoundationNetworking, libcurl) is ~10 MB of
/// resident memory once loaded, and the dynamic loader maps every linked library at start, used or
/// not. Keeping it in a second executable means `status`, `watch` and `wait`, which send nothing,
/// never pay for it. `exec` keeps the process: its pid, signals, standard streams and exit status
/// are `get`'s, as if `netreach` had run it.
enum GetForwarding {
    static let helperName = "netreach-http"

    /// The arguments to run `netreach-http` with, if `arguments` (as in `CommandLine.arguments`)
    /// ask for `get` or for its help; `nil` otherwise.
    ///
    /// ```swift
    /// GetForwarding.helperArguments(["netreach", "get", "-X", "POST", "http://127.0.0.1/x"])  // ["get", "-X", "POST", …]
    /// GetForwarding.helperArguments(["netreach", "help", "get"])                              // ["get", "--help"]
    /// GetForwarding.helperArguments(["netreach", "watch"])                                    // nil
    /// ```
    static func helperArguments(_ arguments: [String]) -> [String]? {
        let rest = Array(arguments.dropFirst())
        if rest.first == "get" { return rest }
        if rest == ["help", "get"] { return ["get", "--help"] }
        return nil
    }

    /// Where to look for `netreach-http`: next to this executable (symlinks resolved), then `PATH`.
    static func candidates(executable: String?, path: String?) -> [String] {
        var found: [String] = []
        if let executable, let slash = executable.lastIndex(of: "/") {
            found.append(executable[..<slash] + "/" + helperName)
        }
        for directory in (path ?? "").split(separator: ":") where !directory.isEmpty {
            let candidate = "\(directory)/\(helperName)"
            if !found.contains(candidate) { found.append(candidate) }
        }
        return found
    }

    /// Replaces this process with `netreach-http arguments…`; returns only if no candidate could be
    /// executed, having said why on standard error.
    static func exec(_ arguments: [String]) -> Never {
        let candidates = candidates(executable: ownExecutable(), path: getenv("PATH").map { String(cString: $0) })
        var failures: [String] = []
        for candidate in candidates {
            execute(candidate, arguments: [candidate] + arguments)
            let reason = String(cString: strerror(errno))
            if errno != ENOENT { failures.append("\(candidate): \(reason)") }
        }
        let problem = failures.isEmpty
            ? "which is neither next to netreach nor on PATH"
            : "which could not be run: \(failures.joined(separator: "; "))"
        StandardStream.complain(
            "`get` runs the \(helperName) executable, \(problem). "
                + "Build it with `swift build --product \(helperName)` and install it next to netreach.")
        exit(CLIExitCode.httpHelperMissing.rawValue)
    }

    /// The path of the running executable, symlinks resolved (`/proc/self/exe`).
    private static func ownExecutable() -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard length > 0 else { return nil }
        return String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// execv(2); returns only on failure, with `errno` set.
    private static func execute(_ path: String, arguments: [String]) {
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) }
        argv.append(nil)
        _ = execv(path, argv)
        let saved = errno
        for pointer in argv { free(pointer) }
        errno = saved
    }
}

/// `get` as `netreach --help` lists it; running it forwards to `netreach-http` (see ``GetForwarding``).
struct GetCommandForwarder: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Send an HTTP request that can wait for the network and is retried only when safe.",
        discussion: "Runs the netreach-http executable; `netreach get --help` shows its options."
    )

    @Argument(parsing: .allUnrecognized)
    var arguments: [String] = []

    func run() throws {
        GetForwarding.exec(["get"] + arguments)
    }
}
