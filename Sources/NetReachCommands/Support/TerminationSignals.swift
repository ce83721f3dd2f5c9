import Dispatch

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// SIGINT and SIGTERM turned into an orderly action (end `watch`, cancel `get`) instead of death.
package enum TerminationSignals {
    /// Runs `action` on SIGINT and SIGTERM; cancel the returned sources to stop.
    ///
    /// Order matters on Linux: the default action is set to ignore first, so a signal cannot kill
    /// the process meanwhile; libdispatch then installs its own handler when it registers each
    /// source (it reads the signals from a signalfd). Ignoring a signal *after* that would
    /// replace dispatch's handler, and the signal would be dropped.
    package static func install(_ action: @escaping @Sendable () -> Void) -> [any DispatchSourceSignal] {
        let signals = [SIGINT, SIGTERM]
        for signalNumber in signals { signal(signalNumber, SIG_IGN) }
        let queue = DispatchQueue(label: "netreach.signals")
        return signals.map { signalNumber in
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: queue)
            source.setEventHandler(handler: action)
            source.resume()
            return source
        }
    }
}
