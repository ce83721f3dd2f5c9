import NetReachSystem

/// Whether serve's socket is bound and accepting connections: marked once, when Hummingbird says
/// the server runs; systemd's `READY=1` waits for it (``SystemdNotification``) without polling.
///
/// ```swift
/// let listening = ListeningSignal()
/// // in onServerRunning, once bound:
/// listening.markListening()
/// // in a task:
/// await listening.untilListening()
/// ```
package final class ListeningSignal: Sendable {
    private struct State {
        var isListening = false
        var waiters = ConditionWaiters()
    }

    private let state = Locked(State())

    package init() {}

    /// Whether ``markListening()`` was called.
    package var isListening: Bool { state.withLock { $0.isListening } }

    /// The server listens: every waiter returns, and every later ``untilListening()`` at once.
    package func markListening() {
        state.withLock { state in
            state.isListening = true
            return state.waiters.takeAll()
        }.forEach { $0.resume() }
    }

    /// Returns once the server listens, or when the task is cancelled.
    package func untilListening() async {
        await ConditionWaiters.wait(in: state, \.waiters) { $0.isListening }
    }
}
