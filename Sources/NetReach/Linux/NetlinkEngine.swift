#if os(Linux)
import CNetReachLinux
import NetReachSystem
import Foundation
import Glibc

/// The thread that reads the kernel: a netlink socket for notifications, a second one for dumps and
/// route lookups, an inotify descriptor for resolv.conf, the watched namespace's watch, and two
/// eventfds (stop; look routes up again), all in a blocking `poll` with no timeout (unless a route
/// the kernel uses is due to expire), so an idle monitor makes no wakeups. It keeps a ``SnapshotStore``, asks the kernel for its route choice
/// after every batch of messages that can change it, and hands each changed snapshot to
/// `publish`, once per batch of messages read in one wakeup.
final class NetlinkEngine: @unchecked Sendable {
    // @unchecked: the socket, watcher and store exist only as locals of `run()` on the engine's own
    // thread; `readiness` is guarded by its lock; `wakeFD` and `refreshFD` are written with
    // write(2), which is thread-safe, and closed only in deinit, after every user has let go.
    private let configuration: SystemPathSource.Configuration
    private let publish: @Sendable (SystemSnapshot) -> Void
    /// The addresses per-destination monitors want looked up; read at each refresh.
    private let destinations: @Sendable () -> Set<IPAddress>
    private let readiness = NSCondition()
    private var readyResult: Result<Void, PathMonitorError>?
    private let wakeFD: Int32
    private let refreshFD: Int32

    init(
        configuration: SystemPathSource.Configuration, destinations: @escaping @Sendable () -> Set<IPAddress>,
        publish: @escaping @Sendable (SystemSnapshot) -> Void
    ) {
        self.configuration = configuration
        self.destinations = destinations
        self.publish = publish
        wakeFD = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        refreshFD = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
    }

    deinit {
        if wakeFD >= 0 { close(wakeFD) }
        if refreshFD >= 0 { close(refreshFD) }
    }

    /// Asks the thread to look routes up again (the destinations changed); it publishes if the
    /// answers differ.
    func requestRefresh() { SystemCall.signal(eventDescriptor: refreshFD) }

    /// Starts the engine's thread; it reads the initial state, then follows changes.
    func launch() {
        // 15 characters, as Linux keeps: `top -H` and /proc show this name whole.
        BlockingWork.start(named: "netreach-nl") { [self] in run() }
    }

    /// Blocks until the initial state has been published, or throws why it could not be read.
    func waitUntilReady() throws(PathMonitorError) {
        readiness.lock()
        while readyResult == nil { readiness.wait() }
        let result = readyResult!
        readiness.unlock()
        try result.get()
    }

    /// Asks the thread to finish; it closes its socket and watches on the way out.
    func stop() { SystemCall.signal(eventDescriptor: wakeFD) }

    private func signalReady(_ result: Result<Void, PathMonitorError>) {
        readiness.lock()
        readyResult = result
        readiness.broadcast()
        readiness.unlock()
    }

    private func run() {
        guard wakeFD >= 0, refreshFD >= 0 else {
            return signalReady(.failure(.netlinkFailed(operation: "eventfd", errno: errno)))
        }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 18, alignment: 8)
        defer { buffer.deallocate() }
        var reader = MessageReader(
            sysfs: configuration.namespace == nil ? SysfsReader(root: configuration.sysfsPath) : nil,
            lookupAddresses: configuration.routeLookupAddresses, destinations: destinations)
        do throws(PathMonitorError) {
            // Opened once: every socket is made through this descriptor, so all of them read the
            // namespace that was there at start, whatever its path names later.
            let namespace = try configuration.namespace.map { (namespace) throws(PathMonitorError) in
                try NamespaceHandle(namespace)
            }
            let namespaceFD = namespace.map { (fd: $0.fd, path: $0.path) }
            // The events socket joins its groups before the first dump, so nothing is missed between.
            var events = try NetlinkSocket(
                .events, namespace: namespaceFD, receiveBufferSize: configuration.receiveBufferSize)
            var requests = try NetlinkSocket(.requests, namespace: namespaceFD, receiveBufferSize: 0)
            let probe = try ConnectProbe(namespace: namespaceFD)
            let nameserverSource = configuration.nameserverSource
            var watcher = ResolvConfWatcher(source: nameserverSource)
            if watcher == nil {
                NetReachDiagnostics.log("cannot watch \(nameserverSource.currentPath): \(errnoDescription(errno))")
            }
            _ = reader.store.setNameservers(nameserverSource.nameservers())
            try reader.resync(events: &events, requests: &requests, buffer: buffer)
            reader.removalSeen = false
            _ = try reader.refreshRouteLookups(requests: &requests, probe: probe, buffer: buffer)
            publish(reader.store.snapshot)
            signalReady(.success(()))
            follow(
                events: &events, requests: &requests, probe: probe, watcher: &watcher, namespace: namespace,
                reader: &reader,
                published: reader.store.snapshot, buffer: buffer)
        } catch {
            signalReady(.failure(error))
        }
    }

    /// The engine's life after the initial dump: sleep in `poll` until the kernel, resolv.conf or
    /// `stop()` says something; publish once per wake-up if the snapshot changed.
    private func follow(
        events: inout NetlinkSocket, requests: inout NetlinkSocket, probe: borrowing ConnectProbe,
        watcher: inout ResolvConfWatcher?,
        namespace: NamespaceHandle?, reader: inout MessageReader, published: SystemSnapshot,
        buffer: UnsafeMutableRawBufferPointer
    ) {
        var resyncPending = false
        var published = published
        // A drain that failed part-way may have applied changes it never reported: publish them
        // once a later drain succeeds, even if that one changes nothing more.
        var unpublished = false
        var fds = [
            pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0),
            pollfd(fd: events.fd, events: Int16(POLLIN), revents: 0),
            pollfd(fd: watcher?.fd ?? -1, events: Int16(POLLIN), revents: 0),
            pollfd(fd: namespace?.watchFD ?? -1, events: Int16(POLLIN), revents: 0),
            pollfd(fd: refreshFD, events: Int16(POLLIN), revents: 0),
        ]
        while true {
            // Only a failed resync or a route due to expire sets a timeout; otherwise poll sleeps
            // until something happens.
            let wakeAt = [reader.nextExpiry, reader.recheckAt].compactMap { $0 }.min()
            do throws(SystemError) {
                _ = try SystemCall.poll(&fds, timeout: Self.pollTimeout(resyncPending: resyncPending, expiry: wakeAt))
            } catch {
                // Only ENOMEM is plausible here. Never end silently: say so, then re-read everything.
                NetReachDiagnostics.log("netlink poll failed, re-reading the kernel state in 1 s: \(error)")
                resyncPending = true
                continue
            }
            if fds[0].revents != 0 { return }
            if fds[3].revents != 0, let namespace, namespace.isGone() {
                // Say so and stop: the sockets (closed on return) were all that kept it alive.
                var snapshot = reader.store.snapshot
                snapshot.observationFailure = .namespaceGone(path: namespace.path)
                publish(snapshot)
                return
            }
            var changed = false
            if let expiry = reader.nextExpiry, ContinuousClock.now >= expiry { reader.lookupsStale = true }
            if let recheck = reader.recheckAt, ContinuousClock.now >= recheck { reader.lookupsStale = true }
            if fds[4].revents != 0 {
                SystemCall.clear(eventDescriptor: refreshFD)
                reader.lookupsStale = true
            }
            if fds[1].revents != 0 || resyncPending || reader.lookupsStale {
                do {
                    changed = try reader.drain(
                        events: &events, requests: &requests, probe: probe, buffer: buffer,
                        forceResync: resyncPending)
                    resyncPending = false
                } catch {
                    NetReachDiagnostics.log("netlink resync failed, retrying in 1 s: \(error)")
                    resyncPending = true
                    unpublished = true
                }
            }
            if fds[2].revents != 0, watcher?.drain() == true {
                changed = reader.store.setNameservers(configuration.nameserverSource.nameservers()) || changed
            }
            if changed || (unpublished && !resyncPending) {
                unpublished = false
                if reader.store.snapshot != published {
                    published = reader.store.snapshot
                    publish(published)
                }
            }
        }
    }

    /// How long `poll` waits: until something happens (`nil`) unless a failed resync is to be
    /// retried in a second or a route the kernel uses expires sooner.
    static func pollTimeout(resyncPending: Bool, expiry: ContinuousClock.Instant?) -> Duration? {
        // A resync asks the lookups again anyway; an expiry already past must not turn its
        // one-second back-off into a busy loop.
        if resyncPending { return .seconds(1) }
        guard let expiry else { return nil }
        // A millisecond past the expiry: SystemCall.poll rounds up, so the wake-up finds it due.
        return max(.zero, expiry - .now + .milliseconds(1))
    }
}
#endif
