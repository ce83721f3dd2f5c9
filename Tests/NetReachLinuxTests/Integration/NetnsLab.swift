import Foundation
import NetReachTestSupport
@testable import NetReach
#if canImport(Glibc)
import Glibc
#endif

/// A throwaway network laboratory for one test: a namespace `nr-<random>` holding `veth0`, whose
/// peer `veth1` lives in a second namespace `nr-<random>-peer` (so the peer never competes with
/// `veth0` in the monitored namespace, and taking it down is a carrier loss for `veth0`).
///
/// Only configuration changes: addresses come from 10.123.0.0/24 and 2001:db8:123::/64 and nothing
/// is ever sent anywhere outside the pair.
///
/// ```swift
/// try await NetnsLab.withLab { lab in
///     let monitor = PathMonitor(namespace: lab.namespace)
///     try await lab.deleteDefaultRoute()
/// }
/// ```
struct NetnsLab: Sendable {
    enum Family: String, Sendable, CustomStringConvertible {
        case ipv4, ipv6
        var description: String { rawValue }
        var flag: String { self == .ipv4 ? "-4" : "-6" }
    }

    /// What the lab looks like when the test body starts.
    struct Setup: Sendable {
        /// Give `veth0` the IPv4 address 10.123.0.2/24.
        var ipv4 = true
        /// Give `veth0` the IPv6 address 2001:db8:123::2/64 (`nodad`: usable at once).
        var ipv6 = false
        /// Add a default route for each configured family.
        var defaultRoutes = true
    }

    static let interface = "veth0"
    static let peerInterface = "veth1"
    static let ipv4Address = "10.123.0.2/24"
    static let ipv4Gateway = "10.123.0.1"
    static let ipv6Address = "2001:db8:123::2/64"
    static let ipv6Gateway = "2001:db8:123::1"

    /// The monitored namespace's `ip netns` name.
    let name: String
    /// The namespace holding the peer end of the veth pair.
    let peerName: String
    /// A private temporary directory (resolv.conf files, batch files).
    let directory: String

    /// The monitored namespace.
    var namespace: NetworkNamespace { .named(name) }
    /// The lab's own resolv.conf (not created until a test writes it).
    var resolvConfPath: String { directory + "/resolv.conf" }

    static func gateway(_ family: Family) -> String { family == .ipv4 ? ipv4Gateway : ipv6Gateway }
    static func address(_ family: Family) -> String { family == .ipv4 ? ipv4Address : ipv6Address }

    // MARK: Life cycle

    /// Runs `body` with a fresh lab and deletes the lab afterwards, whether `body` returns, throws or
    /// records failures.
    static func withLab<Result>(
        _ setup: Setup = Setup(), _ body: (NetnsLab) async throws -> Result
    ) async throws -> Result {
        let lab = try await create(setup)
        do {
            let result = try await body(lab)
            await lab.destroy()
            return result
        } catch {
            await lab.destroy()
            throw error
        }
    }

    private static func create(_ setup: Setup) async throws -> NetnsLab {
        guard getuid() == 0 else { throw LabError.notRoot }
        let suffix = String(UInt32.random(in: 0 ... .max), radix: 16)
        let name = "nr-" + String(repeating: "0", count: 8 - suffix.count) + suffix
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(name).path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let lab = NetnsLab(name: name, peerName: name + "-peer", directory: directory)
        do {
            try await LabCommand.ip(["netns", "add", lab.name])
            try await LabCommand.ip(["netns", "add", lab.peerName])
            try await lab.ip("link", "add", interface, "type", "veth", "peer", "name", peerInterface, "netns", lab.peerName)
            try await lab.ip("link", "set", "lo", "up")
            if setup.ipv4 { try await lab.addAddress(.ipv4) }
            if setup.ipv6 { try await lab.addAddress(.ipv6) }
            try await lab.setPeer(up: true)
            try await lab.setLink(up: true)
            if setup.defaultRoutes {
                if setup.ipv4 { try await lab.addDefaultRoute(.ipv4) }
                if setup.ipv6 { try await lab.addDefaultRoute(.ipv6) }
            }
            return lab
        } catch {
            await lab.destroy()
            throw error
        }
    }

    /// Deletes both namespaces (which destroys the veth pair) and the temporary directory.
    func destroy() async {
        for namespace in [name, peerName] {
            do {
                try await LabCommand.ip(["netns", "del", namespace])
            } catch {
                // A namespace that was never created is expected after a failed setup.
                if !"\(error)".contains("No such file") { print("NetnsLab: could not delete \(namespace): \(error)") }
            }
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    // MARK: Configuration changes

    /// Runs `ip -n <lab> ARGUMENTS...`.
    @discardableResult
    func ip(_ arguments: String...) async throws -> String {
        try await LabCommand.ip(["-n", name] + arguments)
    }

    /// Runs `ip -n <peer namespace> ARGUMENTS...`.
    @discardableResult
    func peerIP(_ arguments: String...) async throws -> String {
        try await LabCommand.ip(["-n", peerName] + arguments)
    }

    func addDefaultRoute(_ family: Family = .ipv4) async throws {
        try await ip(family.flag, "route", "add", "default", "via", Self.gateway(family), "dev", Self.interface)
    }

    func deleteDefaultRoute(_ family: Family = .ipv4) async throws {
        try await ip(family.flag, "route", "del", "default", "via", Self.gateway(family), "dev", Self.interface)
    }

    func addAddress(_ family: Family) async throws {
        if family == .ipv4 {
            try await ip("addr", "add", Self.ipv4Address, "dev", Self.interface)
        } else {
            try await ip("addr", "add", Self.ipv6Address, "dev", Self.interface, "nodad")
        }
    }

    func deleteAddress(_ family: Family) async throws {
        try await ip("addr", "del", Self.address(family), "dev", Self.interface)
    }

    /// Sets `veth0` administratively up or down; waits for carrier after `up`.
    func setLink(up: Bool) async throws {
        try await ip("link", "set", Self.interface, up ? "up" : "down")
        if up { try await waitForCarrier() }
    }

    /// Sets the peer `veth1` up or down: for `veth0` that is carrier gained or lost.
    func setPeer(up: Bool) async throws {
        try await peerIP("link", "set", Self.peerInterface, up ? "up" : "down")
    }

    /// Whether the kernel has a default route of `family` in the lab's main table.
    func hasDefaultRoute(_ family: Family = .ipv4) async throws -> Bool {
        let output = try await ip(family.flag, "route", "show", "default")
        return !output.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty
    }

    /// Runs many `ip` commands (one per line, without the leading `ip`) in one `ip -batch` process.
    func batch(_ lines: [String]) async throws {
        let file = directory + "/batch-\(UInt32.random(in: 0 ... .max)).txt"
        try (lines.joined(separator: "\n") + "\n").write(toFile: file, atomically: false, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: file) }
        try await LabCommand.ip(["-n", name, "-batch", file])
    }

    /// Waits (bounded) until `veth0` is up with carrier (`state UP`), as after `ip link set up`
    /// the link briefly shows NO-CARRIER.
    func waitForCarrier(timeout: Duration = .seconds(15)) async throws {
        let deadline = ContinuousClock.now + timeout
        while true {
            let line = try await ip("-o", "link", "show", "dev", Self.interface)
            if line.contains("state UP") && !line.contains("NO-CARRIER") { return }
            guard ContinuousClock.now < deadline else {
                throw LabError.timedOut("\(Self.interface) in \(name) never got carrier: \(line)")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    // MARK: resolv.conf

    /// Writes the lab's resolv.conf in place (an IN_CLOSE_WRITE on the file).
    func writeResolvConf(_ text: String) throws {
        try text.write(toFile: resolvConfPath, atomically: false, encoding: .utf8)
    }

    /// Replaces the lab's resolv.conf the way tools do: write a temporary file, then rename over it.
    func replaceResolvConf(_ text: String) throws {
        let temporary = directory + "/.resolv.conf.tmp"
        try text.write(toFile: temporary, atomically: false, encoding: .utf8)
        try Self.check(rename(temporary, resolvConfPath), "rename \(temporary) \(resolvConfPath)")
    }

    /// Writes `text` to `<lab>/<subdirectory>/resolv.conf` and atomically replaces the lab's
    /// resolv.conf with a symlink to it (as systemd-resolved's stub link does). Returns the target.
    @discardableResult
    func replaceResolvConfWithSymlink(toNewFileIn subdirectory: String, containing text: String) throws -> String {
        let targetDirectory = directory + "/" + subdirectory
        try FileManager.default.createDirectory(atPath: targetDirectory, withIntermediateDirectories: true)
        let target = targetDirectory + "/resolv.conf"
        try text.write(toFile: target, atomically: false, encoding: .utf8)
        let link = directory + "/.resolv.conf.link"
        unlink(link)
        try Self.check(symlink(target, link), "symlink \(target) \(link)")
        try Self.check(rename(link, resolvConfPath), "rename \(link) \(resolvConfPath)")
        return target
    }

    private static func check(_ result: Int32, _ operation: String) throws {
        guard result == 0 else { throw LabError.systemCall(operation, String(cString: strerror(errno))) }
    }
}

enum LabError: Error, CustomStringConvertible {
    case notRoot
    case commandFailed(arguments: [String], status: Int32, standardError: String)
    case timedOut(String)
    case systemCall(String, String)

    var description: String {
        switch self {
        case .notRoot:
            "not root: namespace tests need root (they run, and so fail, because CI=true is set)"
        case .commandFailed(let arguments, let status, let standardError):
            "`\(arguments.joined(separator: " "))` exited with \(status): \(standardError)"
        case .timedOut(let what):
            "timed out: \(what)"
        case .systemCall(let operation, let reason):
            "\(operation) failed: \(reason)"
        }
    }
}

/// Runs programs (``ChildProcess``) off the Swift concurrency pool, checking the exit status.
enum LabCommand {
    static let ipExecutable: String = {
        let candidates = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) } ?? "/usr/sbin/ip"
    }()

    /// Runs `ip ARGUMENTS...`; returns standard output, throws with standard error on failure.
    @discardableResult
    static func ip(_ arguments: [String]) async throws -> String {
        try await run(ipExecutable, arguments)
    }

    @discardableResult
    static func run(_ executable: String, _ arguments: [String]) async throws -> String {
        try await offPool { try runBlocking(executable, arguments) }
    }

    /// Runs a program to completion on the calling thread.
    static func runBlocking(_ executable: String, _ arguments: [String]) throws -> String {
        let finished = try ChildProcess.runBlocking(executable, arguments)
        guard finished.status == 0 else {
            throw LabError.commandFailed(
                arguments: [executable] + arguments, status: finished.status,
                standardError: finished.standardError.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        return finished.standardOutput
    }
}
