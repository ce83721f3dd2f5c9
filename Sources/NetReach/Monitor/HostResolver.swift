import Dispatch
import NetReachSystem

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

#if os(Linux)
// SOCK_STREAM and the addrinfo constants come through the kernel-headers module: Glibc alone does
// not reliably make them visible to every file.
import CNetReachLinux
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Why a per-destination monitor's host name has no addresses. The monitor's path is then
/// unsatisfied with ``UnsatisfiedReason/destinationUnresolved`` and ``PathMonitor/resolutionFailure``
/// holds this.
public enum HostResolutionError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The name does not exist, or has no IPv4 or IPv6 address (`EAI_NONAME`, `EAI_NODATA`).
    case notFound(host: String)
    /// The resolver could not answer now (`EAI_AGAIN`: no nameserver reachable, a timeout inside
    /// the resolver); it is asked again after the next path change.
    case temporaryFailure(host: String)
    /// No answer within the monitor's resolution timeout; asked again after the next path change.
    case timedOut(host: String, seconds: Int)
    /// Any other resolver error, with `getaddrinfo`'s code and message.
    case failed(host: String, code: Int32, message: String)
    /// The name was to be resolved inside a network namespace (as a program there would), and
    /// the namespace could not be entered: `reason` says which step failed and why (entering
    /// needs `CAP_SYS_ADMIN`). Nothing was asked of any resolver.
    case namespaceUnavailable(host: String, namespace: String, reason: String)

    public var description: String {
        switch self {
        case .notFound(let host): "\(host): no such host (or it has no IPv4 or IPv6 address)"
        case .temporaryFailure(let host): "\(host): the resolver could not answer now (temporary failure)"
        case .timedOut(let host, let seconds): "\(host): no answer from the resolver within \(seconds) s"
        case .failed(let host, let code, let message): "\(host): resolution failed: \(message) (EAI \(code))"
        case .namespaceUnavailable(let host, let namespace, let reason):
            "\(host): not resolved: cannot enter the network namespace \(namespace) to ask its resolver (\(reason))"
        }
    }
}

/// Resolves host names with `getaddrinfo` on a thread of its own, bounded by a timeout: the
/// system resolver cannot be cancelled, so a stuck lookup is left to finish on its thread and its
/// answer dropped, and the caller never hangs.
package enum HostResolver {
    /// The addresses of `host` in the resolver's order (duplicates dropped), or why there are none;
    /// only those of `family` when one is given (as `getaddrinfo` with `AF_INET` or `AF_INET6`:
    /// a name with only addresses of the other family is `notFound`).
    package static func resolve(
        _ host: String, family: IPAddress.Family? = nil, timeout: Duration
    )
        -> Result<[IPAddress], HostResolutionError>
    {
        resolve(host, timeout: timeout) { lookUp($0, family: family) }
    }

    /// As ``resolve(_:family:timeout:)``, but as a program in `namespace` would resolve it: from
    /// inside that network namespace, with the files a program there reads. For an `ip netns`
    /// name, every file of `/etc/netns/NAME` stands over its `/etc` namesake (`resolv.conf`,
    /// `hosts`, `nsswitch.conf`...), as `ip netns exec NAME` arranges; for `/proc/PID/ns/net`,
    /// the process's own mount namespace, as `nsenter --net --mount` enters it; for any other
    /// namespace file, the machine's files. `nil` resolves here.
    ///
    /// The lookup's thread enters the namespaces and ends with the lookup: a thread cannot leave
    /// a mount namespace it entered, and no other thread is touched. Needs `CAP_SYS_ADMIN`.
    ///
    /// ```swift
    /// let addresses = HostResolver.resolve("db.internal", timeout: .seconds(5), in: .named("blue"))
    /// ```
    package static func resolve(
        _ host: String, family: IPAddress.Family? = nil, timeout: Duration, in namespace: NetworkNamespace?
    ) -> Result<[IPAddress], HostResolutionError> {
        guard let namespace else { return resolve(host, family: family, timeout: timeout) }
        // BlockingWork gives each job a thread of its own, which ends with it.
        return resolve(host, timeout: timeout) { lookUpEntering(namespace, $0, family: family) }
    }

    /// ``lookUp(_:family:)`` as a program in `namespace` would do it (see
    /// ``resolve(_:family:timeout:in:)``), blocking the calling thread with no timeout, for a caller
    /// that bounds it its own way. The lookup itself runs on a thread of its own, which ends with
    /// it; the calling thread stays where it is. `nil` looks up here, on the calling thread.
    package static func lookUp(
        _ host: String, family: IPAddress.Family? = nil, in namespace: NetworkNamespace?
    ) -> Result<[IPAddress], HostResolutionError> {
        guard let namespace else { return lookUp(host, family: family) }
        let outcome = Locked<Result<[IPAddress], HostResolutionError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        BlockingWork.start(named: "netreach-dns") {
            outcome.withLock { $0 = lookUpEntering(namespace, host, family: family) }
            done.signal()
        }
        done.wait()
        return outcome.withLock { $0 } ?? .failure(.notFound(host: host))
    }

    /// Enters `namespace` on the calling thread, which must end afterwards, and looks `host` up.
    private static func lookUpEntering(
        _ namespace: NetworkNamespace, _ host: String, family: IPAddress.Family?
    ) -> Result<[IPAddress], HostResolutionError> {
        if let reason = enter(namespace) {
            return .failure(.namespaceUnavailable(host: host, namespace: namespace.description, reason: reason))
        }
        return lookUp(host, family: family)
    }

    /// Moves the calling thread into `namespace` and the files a program there reads; returns
    /// why not, or nil.
    private static func enter(_ namespace: NetworkNamespace) -> String? {
        #if os(Linux)
        let network = open(namespace.path, O_RDONLY | O_CLOEXEC)
        guard network >= 0 else { return "opening \(namespace.path): \(String(cString: strerror(errno)))" }
        defer { close(network) }
        var mount: Int32 = -1
        if let root = namespace.processNamespaceDirectory {
            mount = open(root + "/mnt", O_RDONLY | O_CLOEXEC)
            guard mount >= 0 else { return "opening \(root)/mnt: \(String(cString: strerror(errno)))" }
        }
        defer { if mount >= 0 { close(mount) } }
        var step = [CChar](repeating: 0, count: 256)
        let entered = namespace.ipNetnsName.withOptionalCString { name in
            cnr_enter_namespace_for_lookup(network, mount, name, &step)
        }
        guard entered == 0 else {
            let code = errno
            let failed = String(decoding: step.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            return "\(failed): \(String(cString: strerror(code)))"
        }
        return nil
        #else
        return "network namespaces are Linux's"
        #endif
    }

    /// `resolve(_:timeout:)` around any blocking `lookUp` (tests give one that never answers in time).
    static func resolve(
        _ host: String, timeout: Duration,
        lookUp: @escaping @Sendable (String) -> Result<[IPAddress], HostResolutionError>
    ) -> Result<[IPAddress], HostResolutionError> {
        let outcome = Locked<Result<[IPAddress], HostResolutionError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        BlockingWork.start(named: "netreach-dns") {
            outcome.withLock { $0 = lookUp(host) }
            done.signal()
        }
        // Saturated at a day: DispatchTime arithmetic on `.seconds(Int64.max)` would trap.
        let seconds = min(max(0, timeout.components.seconds), 86_400)
        let milliseconds = Int(seconds * 1000 + max(0, timeout.components.attoseconds) / 1_000_000_000_000_000)
        guard done.wait(timeout: .now() + .milliseconds(milliseconds)) == .success,
            let result = outcome.withLock({ $0 })
        else {
            return .failure(.timedOut(host: host, seconds: Int(max(1, seconds))))
        }
        return result
    }

    /// `getaddrinfo` itself, on the calling thread, with no timeout: for a caller that bounds it
    /// its own way (serve's `/probe` runs it on a pool with the scrape's deadline).
    package static func lookUp(
        _ host: String, family: IPAddress.Family? = nil
    ) -> Result<[IPAddress], HostResolutionError> {
        guard !host.isEmpty, !host.utf8.contains(0), host.utf8.count <= 253 else {
            return .failure(.notFound(host: host))
        }
        var hints = addrinfo()
        switch family {
        case .ipv4?: hints.ai_family = AF_INET
        case .ipv6?: hints.ai_family = AF_INET6
        case nil: hints.ai_family = AF_UNSPEC
        }
        #if canImport(Darwin)
        hints.ai_socktype = SOCK_STREAM
        #else
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #endif
        var list: UnsafeMutablePointer<addrinfo>?
        let code = getaddrinfo(host, nil, &hints, &list)
        defer { if let list { freeaddrinfo(list) } }
        // EAI_NODATA (glibc's -5) is a GNU extension that the Glibc module does not export.
        #if canImport(Glibc)
        let noData: Int32 = -5
        #else
        let noData = EAI_NONAME
        #endif
        guard code == 0 else {
            switch code {
            case EAI_NONAME, noData: return .failure(.notFound(host: host))
            case EAI_AGAIN: return .failure(.temporaryFailure(host: host))
            default: return .failure(.failed(host: host, code: code, message: String(cString: gai_strerror(code))))
            }
        }
        var addresses: [IPAddress] = []
        var entry = list
        while let current = entry {
            if let address = address(of: current.pointee), !addresses.contains(address) { addresses.append(address) }
            entry = current.pointee.ai_next
        }
        return addresses.isEmpty ? .failure(.notFound(host: host)) : .success(addresses)
    }

    private static func address(of entry: addrinfo) -> IPAddress? {
        guard let socketAddress = entry.ai_addr else { return nil }
        switch entry.ai_family {
        case AF_INET:
            return socketAddress.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { pointer in
                withUnsafeBytes(of: pointer.pointee.sin_addr) { IPAddress(networkOrder: $0) }
            }
        case AF_INET6:
            return socketAddress.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { pointer in
                withUnsafeBytes(of: pointer.pointee.sin6_addr) { IPAddress(networkOrder: $0) }
            }
        default:
            return nil
        }
    }
}

extension Optional where Wrapped == String {
    /// `body` with this string as a C string, or with NULL for nil.
    fileprivate func withOptionalCString<Result>(_ body: (UnsafePointer<CChar>?) -> Result) -> Result {
        switch self {
        case .some(let text): text.withCString { body($0) }
        case .none: body(nil)
        }
    }
}
