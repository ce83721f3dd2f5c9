import Dispatch
import Foundation
import NetReachTestSupport
import Testing

@testable import NetReach

#if canImport(Glibc)
import Glibc
#endif

/// A watched namespace that goes away: the monitor keeps the namespace it opened (never re-opening
/// it by path), and says so when its name is deleted, reused, or its process exits.
@Suite("Watched namespace deleted or its name reused (integration)", .offPool, .needsNamespaceRoot)
struct NamespaceLifetimeIntegrationTests {
    /// Deletes the lab's namespace under a satisfied `monitor` and expects it to say so, with the
    /// reason, once and for good.
    private static func expectGoneAfterDeleting(
        _ lab: NetnsLab, monitor: PathMonitor, log: PathLog, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        #expect(monitor.currentPath.isLabIPv4Satisfied, sourceLocation: sourceLocation)
        try await LabCommand.ip(["netns", "del", lab.name])
        await LabPoll.until("the monitor reports the namespace gone", sourceLocation: sourceLocation) {
            log.last?.unsatisfiedReason == .monitorUnavailable
        }
        #expect(monitor.failure == .namespaceGone(path: lab.namespace.path), sourceLocation: sourceLocation)
        #expect(log.steps == [.satisfied, .unsatisfied(.monitorUnavailable)], sourceLocation: sourceLocation)
    }

    @Test func deletingTheWatchedNamespaceIsMonitorUnavailableWithTheReason() async throws {
        try await NetnsLab.withLab { lab in
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            try await Self.expectGoneAfterDeleting(lab, monitor: monitor, log: PathLog.consuming(monitor.paths))
        }
    }

    /// The namespace's path is watched only a while after the first path (as the nameserver
    /// files: an inotify instance with watches delays the process's exit); a deletion before
    /// then is seen when the watch starts.
    @Test func aNamespaceDeletedBeforeItsWatchStartsIsGoneWhenItStarts() async throws {
        try await NetnsLab.withLab { lab in
            var configuration = SystemPathSource.Configuration(namespace: lab.namespace)
            configuration.nameserverWatchDelay = .seconds(2)
            let monitor = PathMonitor(source: SystemPathSource(configuration: configuration))
            monitor.start(queue: DispatchQueue(label: "namespace, watched late"))
            defer { monitor.cancel() }
            try await Self.expectGoneAfterDeleting(lab, monitor: monitor, log: PathLog.consuming(monitor.paths))
        }
    }

    /// A monitor of the lab whose watches are refused inotify, at once (so that a change is found
    /// by a recheck, not by the watch's start).
    private static func unwatchedMonitor(of lab: NetnsLab) -> PathMonitor {
        var configuration = SystemPathSource.Configuration(namespace: lab.namespace)
        configuration.inotifyAvailable = false
        configuration.nameserverWatchDelay = .zero
        let monitor = PathMonitor(source: SystemPathSource(configuration: configuration))
        monitor.start(queue: DispatchQueue(label: "namespace, unwatched"))
        return monitor
    }

    /// Without inotify (the user's `fs.inotify.max_user_instances`, 128 by default, all taken: a
    /// busy host, or this suite's parallel run), the path is checked every
    /// `NetlinkEngine.unwatchedRecheck`: a deletion is seen, late, not never.
    @Test func withInotifyRefusedADeletionIsSeenByCheckingThePath() async throws {
        try await NetnsLab.withLab { lab in
            let monitor = Self.unwatchedMonitor(of: lab)
            defer { monitor.cancel() }
            let log = PathLog.consuming(monitor.paths)
            try await Self.expectGoneAfterDeleting(lab, monitor: monitor, log: log)
        }
    }

    @Test func withInotifyRefusedAReusedNameIsSeenByCheckingThePath() async throws {
        try await NetnsLab.withLab { lab in
            let monitor = Self.unwatchedMonitor(of: lab)
            defer { monitor.cancel() }
            try await LabCommand.ip(["netns", "del", lab.name])
            try await LabCommand.ip(["netns", "add", lab.name])
            await LabPoll.until("the monitor reports the namespace gone") {
                monitor.currentPath.unsatisfiedReason == .monitorUnavailable
            }
            #expect(monitor.failure == .namespaceGone(path: lab.namespace.path))
        }
    }

    @Test func aReusedNameIsAnotherNamespaceAndANewMonitorSeesTheNewOne() async throws {
        try await NetnsLab.withLab { lab in
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            try await LabCommand.ip(["netns", "del", lab.name])
            try await LabCommand.ip(["netns", "add", lab.name]) // same name, empty namespace
            await LabPoll.until("the old monitor reports the namespace gone") {
                monitor.currentPath.unsatisfiedReason == .monitorUnavailable
            }
            #expect(monitor.failure == .namespaceGone(path: lab.namespace.path))
            // A monitor started now reads the namespace the name refers to now: only a down `lo`.
            let fresh = PathMonitor.started(in: lab)
            defer { fresh.cancel() }
            #expect(fresh.failure == nil)
            #expect(fresh.currentPath.unsatisfiedReason == .noInterface)
            #expect(monitor.currentPath.unsatisfiedReason == .monitorUnavailable)
        }
    }

    @Test func theNamespaceOfAProcessThatExitsIsGone() async throws {
        try await NetnsLab.withLab { lab in
            let process = try ChildProcess(LabCommand.ipExecutable, ["netns", "exec", lab.name, "sleep", "60"])
            defer { process.kill() }
            // `ip netns exec` execs sleep in the same process once it has entered the namespace.
            let namespace = NetworkNamespace.process(process.pid)
            await LabPoll.until("the process is in the lab's namespace") {
                Self.sameNamespace(namespace.path, lab.namespace.path)
            }
            let monitor = PathMonitor(namespace: namespace)
            monitor.start(queue: DispatchQueue(label: "process-namespace"))
            defer { monitor.cancel() }
            #expect(monitor.currentPath.isLabIPv4Satisfied, "\(monitor.currentPath)")
            process.kill()
            await LabPoll.until("the monitor reports the namespace gone") {
                monitor.currentPath.unsatisfiedReason == .monitorUnavailable
            }
            #expect(monitor.failure == .namespaceGone(path: namespace.path))
        }
    }

    private static func sameNamespace(_ a: String, _ b: String) -> Bool {
        var first = stat()
        var second = stat()
        return stat(a, &first) == 0 && stat(b, &second) == 0 && first.st_ino == second.st_ino
            && first.st_dev == second.st_dev
    }
}
