#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The process's limit on open file descriptors (`RLIMIT_NOFILE`): every connection a server
/// accepts takes one.
///
/// systemd and most shells start programs with a soft limit of 1,024 for the sake of programs
/// that still use `select(2)`; the hard limit (524,288 under systemd, `LimitNOFILE=` in a unit)
/// is what a program that polls may raise it to, without privileges.
///
/// ```swift
/// if let limit = FileLimit.raiseToHard() { print("open files: \(limit.before) → \(limit.after)") }
/// ```
package enum FileLimit {
    /// The soft and hard limits now; `nil` if they cannot be read.
    package static func current() -> (soft: UInt64, hard: UInt64)? {
        var limit = rlimit()
        guard getrlimit(resource, &limit) == 0 else { return nil }
        return (UInt64(limit.rlim_cur), UInt64(limit.rlim_max))
    }

    /// Raises the soft limit to the hard limit; the soft limit before and after (equal when it
    /// was already there or could not be raised), `nil` if the limits cannot be read.
    @discardableResult
    package static func raiseToHard() -> (before: UInt64, after: UInt64)? {
        var limit = rlimit()
        guard getrlimit(resource, &limit) == 0 else { return nil }
        let before = UInt64(limit.rlim_cur)
        guard limit.rlim_cur < limit.rlim_max else { return (before, before) }
        limit.rlim_cur = limit.rlim_max
        guard setrlimit(resource, &limit) == 0 else { return (before, before) }
        return (before, UInt64(limit.rlim_max))
    }

    #if canImport(Glibc)
    private static let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
    #else
    private static let resource = RLIMIT_NOFILE
    #endif
}
