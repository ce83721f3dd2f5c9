import NetReachSystem

/// Evidence about whether a path works, passed from whoever has it to whoever weighs it, with
/// neither knowing the other: every ``PathMonitor`` carries one (``PathMonitor/evidence``).
///
/// An HTTP client that got an accepted answer over the path reports it; a connectivity judge of
/// the same path listens and postpones its next probe. The monitor itself only carries the
/// channel: it neither reports nor reads.
///
/// ```swift
/// let listening = monitor.evidence.listen { evidence in lastWorked = .now }
/// monitor.evidence.report(.exchangeSucceeded)
/// listening.cancel()
/// ```
package final class PathEvidence: Sendable {
    /// What was seen.
    package enum Evidence: Sendable, Hashable {
        /// A request over the path got an answer its caller accepts.
        case exchangeSucceeded
    }

    private let listeners = Locked<(next: UInt64, all: [UInt64: @Sendable (Evidence) -> Void])>((0, [:]))

    package init() {}

    /// Whether anyone listens: a reporter asks before working out whether what it saw is evidence.
    package var isHeard: Bool { listeners.withLock { !$0.all.isEmpty } }

    /// Hands `evidence` to every listener, on the caller's thread.
    package func report(_ evidence: Evidence) {
        let all = listeners.withLock { Array($0.all.values) }
        for listener in all { listener(evidence) }
    }

    /// Calls `listener` with each report until the returned subscription is cancelled.
    package func listen(_ listener: @escaping @Sendable (Evidence) -> Void) -> PathSubscription {
        let key = listeners.withLock { state in
            defer { state.next += 1 }
            state.all[state.next] = listener
            return state.next
        }
        return PathSubscription { [weak self] in _ = self?.listeners.withLock { $0.all.removeValue(forKey: key) } }
    }
}
