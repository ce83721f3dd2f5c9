import Foundation
import NetReach
import NetReachServe
import Synchronization
import Testing

/// Waiting without polling: a reload's "every new path read" and systemd's READY=1 are woken by
/// the record that completes the set, and by the server listening.
@Suite("serve waits for events, not time")
struct ServeWaitingTests {
    private let internet = PathKey(namespace: "lab1", destination: "")
    private let db = PathKey(namespace: "lab1", destination: "db")

    private func makeState(_ keys: [PathKey]) -> ServeState {
        ServeState(keys: keys, version: "1", hub: EventHub(replayCapacity: 8, clientBuffer: 8))
    }

    /// Counts the waiters that have returned.
    final class Returned: Sendable {
        private let count = Mutex(0)
        func add() { count.withLock { $0 += 1 } }
        var value: Int { count.withLock { $0 } }
    }

    @Test func untilReadAllReturnsWhenTheLastPathIsRecorded() async {
        let state = makeState([internet, db])
        let returned = Returned()
        let waiters = (0..<3).map { _ in
            Task {
                await state.untilReadAll()
                returned.add()
            }
        }
        state.record(.of(.unsatisfied(.noDefaultRoute), at: Date()), for: internet)
        try? await Task.sleep(for: .milliseconds(50))
        #expect(returned.value == 0, "returned with one of two paths read")
        state.record(.of(.unsatisfied(.noDefaultRoute), at: Date()), for: db)
        for waiter in waiters { await waiter.value }
        #expect(returned.value == 3)
        // Already read: returns at once.
        await state.untilReadAll()
    }

    @Test func watchingFewerPathsCanCompleteTheSet() async {
        let state = makeState([internet, db])
        state.record(.of(.unsatisfied(.noDefaultRoute), at: Date()), for: internet)
        let waiter = Task { await state.untilReadAll() }
        state.watch(keys: [internet], defaultNamespace: "lab1", readyWhen: .started)
        await waiter.value
        #expect(state.hasReadAll)
    }

    @Test func aCancelledWaiterReturns() async {
        let state = makeState([internet])
        let waiter = Task { await state.untilReadAll() }
        waiter.cancel()
        await waiter.value
        #expect(!state.hasReadAll)
    }

    @Test func theListeningSignalWakesEveryWaiterOnceMarked() async {
        let listening = ListeningSignal()
        let returned = Returned()
        let waiters = (0..<4).map { _ in
            Task {
                await listening.untilListening()
                returned.add()
            }
        }
        try? await Task.sleep(for: .milliseconds(50))
        #expect(returned.value == 0)
        listening.markListening()
        for waiter in waiters { await waiter.value }
        #expect(returned.value == 4 && listening.isListening)
        await listening.untilListening()
    }
}
