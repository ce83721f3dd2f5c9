#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Another executable of NetReach's that a command runs in its own place (exec), found next to
/// the running one (symlinks resolved) or on `PATH`: `netreach get` runs `netreach-http`, and
/// `netreach-http get --transport urlsession` runs `netreach-http-urlsession`, so each process
/// loads only the libraries it uses.
///
/// ```swift
/// HelperExecutable(name: "netreach-http").exec(["get", "https://example.com/"])
/// ```
package struct HelperExecutable: Sendable {
    /// The file name to look for.
    package let name: String

    package init(name: String) { self.name = name }

    /// Where to look: next to `executable`, then each directory of `path`.
    package func candidates(executable: String?, path: String?) -> [String] {
        var found: [String] = []
        if let executable, let slash = executable.lastIndex(of: "/") {
            found.append(executable[..<slash] + "/" + name)
        }
        for directory in (path ?? "").split(separator: ":") where !directory.isEmpty {
            let candidate = "\(directory)/\(name)"
            if !found.contains(candidate) { found.append(candidate) }
        }
        return found
    }

    /// Replaces this process with `name arguments…`; returns only if no candidate could be
    /// executed, having said why on standard error, by exiting with
    /// ``CLIExitCode/httpHelperMissing``. `purpose` says what needed it.
    package func exec(_ arguments: [String], purpose: String) -> Never {
        let candidates = candidates(executable: Self.ownExecutable(), path: getenv("PATH").map { String(cString: $0) })
        var failures: [String] = []
        for candidate in candidates {
            Self.execute(candidate, arguments: [candidate] + arguments)
            let reason = String(cString: strerror(errno))
            if errno != ENOENT { failures.append("\(candidate): \(reason)") }
        }
        let problem = failures.isEmpty
            ? "which is neither next to this program nor on PATH"
            : "which could not be run: \(failures.joined(separator: "; "))"
        StandardStream.complain(
            "\(purpose) runs the \(name) executable, \(problem). "
                + "Build it with `swift build --product \(name)` and install it next to netreach.")
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
