import Foundation
import NetReach

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
package struct NetnsLab: Sendable {
    package enum Family: String, Sendable, CustomStringConvertible {
        case ipv4, ipv6
        package var description: String { rawValue }
        package var flag: String { self == .ipv4 ? "-4" : "-6" }
    }

    /// What the lab looks like when the test body starts.
    package struct Setup: Sendable {
        /// Give `veth0` the IPv4 address 10.123.0.2/24.
        package var ipv4 = true
        /// Give `veth0` the IPv6 address 2001:db8:123::2/64 (`nodad`: usable at once).
        package var ipv6 = false
        /// Add a default route for each configured family.
        package var defaultRoutes = true

        package init(ipv4: Bool = true, ipv6: Bool = false, defaultRoutes: Bool = true) {
            self.ipv4 = ipv4
            self.ipv6 = ipv6
            self.defaultRoutes = defaultRoutes
        }
    }

    package static let interface = "veth0"
    package static let peerInterface = "veth1"
    package static let ipv4Address = "10.123.0.2/24"
    package static let ipv4Gateway = "10.123.0.1"
    /// A second gateway on the lab's subnet that no lab sets up: a test that ends a storm of
    /// changes by moving the default route here reaches a state the storm never rested in, so
    /// seeing it proves every earlier notification was read (nothing is ever sent to it).
    package static let otherIPv4Gateway = "10.123.0.3"
    package static let ipv6Address = "2001:db8:123::2/64"
    package static let ipv6Gateway = "2001:db8:123::1"

    /// The monitored namespace's `ip netns` name.
    package let name: String
    /// The namespace holding the peer end of the veth pair.
    package let peerName: String
    /// A private temporary directory (resolv.conf files, batch files).
    package let directory: String

    /// The monitored namespace.
    package var namespace: NetworkNamespace { .named(name) }
    /// The lab's own resolv.conf (not created until a test writes it).
    package var resolvConfPath: String { directory + "/resolv.conf" }

    package static func gateway(_ family: Family) -> String { family == .ipv4 ? ipv4Gateway : ipv6Gateway }
    package static func address(_ family: Family) -> String { family == .ipv4 ? ipv4Address : ipv6Address }

    // MARK: Life cycle

    /// Runs `body` with a fresh lab and deletes the lab afterwards, whether `body` returns, throws or
    /// records failures.
    package static func withLab<Result>(
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
            try await lab.ip(
                "link", "add", interface, "type", "veth", "peer", "name", peerInterface, "netns", lab.peerName)
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
    package func destroy() async {
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
    package func ip(_ arguments: String...) async throws -> String {
        try await LabCommand.ip(["-n", name] + arguments)
    }

    /// Runs `ip -n <peer namespace> ARGUMENTS...`.
    @discardableResult
    package func peerIP(_ arguments: String...) async throws -> String {
        try await LabCommand.ip(["-n", peerName] + arguments)
    }

    /// Runs `tc -n <lab> ARGUMENTS...` (traffic control on `veth0`: the lab's way out).
    @discardableResult
    package func tc(_ arguments: String...) async throws -> String {
        try await LabCommand.run(LabCommand.tcExecutable, ["-n", name] + arguments)
    }

    /// Runs `tc -n <peer namespace> ARGUMENTS...` (on `veth1`: the way into the lab).
    @discardableResult
    package func peerTC(_ arguments: String...) async throws -> String {
        try await LabCommand.run(LabCommand.tcExecutable, ["-n", peerName] + arguments)
    }

    package func addDefaultRoute(_ family: Family = .ipv4) async throws {
        try await ip(family.flag, "route", "add", "default", "via", Self.gateway(family), "dev", Self.interface)
    }

    package func deleteDefaultRoute(_ family: Family = .ipv4) async throws {
        try await ip(family.flag, "route", "del", "default", "via", Self.gateway(family), "dev", Self.interface)
    }

    package func addAddress(_ family: Family) async throws {
        if family == .ipv4 {
            try await ip("addr", "add", Self.ipv4Address, "dev", Self.interface)
        } else {
            try await ip("addr", "add", Self.ipv6Address, "dev", Self.interface, "nodad")
        }
    }

    package func deleteAddress(_ family: Family) async throws {
        try await ip("addr", "del", Self.address(family), "dev", Self.interface)
    }

    /// Sets `veth0` administratively up or down; waits for carrier after `up`.
    package func setLink(up: Bool) async throws {
        try await ip("link", "set", Self.interface, up ? "up" : "down")
        if up { try await waitForCarrier() }
    }

    /// Sets the peer `veth1` up or down: for `veth0` that is carrier gained or lost.
    package func setPeer(up: Bool) async throws {
        try await peerIP("link", "set", Self.peerInterface, up ? "up" : "down")
    }

    /// Whether the kernel has a default route of `family` in the lab's main table.
    package func hasDefaultRoute(_ family: Family = .ipv4) async throws -> Bool {
        let output = try await ip(family.flag, "route", "show", "default")
        return !output.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty
    }

    /// Runs many `ip` commands (one per line, without the leading `ip`) in one `ip -batch` process.
    package func batch(_ lines: [String]) async throws {
        let file = directory + "/batch-\(UInt32.random(in: 0 ... .max)).txt"
        try (lines.joined(separator: "\n") + "\n").write(toFile: file, atomically: false, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: file) }
        try await LabCommand.ip(["-n", name, "-batch", file])
    }

    /// Waits (bounded) until `veth0` is up with carrier (`state UP`), as after `ip link set up`
    /// the link briefly shows NO-CARRIER.
    package func waitForCarrier(timeout: Duration = .seconds(15)) async throws {
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
    package func writeResolvConf(_ text: String) throws {
        try text.write(toFile: resolvConfPath, atomically: false, encoding: .utf8)
    }

    /// Replaces the lab's resolv.conf the way tools do: write a temporary file, then rename over it.
    package func replaceResolvConf(_ text: String) throws {
        let temporary = directory + "/.resolv.conf.tmp"
        try text.write(toFile: temporary, atomically: false, encoding: .utf8)
        try Self.check(rename(temporary, resolvConfPath), "rename \(temporary) \(resolvConfPath)")
    }

    /// Writes `text` to `<lab>/<subdirectory>/resolv.conf` and atomically replaces the lab's
    /// resolv.conf with a symlink to it (as systemd-resolved's stub link does). Returns the target.
    @discardableResult
    package func replaceResolvConfWithSymlink(
        toNewFileIn subdirectory: String, containing text: String
    ) throws -> String {
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

package enum LabError: Error, CustomStringConvertible {
    case notRoot
    case commandFailed(arguments: [String], status: Int32, standardError: String)
    case timedOut(String)
    case systemCall(String, String)

    package var description: String {
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
package enum LabCommand {
    package static let ipExecutable: String = {
        let candidates = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) } ?? "/usr/sbin/ip"
    }()

    package static let tcExecutable: String = {
        let candidates = ["/usr/sbin/tc", "/sbin/tc", "/usr/bin/tc", "/bin/tc"]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) } ?? "/usr/sbin/tc"
    }()

    /// Runs `ip ARGUMENTS...`; returns standard output, throws with standard error on failure.
    @discardableResult
    package static func ip(_ arguments: [String]) async throws -> String {
        try await run(ipExecutable, arguments)
    }

    @discardableResult
    package static func run(_ executable: String, _ arguments: [String]) async throws -> String {
        try await offPool { try runBlocking(executable, arguments) }
    }

    /// Runs a program to completion on the calling thread.
    package static func runBlocking(_ executable: String, _ arguments: [String]) throws -> String {
        let finished = try ChildProcess.runBlocking(executable, arguments)
        guard finished.status == 0 else {
            throw LabError.commandFailed(
                arguments: [executable] + arguments, status: finished.status,
                standardError: finished.standardError.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        return finished.standardOutput
    }
}
