import Dispatch
import Foundation
import NetReachSystem

// How a monitor's paths reach its users: the `paths` streams, the handler on the start queue and
// the notification. A path comes here once evaluated (`PathMonitor.swift`), and leaves for good.
extension PathMonitor {
    /// Called on the start queue with the first path and then with every change.
    /// Set it before ``start(queue:)`` to see the first path.
    public var pathUpdateHandler: (@Sendable (NetworkPath) -> Void)? {
        get { state.withLock { $0.handler } }
        set { state.withLock { $0.handler = newValue } }
    }

    /// When `true`, each change is also posted as ``pathDidChangeNotification`` on
    /// `NotificationCenter.default`, on the start queue after the handler. Off by default.
    public var postsNotifications: Bool {
        get { state.withLock { $0.postsNotifications } }
        set { state.withLock { $0.postsNotifications = newValue } }
    }

    /// Every path from now on, starting with the current one (once the monitor has started).
    /// Any number of tasks can iterate at once, each with its own sequence; ending iteration
    /// releases it. The sequence finishes when the monitor is cancelled.
    ///
    /// Each sequence buffers without limit so that it sees every change, in order; a consumer that
    /// stops reading should stop iterating.
    ///
    /// ```swift
    /// for await path in monitor.paths {
    ///     if path.isConnected { break }
    /// }
    /// ```
    public var paths: AsyncStream<NetworkPath> {
        AsyncStream(bufferingPolicy: .unbounded) { continuation in
            let id = state.withLock { state -> UInt64? in
                guard state.phase != .cancelled else { return nil }
                let id = state.nextStreamID
                state.nextStreamID += 1
                state.streams[id] = continuation
                if state.hasEmitted { continuation.yield(state.path) }
                return id
            }
            guard let id else { return continuation.finish() }
            continuation.onTermination = { [weak self] _ in
                _ = self?.state.withLock { $0.streams.removeValue(forKey: id) }
            }
        }
    }

    /// Hands `path` to every ``paths`` stream at once and to the handler on the start queue,
    /// unless it repeats the last one. Called while the monitor's evaluation lock is held, so
    /// paths leave in the order they were computed.
    func emit(_ path: NetworkPath) {
        let delivery = state.withLock { state -> (DispatchQueue?, [AsyncStream<NetworkPath>.Continuation])? in
            guard state.phase == .starting || state.phase == .running else { return nil }
            guard !state.hasEmitted || state.path != path else { return nil }
            state.path = path
            state.hasEmitted = true
            return (state.deliveryQueue, Array(state.streams.values))
        }
        guard let (queue, streams) = delivery else { return }
        for stream in streams { stream.yield(path) }
        queue?.async { [weak self] in self?.deliver(path) }
    }

    /// Runs on the delivery queue.
    private func deliver(_ path: NetworkPath) {
        let (handler, posts) = state.withLock { state in
            state.phase == .cancelled ? (nil, false) : (state.handler, state.postsNotifications)
        }
        handler?(path)
        if posts {
            NotificationCenter.default.post(
                name: Self.pathDidChangeNotification, object: self,
                userInfo: [Self.pathUserInfoKey: path])
        }
    }
}
