import Dispatch
import Foundation
import NetReach
import NetReachSystem
import Testing

#if canImport(Glibc)
import Glibc
#endif

// MARK: Root gating

/// Whether tests that create network namespaces run here: as root, or whenever `CI=true` (they must
/// run, not skip, on CI; without root they then fail in ``NetnsLab``).
package enum NamespaceTestGate {
    package static var isRoot: Bool { getuid() == 0 }
    package static var isCI: Bool { ProcessInfo.processInfo.environment["CI"] == "true" }
    package static var shouldRun: Bool { isRoot || isCI }
}

extension Trait where Self == ConditionTrait {
    /// Skips a test or suite that creates network namespaces unless it can (root) or must (CI=true).
    package static var needsNamespaceRoot: Self {
        .enabled(
            if: NamespaceTestGate.shouldRun, "needs root to create network namespaces; run as root or with CI=true")
    }
}

// MARK: Shared state for tests

extension Locked {
    /// The value now (a copy taken under the lock).
    package var current: Value { withLock { $0 } }
}

/// Everything one consumer (a handler or a `paths` sequence) received, in order.
package final class PathLog: Sendable {
    private struct State {
        package var paths: [NetworkPath] = []
        package var finished = false
    }

    private let state = Locked(State())

    package init() {}

    /// Starts a task that records each element of `stream` and marks the log finished when the
    /// sequence ends. Create the stream (`monitor.paths`) before the change you want to see.
    package static func consuming(_ stream: AsyncStream<NetworkPath>) -> PathLog {
        let log = PathLog()
        Task {
            for await path in stream { log.append(path) }
            log.finish()
        }
        return log
    }

    /// For `pathUpdateHandler`.
    package func append(_ path: NetworkPath) { state.withLock { $0.paths.append(path) } }
    package func finish() { state.withLock { $0.finished = true } }

    package var paths: [NetworkPath] { state.withLock { $0.paths } }
    package var count: Int { state.withLock { $0.paths.count } }
    package var last: NetworkPath? { state.withLock { $0.paths.last } }
    /// Whether the recorded sequence ended.
    package var isFinished: Bool { state.withLock { $0.finished } }
    /// The sequence as (status, reason) steps, which is what the tests specify.
    package var steps: [PathStep] { paths.map(PathStep.init) }

    /// ``steps`` once there are at least `count` of them (waiting at most `timeout`): a stream's
    /// consumer runs on its own task, so its log trails `currentPath`.
    package func steps(
        awaiting count: Int, timeout: Duration = .seconds(15), sourceLocation: SourceLocation = #_sourceLocation
    ) async -> [PathStep] {
        await LabPoll.until("the log holds \(count) paths", timeout: timeout, sourceLocation: sourceLocation) {
            self.count >= count
        }
        return steps
    }
}

/// The part of a path the specification talks about: status and reason.
package struct PathStep: Hashable, CustomStringConvertible {
    package var status: PathStatus
    package var reason: UnsatisfiedReason?

    package init(_ path: NetworkPath) {
        status = path.status
        reason = path.unsatisfiedReason
    }

    package init(_ status: PathStatus, _ reason: UnsatisfiedReason? = nil) {
        self.status = status
        self.reason = reason
    }

    package static let satisfied = PathStep(.satisfied)
    package static func unsatisfied(_ reason: UnsatisfiedReason) -> PathStep { PathStep(.unsatisfied, reason) }

    package var description: String { reason.map { "\(status)(\($0))" } ?? "\(status)" }
}

// MARK: Bounded waiting

package enum LabPoll {
    /// Checks `condition` every 10 ms until it holds or `timeout` passes; on timeout records an
    /// issue naming `what` and returns `false`. Never waits without bound.
    @discardableResult
    package static func until(
        _ what: String, timeout: Duration = .seconds(15), sourceLocation: SourceLocation = #_sourceLocation,
        _ condition: () -> Bool
    ) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while !condition() {
            guard ContinuousClock.now < deadline else {
                Issue.record("timed out after \(timeout) waiting until \(what)", sourceLocation: sourceLocation)
                return false
            }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return true
    }

    /// Runs blocking `work` on a new thread and waits (bounded) for it to return, so a
    /// deadlock in `work` fails the test instead of hanging it. Returns whether `work` finished.
    @discardableResult
    package static func finishes(
        _ what: String, timeout: Duration = .seconds(15), sourceLocation: SourceLocation = #_sourceLocation,
        _ work: @escaping @Sendable () -> Void
    ) async -> Bool {
        let done = Locked(false)
        // A thread of its own: a deadlocked `work` must not hold one of Dispatch's few workers.
        Thread {
            work()
            done.withLock { $0 = true }
        }.start()
        return await until("\(what) returns", timeout: timeout, sourceLocation: sourceLocation) { done.current }
    }

    /// Lets time pass so that something that should *not* happen has had its chance.
    package static func settle(_ duration: Duration = .milliseconds(300)) async {
        try? await Task.sleep(for: duration)
    }
}

// MARK: Monitors

extension PathMonitor {
    /// A started monitor of a lab namespace (through the process-wide shared source).
    package static func started(
        in lab: NetnsLab, requiredInterfaceType: InterfaceType? = nil,
        prohibitedInterfaceTypes: [InterfaceType] = [],
        handler: (@Sendable (NetworkPath) -> Void)? = nil
    ) -> PathMonitor {
        let monitor = PathMonitor(
            requiredInterfaceType: requiredInterfaceType,
            prohibitedInterfaceTypes: prohibitedInterfaceTypes, namespace: lab.namespace)
        monitor.pathUpdateHandler = handler
        monitor.start(queue: DispatchQueue(label: "NetReachTestSupport.lab.monitor"))
        return monitor
    }

    /// The path a brand-new monitor with its own source (so its own netlink socket and full dump)
    /// sees in the lab right now: the reference for "the final state is correct".
    package static func freshPath(in lab: NetnsLab, resolvConfPath: String? = nil) -> NetworkPath {
        let source = SystemPathSource(configuration: .init(namespace: lab.namespace, resolvConfPath: resolvConfPath))
        let monitor = PathMonitor(source: source)
        monitor.start(queue: DispatchQueue(label: "NetReachTestSupport.lab.fresh"))
        defer { monitor.cancel() }
        return monitor.currentPath
    }
}

extension NetworkPath {
    /// The path the lab's `veth0` gives when it is satisfied over IPv4 (with the gateway 10.123.0.1).
    package var isLabIPv4Satisfied: Bool { isLabIPv4Satisfied(via: NetnsLab.ipv4Gateway) }

    /// The path the lab's `veth0` gives when it is satisfied over IPv4 with the default route via
    /// `gateway`.
    package func isLabIPv4Satisfied(via gateway: String) -> Bool {
        status == .satisfied && unsatisfiedReason == nil
            && availableInterfaces.map(\.name) == [NetnsLab.interface]
            && supportsIPv4 && gateways == [IPAddress(gateway)!]
    }
}

// MARK: /etc/netns

/// `/etc/netns/NAME/resolv.conf` for a lab namespace, as `ip netns exec` bind-mounts it. Only the
/// lab's own directory is ever written; `/etc/netns` itself is removed again (when empty) only if
/// it did not exist before the tests first made it.
package enum EtcNetns {
    private static let existedBefore = FileManager.default.fileExists(atPath: "/etc/netns")

    /// Writes the lab's resolv.conf there, creating the directories it needs.
    package static func writeResolvConf(_ text: String, for lab: NetnsLab) throws {
        _ = existedBefore
        try FileManager.default.createDirectory(atPath: directory(for: lab), withIntermediateDirectories: true)
        try text.write(toFile: directory(for: lab) + "/resolv.conf", atomically: false, encoding: .utf8)
    }

    /// Removes the lab's directory (and `/etc/netns`, if the tests made it and it is empty now).
    package static func remove(for lab: NetnsLab) {
        try? FileManager.default.removeItem(atPath: directory(for: lab))
        if !existedBefore { rmdir("/etc/netns") } // fails, harmlessly, while another lab uses it
    }

    package static func directory(for lab: NetnsLab) -> String { "/etc/netns/\(lab.name)" }
}
