import Foundation
import NetReachSystem
import Testing

@testable import NetReach

/// The one test in the process that replaces the diagnostics handler (it is process-wide).
@Suite("NetReachDiagnostics", .serialized)
struct DiagnosticsTests {
    /// Before the fix every read of the handler wrapped it in more thunks: ~170,000 calls
    /// overflowed an 8 MB stack. A million calls on a 256 KiB thread stack must all arrive.
    @Test(.timeLimit(.minutes(2))) func aMillionLogCallsOnASmallStackAllArrive() async {
        let count = Locked(0)
        let previous = NetReachDiagnostics.handler
        NetReachDiagnostics.handler = { message in
            if message == "tick" { count.withLock { $0 += 1 } }
        }
        defer { NetReachDiagnostics.handler = previous }
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
        let previous = NetReachDiagnostics.handler
        defer { NetReachDiagnostics.handler = previous }
        NetReachDiagnostics.handler = nil
        #expect(NetReachDiagnostics.handler == nil)
        NetReachDiagnostics.log("dropped")
    }
}
