import NetReachSystem

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where NetReach reports misuse and trouble it can work around (a second `start`, a netlink
/// overrun that forced a resync, a namespace that cannot be entered).
///
/// By default messages go to standard error prefixed with `NetReach:`. Route them to your logger
/// (a swift-log `Logger` is the usual choice on servers), or silence them:
///
/// ```swift
/// NetReachDiagnostics.handler = { message in logger.warning("\(message)") }
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
        init(_ body: (@Sendable (String) -> Void)?) { self.body = body }
    }

    private static let sink = Locked(
        Handler({ message in
            var line = "NetReach: \(message)\n"
            // Nobody is left to tell if standard error refuses it.
            line.withUTF8 { try? SystemCall.writeAll(2, UnsafeRawBufferPointer($0)) }
        }))

    /// Receives each diagnostic message; `nil` drops them.
    public static var handler: (@Sendable (String) -> Void)? {
        get { sink.withLock { $0 }.body }
        set {
            let replacement = Handler(newValue)
            sink.withLock { $0 = replacement }
        }
    }

    static func log(_ message: String) {
        sink.withLock { $0 }.body?(message)
    }
}
