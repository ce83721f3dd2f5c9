import NetReachHTTP

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// `get --create-dirs`: the directories an `--output` path needs, made as curl makes them.
///
/// ```swift
/// try OutputDirectories.create(for: "downloads/2026/report.pdf")   // downloads/ and downloads/2026/
/// ```
enum OutputDirectories {
    /// Makes each missing directory on the way to `path`'s file, with mode 0750 (less the umask),
    /// as curl `--create-dirs` does; one that exists is left as it is.
    ///
    /// - Throws: ``NetReachHTTP/NetworkError/cannotWrite(_:)`` (exit status 23) naming the
    ///   directory that could not be made and why.
    static func create(for path: String) throws(NetworkError) {
        guard let slash = path.lastIndex(of: "/") else { return }
        let directory = path[..<slash]
        var prefix = directory.hasPrefix("/") ? "/" : ""
        for component in directory.split(separator: "/") {
            prefix += component
            if mkdir(prefix, 0o750) != 0 {
                let code = errno
                if code != EEXIST {
                    let reason = strerror(code).map { String(cString: $0) } ?? "error"
                    throw .cannotWrite("\(path): cannot create the directory '\(prefix)': \(reason) (errno \(code))")
                }
            }
            prefix += "/"
        }
    }
}
