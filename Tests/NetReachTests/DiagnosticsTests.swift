import Dispatch
import Foundation
import InMemoryLogging
import Logging
import NetReachSystem
import NetReachTesting
import Testing

@testable import NetReach

/// The one test in the process that replaces the diagnostics handler (it is process-wide).
@Suite("NetReachDiagnostics", .serialized)
struct DiagnosticsTests {
    /// Before the fix every read of the handler wrapped it in more thunks: ~170,000 calls
    /// overflowed an 8 MB stack. A million calls on a 256 KiB thread stack must all arrive.
    @Test(.timeLimit(.minutes(2))) func aMillionLogCallsOnASmallStackAllArrive() async {
        let count = Locked(0)
        NetReachDiagnostics.handler = { message in
            if message == "tick" { count.withLock { $0 += 1 } }
        }
        defer { NetReachDiagnostics.forwardToSwiftLog() }
        let finished = Locked(false)
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let thread = Thread {
                for _ in 0..<1_000_000 { NetReachDiagnostics.log("tick") }
                finished.withLock { $0 = true }
                continuation.resume()
            }
            thread.stackSize = 256 * 1024
            thread.start()
        }
        #expect(finished.withLock { $0 })
        #expect(count.withLock { $0 } == 1_000_000)
    }

    @Test func aNilHandlerDropsMessages() {
        defer { NetReachDiagnostics.forwardToSwiftLog() }
        NetReachDiagnostics.handler = nil
        #expect(NetReachDiagnostics.handler == nil)
        NetReachDiagnostics.log("dropped")
    }

    /// The bridge: by default a warning goes to the reporter's swift-log logger; a handler set by
    /// the program takes it over, and the logger gets nothing.
    @Test func warningsGoToTheMonitorsLoggerUntilAHandlerTakesThemOver() {
        let records = InMemoryLogHandler()
        let logger = Logger(label: "netreach.path", factory: { _ in records })
        let monitor = PathMonitor(source: SimulatedNetwork.connected(), logger: logger)
        defer { monitor.cancel() }
        monitor.start(queue: DispatchQueue(label: "diagnostics"))
        monitor.start(queue: DispatchQueue(label: "diagnostics"))
        let warnings = records.entries.filter { $0.level == .warning }
        #expect(
            warnings.map(\.message.description) == [
                "PathMonitor.start(queue:) ignored: the monitor was already started or cancelled"
            ])

        let taken = Locked<[String]>([])
        NetReachDiagnostics.handler = { message in taken.withLock { $0.append(message) } }
        defer { NetReachDiagnostics.forwardToSwiftLog() }
        monitor.start(queue: DispatchQueue(label: "diagnostics"))
        #expect(
            taken.withLock { $0 } == ["PathMonitor.start(queue:) ignored: the monitor was already started or cancelled"]
        )
        #expect(records.entries.filter { $0.level == .warning }.count == 1)
    }
}
