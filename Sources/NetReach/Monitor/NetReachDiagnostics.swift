import Logging
import NetReachSystem

/// The older way to receive NetReach's warnings (a second `start`, a netlink overrun that forced a
/// resync, a namespace that cannot be entered), kept as a bridge to swift-log.
///
/// NetReach logs through swift-log (`Logger` labels `netreach.path`, `netreach.connectivity`,
/// `netreach.http`; see <doc:MetricsAndLogging>). While ``handler`` is left alone, warnings go to
/// those loggers, so they reach whatever backend the program bootstrapped (swift-log's default
/// writes them to standard error). Setting ``handler`` takes the warnings over: each one's message
/// goes to the closure instead of the logger, and `nil` silences them. Debug and trace records
/// always go to the loggers.
///
/// ```swift
/// NetReachDiagnostics.handler = { message in print("netreach: \(message)") }
/// NetReachDiagnostics.handler = nil   // silent
/// ```
///
/// Logging costs the same on the millionth call as on the first, from any thread.
public enum NetReachDiagnostics {
    /// The handler in a reference that is never rewritten: reading it hands out the same closure.
    ///
    /// Storing the optional closure itself in `Locked` and reading it back with `withLock { $0 }`
    /// made each read wrap the closure in further reabstraction thunks, written back through the
    /// `inout`: every log call got slower and deeper until the stack overflowed (~170,000 calls).
    private final class Handler: Sendable {
        let body: (@Sendable (String) -> Void)?
        /// The default: warnings go to the logger of whoever reports them.
        let forwardsToSwiftLog: Bool
        init(_ body: (@Sendable (String) -> Void)?, forwardsToSwiftLog: Bool = false) {
            self.body = body
            self.forwardsToSwiftLog = forwardsToSwiftLog
        }
    }

    /// Where warnings with no logger of their own go while the default handler is in place.
    static let logger = Logger(label: "netreach")

    private static let sink = Locked(Handler(nil, forwardsToSwiftLog: true))

    /// Receives each warning's message instead of swift-log; `nil` drops them. By default it
    /// forwards to a swift-log `Logger` labelled `netreach` (reading it returns that closure).
    public static var handler: (@Sendable (String) -> Void)? {
        get {
            let handler = sink.withLock { $0 }
            guard handler.forwardsToSwiftLog else { return handler.body }
            return { @Sendable message in logger.warning("\(message)") }
        }
        set {
            let replacement = Handler(newValue)
            sink.withLock { $0 = replacement }
        }
    }

    /// Puts the default back: warnings to the reporters' swift-log loggers (for tests; a program
    /// that saved and restored ``handler`` gets the same records under the label `netreach`).
    static func forwardToSwiftLog() {
        let replacement = Handler(nil, forwardsToSwiftLog: true)
        sink.withLock { $0 = replacement }
    }

    /// Reports trouble NetReach worked around: to `logger` at warning level, or to the ``handler``
    /// a program set instead.
    static func warning(
        _ message: @autoclosure () -> String, logger: Logger, metadata: @autoclosure () -> Logger.Metadata? = nil
    ) {
        let handler = sink.withLock { $0 }
        if handler.forwardsToSwiftLog {
            logger.warning("\(message())", metadata: metadata())
        } else {
            handler.body?(message())
        }
    }

    /// Reports `message` as a warning of no particular component.
    static func log(_ message: String) {
        warning(message, logger: logger)
    }
}
