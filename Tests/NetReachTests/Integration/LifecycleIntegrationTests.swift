import Dispatch
import Foundation
import Testing

@testable import NetReach

#if canImport(Glibc)
import Glibc
import NetReachSystem
import NetReachTestSupport
#endif

/// The lifecycle traps of other monitors and PathMonitor's concurrency contract against the kernel source: `cancel()` is
/// final and safe from a handler or a stream's termination, `start` twice or after `cancel` is a
/// no-op. Every wait is bounded, so a deadlock fails the test instead of hanging the run.
@Suite("Monitor lifecycle in a network namespace (integration)", .needsNamespaceRoot)
struct LifecycleIntegrationTests {
    @Test func cancelStopsHandlerCallsAndFinishesPathSequences() async throws {
        try await NetnsLab.withLab { lab in
            let handlerLog = PathLog()
            let monitor = PathMonitor.started(in: lab, handler: handlerLog.append)
            let streamLog = PathLog.consuming(monitor.paths)
            let witnessLog = PathLog()
            let witness = PathMonitor.started(in: lab, handler: witnessLog.append)
            defer { witness.cancel() }
            await LabPoll.until("the handler got the first path") { handlerLog.count == 1 && streamLog.count == 1 }

            await LabPoll.finishes("cancel()") { monitor.cancel() }
            await LabPoll.until("the paths sequence finishes") { streamLog.isFinished }
            try await lab.deleteDefaultRoute()
            // The witness shares the engine: once it has the change, the engine has published it.
            await LabPoll.until("the witness sees the change") { witnessLog.last?.unsatisfiedReason == .noDefaultRoute }
            await LabPoll.settle()

            #expect(handlerLog.count == 1)
            #expect(streamLog.count == 1)
            let late = PathLog.consuming(monitor.paths)
            await LabPoll.until("a sequence made after cancel() finishes") { late.isFinished }
            #expect(late.count == 0)
        }
    }

    @Test func cancelFromInsideThePathUpdateHandlerDoesNotDeadlock() async throws {
        try await NetnsLab.withLab { lab in
            let calls = PathLog()
            let cancelReturned = Locked(false)
            let monitor = PathMonitor(namespace: lab.namespace)
            monitor.pathUpdateHandler = { [weak monitor] path in
                calls.append(path)
                guard path.status == .unsatisfied else { return }
                monitor?.cancel()
                cancelReturned.withLock { $0 = true }
            }
            monitor.start(queue: DispatchQueue(label: "handler-cancels"))
            defer { monitor.cancel() }

            try await lab.deleteDefaultRoute()
            await LabPoll.until("cancel() returns inside the handler") { cancelReturned.current }
            try await lab.addDefaultRoute()
            try await lab.deleteDefaultRoute()
            await LabPoll.settle()
            #expect(calls.steps == [.satisfied, .unsatisfied(.noDefaultRoute)])
        }
    }

    @Test func breakingOutOfPathsThenCancellingInTheSameTaskDoesNotDeadlock() async throws {
        try await NetnsLab.withLab { lab in
            let monitor = PathMonitor.started(in: lab)
            let seen = PathLog()
            let done = Locked(false)
            Task {
                for await path in monitor.paths {
                    seen.append(path)
                    if path.status == .unsatisfied { break }
                }
                monitor.cancel()
                done.withLock { $0 = true }
            }
            await LabPoll.until("the consumer has the first path") { seen.count == 1 }
            try await lab.deleteDefaultRoute()
            await LabPoll.until("the consumer broke out and cancel() returned") { done.current }
            #expect(seen.steps == [.satisfied, .unsatisfied(.noDefaultRoute)])
        }
    }

    /// The openhab trap: `cancel()` called from a stream's termination handler while the monitor's
    /// own streams are being finished.
    @Test func cancelFromAStreamTerminationHandlerDoesNotDeadlock() async throws {
        try await NetnsLab.withLab { lab in
            let monitor = PathMonitor.started(in: lab)
            let otherLog = PathLog.consuming(monitor.paths)
            // A relay whose termination cancels the monitor, as an app wrapping `paths` would.
            let relay = AsyncStream<NetworkPath> { continuation in
                let pump = Task {
                    for await path in monitor.paths { continuation.yield(path) }
                    continuation.finish()
                }
                continuation.onTermination = { _ in
                    monitor.cancel()
                    pump.cancel()
                }
            }
            let seen = PathLog()
            let consumer = Task {
                for await path in relay { seen.append(path) }
                seen.finish()
            }
            await LabPoll.until("the consumer has the first path") { seen.count == 1 }

            // Cancelling the consuming task terminates the relay, whose handler cancels the monitor.
            await LabPoll.finishes("Task.cancel() running the termination handler") { consumer.cancel() }
            await LabPoll.until("the consuming task ends") { seen.isFinished }
            await LabPoll.until("the monitor's other sequence finishes") { otherLog.isFinished }
            try await lab.deleteDefaultRoute()
            await LabPoll.settle()
            #expect(otherLog.steps == [.satisfied])
        }
    }

    @Test func cancellingAConsumingTaskEndsItsSequenceAndLeavesOthersRunning() async throws {
        try await NetnsLab.withLab { lab in
            let monitor = PathMonitor.started(in: lab)
            defer { monitor.cancel() }
            let cancelledLog = PathLog()
            let consumer = Task {
                for await path in monitor.paths { cancelledLog.append(path) }
                cancelledLog.finish()
            }
            let otherLog = PathLog.consuming(monitor.paths)
            await LabPoll.until("both consumers have the first path") { cancelledLog.count == 1 && otherLog.count == 1 }

            await LabPoll.finishes("Task.cancel()") { consumer.cancel() }
            await LabPoll.until("the cancelled consumer's sequence ends") { cancelledLog.isFinished }
            try await lab.deleteDefaultRoute()
            await LabPoll.until("the other consumer still sees changes") { otherLog.count == 2 }
            #expect(otherLog.steps == [.satisfied, .unsatisfied(.noDefaultRoute)])
            #expect(cancelledLog.count == 1)
        }
    }

    @Test func startingTwiceIsANoOp() async throws {
        try await NetnsLab.withLab { lab in
            let calls = PathLog()
            let monitor = PathMonitor.started(in: lab, handler: calls.append)
            defer { monitor.cancel() }
            await LabPoll.until("the first path is delivered") { calls.count == 1 }

            await LabPoll.finishes("the second start(queue:)") { monitor.start(queue: DispatchQueue(label: "second")) }
            try await lab.deleteDefaultRoute()
            await LabPoll.until("the change is delivered") { calls.count >= 2 }
            await LabPoll.settle()
            // Two running monitors would deliver the start path or the change twice.
            #expect(calls.steps == [.satisfied, .unsatisfied(.noDefaultRoute)])
        }
    }

    @Test func startingAfterCancelIsANoOp() async throws {
        try await NetnsLab.withLab { lab in
            let calls = PathLog()
            let monitor = PathMonitor.started(in: lab, handler: calls.append)
            let witnessLog = PathLog()
            let witness = PathMonitor.started(in: lab, handler: witnessLog.append)
            defer { witness.cancel() }
            await LabPoll.until("the first path is delivered") { calls.count == 1 }

            monitor.cancel()
            await LabPoll.finishes("start(queue:) after cancel()") {
                monitor.start(queue: DispatchQueue(label: "restart"))
            }
            try await lab.deleteDefaultRoute()
            await LabPoll.until("the witness sees the change") { witnessLog.count == 2 }
            await LabPoll.settle()
            #expect(calls.count == 1)
        }
    }
}

/// A namespace that does not exist needs no root: opening its file fails with ENOENT for anyone.
@Suite("Monitor of a missing namespace (integration)")
struct MissingNamespaceIntegrationTests {
    @Test func startReturnsAndReportsMonitorUnavailableWithTheNamespaceError() async throws {
        let path = "/var/run/netns/nr-missing-\(UInt32.random(in: 0 ... .max))"
        let monitor = PathMonitor(namespace: NetworkNamespace(path: path))
        defer { monitor.cancel() }
        let calls = PathLog()
        monitor.pathUpdateHandler = calls.append

        await LabPoll.finishes("start(queue:)") { monitor.start(queue: DispatchQueue(label: "missing")) }
        #expect(PathStep(monitor.currentPath) == .unsatisfied(.monitorUnavailable))
        #expect(monitor.failure == .namespaceUnavailable(path: path, errno: ENOENT))
        await LabPoll.until("the unavailable path is delivered") { calls.count == 1 }
        #expect(calls.paths == [monitor.currentPath])
    }
}
