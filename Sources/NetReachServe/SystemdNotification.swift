import Dispatch
import NetReachSystem
import ServiceLifecycle

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// systemd's notification protocol (`sd_notify`) for `Type=notify` units: `READY=1` once every
/// watched path has been read, `WATCHDOG=1` while the watch answers, `STOPPING=1` on shutdown.
///
/// Does nothing outside systemd (no `NOTIFY_SOCKET`). The watchdog is fed only once the watch
/// answers (``NetworkWatch/roundTrip()``: its lock is free and every monitor start asked for before
/// has finished): a watch that is stuck stops feeding it, and systemd restarts the service.
///
/// ```ini
/// [Service]
/// Type=notify
/// WatchdogSec=30
/// ExecStart=/usr/bin/netreach serve
/// ```
struct SystemdNotification: Service {
    /// Where to send: `NOTIFY_SOCKET`'s path, or an abstract socket's name after `@`.
    let socketPath: String
    /// Half of `WATCHDOG_USEC`, when systemd asks this process for a watchdog.
    let watchdogPeriod: Duration?
    let state: ServeState
    /// Whether the server's socket is bound and accepting: READY=1 promises that too.
    let listening: ListeningSignal
    /// Returns once the watch answers.
    let probeWatch: @Sendable () async -> Void

    /// The notifier systemd asks for in `environment`, or `nil` when not run by systemd.
    static func fromEnvironment(
        _ environment: [String: String], state: ServeState, listening: ListeningSignal,
        probeWatch: @escaping @Sendable () async -> Void
    ) -> SystemdNotification? {
        guard let path = environment["NOTIFY_SOCKET"], path.hasPrefix("/") || path.hasPrefix("@"), path.utf8.count < 108
        else { return nil }
        var period: Duration?
        if let text = environment["WATCHDOG_USEC"], let microseconds = Int64(text), microseconds > 0,
            environment["WATCHDOG_PID"].map({ $0 == String(getpid()) }) ?? true
        {
            period = .microseconds(microseconds) / 2
        }
        return SystemdNotification(
            socketPath: path, watchdogPeriod: period, state: state, listening: listening, probeWatch: probeWatch)
    }

    func run() async throws {
        try? await cancelWhenGracefulShutdown {
            // Ready once every path has been read and the server listens; each wakes this, no polling.
            await state.untilReadAll()
            await listening.untilListening()
            try Task.checkCancellation()
            send("READY=1\nSTATUS=watching \(state.keys.count) paths")
            guard let watchdogPeriod else {
                try await Task.sleep(for: .seconds(365 * 24 * 3600))
                return
            }
            while true {
                await probeWatch()
                send("WATCHDOG=1")
                try await Task.sleep(for: watchdogPeriod)
            }
        }
        send("STOPPING=1")
    }

    /// One datagram to systemd; a failure is not an error of ours (systemd may be gone).
    @discardableResult
    func send(_ message: String) -> Bool {
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let pathBytes = Array(socketPath.utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            buffer.copyBytes(from: pathBytes.prefix(buffer.count))
            if pathBytes.first == UInt8(ascii: "@") { buffer[0] = 0 } // an abstract socket
        }
        // An abstract address's length counts its bytes exactly; a path's includes the NUL.
        let length = MemoryLayout<sa_family_t>.size + pathBytes.count + (pathBytes.first == UInt8(ascii: "@") ? 0 : 1)
        let sent = message.utf8CString.withUnsafeBufferPointer { text in
            withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                    try? SystemCall.retryingInterrupts {
                        sendto(
                            descriptor, text.baseAddress, text.count - 1, Int32(MSG_NOSIGNAL), socketAddress,
                            socklen_t(length))
                    }
                }
            }
        }
        return sent != nil
    }
}
