#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where NetReach reports misuse and trouble it can work around (a second `start`, a netlink
/// overrun that forced a resync, a namespace that cannot be entered).
///
/// By default messages go to standard error prefixed with `NetReach:`. Route them to your logger,
/// or silence them:
///
/// ```swift
/// NetReachDiagnostics.handler = { message in logger.warning("\(message)") }
/// NetReachDiagnostics.handler = nil   // silent
/// ```
public enum NetReachDiagnostics {
    private static let sink = Locked<(@Sendable (String) -> Void)?>({ message in
        var line = "NetReach: \(message)\n"
        line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    })

    /// Receives each diagnostic message; `nil` drops them.
    public static var handler: (@Sendable (String) -> Void)? {
        get { sink.withLock { $0 } }
        set { sink.withLock { $0 = newValue } }
    }

    static func log(_ message: String) {
        handler?(message)
    }
}
