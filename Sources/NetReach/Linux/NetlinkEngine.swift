#if os(Linux)
import CNetReachLinux
import NetReachSystem
import CoreMetrics
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Glibc
import Logging

/// The thread that reads the kernel: a netlink socket for notifications, a second one for dumps and
/// route lookups, an inotify descriptor for resolv.conf, the watched namespace's watch, and two
/// eventfds (stop; look routes up again), all in a blocking `poll` with no timeout (unless a route
/// the kernel uses is due to expire, a removal to be rechecked, or an answer depends on state the
/// kernel changes without a message: ``KernelQueries/SilentDependencies``), so an idle monitor
/// makes no wakeups.
///
/// Each wake-up runs the stages in one direction: the datagrams are read here, each parsed
/// (``RtnetlinkParser``) and absorbed by the ``SnapshotStore``, which says whether the kernel's route
/// choice may have changed; then ``KernelQueries`` asks the kernel again if so and adds its answers;
/// the snapshot goes to `publish` if it differs from the last one, once per wake-up, and only then
/// are the answers' consequences for later wake-ups settled (rechecks, expiries, what to watch). An
/// overrun or a broken stream re-reads everything with dumps (`resync`), here too.
final class NetlinkEngine: @unchecked Sendable {
    // @unchecked: the sockets, watcher and store exist only as locals of `run()` on the engine's
    // own thread; `readyResult` and `destinations` are `Locked`; `wakeFD` and
    // `refreshFD` are written with write(2), which is thread-safe, and closed only in deinit,
    // after every user has let go.
    private let configuration: SystemPathSource.Configuration
    private let publish: @Sendable (SystemSnapshot) -> Void
    /// Counted on the engine's thread (the counters are made once, with the engine).
    private let metrics: NetlinkEngineMetrics
    /// `netreach.path`, with the namespace in its metadata.
    private let logger: Logger
    /// The addresses per-destination monitors want looked up: set by the source
    /// (``setDestinations(_:)``), read at each refresh.
    private let destinations: Locked<Set<IPAddress>>
    /// How reading the initial state went, once it has: `waitUntilReady` waits on `readiness`.
    private let readyResult = Locked<Result<Void, PathMonitorError>?>(nil)
    private let readiness = Wakeup()
    private let wakeFD: Int32
    private let refreshFD: Int32

    init(
        configuration: SystemPathSource.Configuration, destinations: Set<IPAddress>,
        metrics: NetlinkEngineMetrics, logger: Logger,
        publish: @escaping @Sendable (SystemSnapshot) -> Void
    ) {
        self.configuration = configuration
        self.destinations = Locked(destinations)
        self.metrics = metrics
        self.logger = logger
        self.publish = publish
        wakeFD = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        refreshFD = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
    }

    deinit {
        if wakeFD >= 0 { close(wakeFD) }
        if refreshFD >= 0 { close(refreshFD) }
    }

    /// Replaces the destinations to look up and asks the thread to look routes up again; it
    /// publishes if the answers differ.
    func setDestinations(_ addresses: Set<IPAddress>) {
        destinations.withLock { $0 = addresses }
        SystemCall.signal(eventDescriptor: refreshFD)
    }

    /// Starts the engine's thread; it reads the initial state, then follows changes.
    func launch() {
        // 15 characters, as Linux keeps: `top -H` and /proc show this name whole.
        BlockingWork.start(named: "netreach-nl") { [self] in run() }
    }

    /// Blocks until the initial state has been published, or throws why it could not be read.
    func waitUntilReady() throws(PathMonitorError) {
        readiness.wait { readyResult.withLock { $0 != nil } }
        try readyResult.withLock { $0! }.get()
    }

    /// Asks the thread to finish; it closes its socket and watches on the way out.
    func stop() { SystemCall.signal(eventDescriptor: wakeFD) }

    private func signalReady(_ result: Result<Void, PathMonitorError>) {
        readyResult.withLock { $0 = result }
        readiness.broadcast()
    }

    private func run() {
        guard wakeFD >= 0, refreshFD >= 0 else {
            return signalReady(.failure(.netlinkFailed(operation: "eventfd", errno: errno)))
        }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 18, alignment: 8)
        defer { buffer.deallocate() }
        do throws(PathMonitorError) {
            // Opened once: every socket is made through this descriptor, so all of them read the
            // namespace that was there at start, whatever its path names later.
            let namespace = try configuration.namespace.map { (namespace) throws(PathMonitorError) in
                try NamespaceHandle(namespace, logger: logger)
            }
            let namespaceFD = namespace.map { (fd: $0.fd, path: $0.path) }
            // The events socket joins its groups before the first dump, so nothing is missed between.
            let events = try NetlinkSocket(
                .events, namespace: namespaceFD, receiveBufferSize: configuration.receiveBufferSize)
            var requests = try NetlinkSocket(.requests, namespace: namespaceFD, receiveBufferSize: 0)
            let sources = try SourceQuery(
                namespace: namespaceFD, transport: configuration.transportProtocol, port: configuration.port)
            let multipathSysctls = try MultipathSysctls(namespace: namespaceFD)
            // Watched only from `nameserverWatchDelay` after the first path (see `follow`).
            var watcher: ResolvConfWatcher? = nil
            var kernel = EngineState(
                sysfs: configuration.namespace == nil ? SysfsReader(root: configuration.sysfsPath) : nil,
                queries: KernelQueries(
                    lookupAddresses: configuration.routeLookupAddresses, lookups: metrics.routeLookups,
                    multipathSysctls: multipathSysctls))
            _ = kernel.store.setNameservers(configuration.nameserverSource.nameservers())
            try resync(&kernel, events: events, requests: &requests, buffer: buffer)
            let watched = destinations.withLock { $0 }
            var filtered: Set<IPAddress>? = filterRoutes(on: events, watching: watched, filtered: nil)
            let (first, settlement) = try kernel.queries.snapshot(
                of: kernel.store.snapshot, removals: AnnouncedRemovals(), destinations: watched, requests: &requests,
                sources: sources, buffer: buffer)
            publish(first)
            kernel.queries.settle(settlement)
            metrics.snapshotsPublished.increment()
            logger.debug("read the kernel's state", metadata: ["links": "\(first.links.count)"])
            signalReady(.success(()))
            follow(
                events: events, requests: &requests, sources: sources, watcher: &watcher,
                watchNameserversAt: .now + configuration.nameserverWatchDelay, namespace: namespace,
                kernel: &kernel, published: first, filtered: &filtered, buffer: buffer)
        } catch {
            signalReady(.failure(error))
        }
    }

    /// What the engine keeps between wake-ups: the kernel's objects, its route choices, and
    /// what the messages read since the last publish said about them.
    private struct EngineState {
        var store = SnapshotStore()
        let sysfs: SysfsReader?
        var queries: KernelQueries
        /// What the messages since the last lookups announced removed, which the kernel may
        /// finish later.
        var removals = AnnouncedRemovals()

        init(sysfs: SysfsReader?, queries: KernelQueries) {
            self.sysfs = sysfs
            self.queries = queries
        }

        /// `message` with what sysfs says of a link first seen under its name (read once: a flag
        /// change does not repeat it).
        func withSysfsFacts(_ message: RtnetlinkMessage) -> RtnetlinkMessage {
            guard case .newLink(var link) = message, let sysfs, store.snapshot.links[link.index]?.name != link.name
            else { return message }
            (link.deviceType, link.isWireless) = sysfs.facts(forInterface: link.name)
            return .newLink(link)
        }
    }

    /// The engine's life after the initial dump: sleep in `poll` until the kernel, resolv.conf or
    /// `stop()` says something; publish once per wake-up if the snapshot changed.
    ///
    /// The nameserver files, and a namespace's path, are watched from `watchNameserversAt` on:
    /// the files are read again then (what was written since the first read is seen then, and
    /// everything later as it happens) and the namespace's path is checked. Closing an inotify
    /// instance that has watches waits for a grace period of the kernel's (fsnotify's SRCU: 5-8 ms
    /// here), and the process's exit waits for it: a monitor stopped before then (`status`, a
    /// `wait` already met) makes none (the process's one instance, ``FileWatchHub``, is made at
    /// the first watch).
    private func follow(
        events: borrowing NetlinkSocket, requests: inout NetlinkSocket, sources: borrowing SourceQuery,
        watcher: inout ResolvConfWatcher?, watchNameserversAt: ContinuousClock.Instant,
        namespace: NamespaceHandle?, kernel: inout EngineState, published: SystemSnapshot,
        filtered: inout Set<IPAddress>?, buffer: UnsafeMutableRawBufferPointer
    ) {
        var watchNameserversAt: ContinuousClock.Instant? = watchNameserversAt
        // When inotify was refused for the nameserver files or the namespace's path: the next time
        // they are read or checked without an event.
        var recheckAt: ContinuousClock.Instant? = nil
        var resyncPending = false
        var published = published
        // A wake-up that failed part-way may have applied changes it never published: publish
        // them once a later one succeeds, even if that one changes nothing more.
        var unpublished = false
        // A namespace named by a path is watched by its name with the files; one that is a
        // process's, by its pidfd. Known once the watches start: whether neither can tell.
        let pathNamed = namespace.map { !$0.isProcess } ?? false
        var namespaceUnwatched = false
        var fds = [
            pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0),
            pollfd(fd: events.fd, events: Int16(POLLIN), revents: 0),
            pollfd(fd: watcher?.fd ?? -1, events: Int16(POLLIN), revents: 0),
            pollfd(fd: namespace?.watchFD ?? -1, events: Int16(POLLIN), revents: 0),
            pollfd(fd: refreshFD, events: Int16(POLLIN), revents: 0),
        ]
        while true {
            // Only a failed resync or a due recheck or expiry sets a timeout; otherwise poll sleeps
            // until something happens.
            do throws(SystemError) {
                var wakeAt = kernel.queries.wakeAt
                if let due = watchNameserversAt { wakeAt = min(wakeAt ?? due, due) }
                if let due = recheckAt { wakeAt = min(wakeAt ?? due, due) }
                let timeout = Self.pollTimeout(resyncPending: resyncPending, expiry: wakeAt)
                _ = try SystemCall.poll(&fds, timeout: timeout)
            } catch {
                // Only ENOMEM is plausible here. Never end silently: say so, then re-read everything.
                NetReachDiagnostics.warning(
                    "netlink poll failed, re-reading the kernel state in 1 s: \(error)", logger: logger)
                resyncPending = true
                continue
            }
            if fds[0].revents != 0 { return }
            var changed = false
            var namespaceGone = false
            if let due = watchNameserversAt, ContinuousClock.now >= due {
                watchNameserversAt = nil
                fds[2].fd = startWatchingFiles(&watcher, namespacePath: pathNamed ? namespace?.path : nil)
                changed = kernel.store.setNameservers(configuration.nameserverSource.nameservers())
                // Deleted before the watch began: no event will ever say so.
                if pathNamed { namespaceGone = namespace?.pathLeadsElsewhere() ?? false }
                namespaceUnwatched = namespace.map { pathNamed ? fds[2].fd < 0 : $0.watchFD < 0 } ?? false
                if fds[2].fd < 0 || namespaceUnwatched { recheckAt = .now + Self.unwatchedRecheck }
            } else if let due = recheckAt, ContinuousClock.now >= due {
                recheckAt = .now + Self.unwatchedRecheck
                if fds[2].fd < 0 {
                    changed = kernel.store.setNameservers(configuration.nameserverSource.nameservers())
                }
                if namespaceUnwatched { namespaceGone = namespace?.pathLeadsElsewhere() ?? false }
            }
            if fds[2].revents != 0, watcher?.drain() == true {
                changed = kernel.store.setNameservers(configuration.nameserverSource.nameservers()) || changed
                if pathNamed, !namespaceGone { namespaceGone = namespace?.pathLeadsElsewhere() ?? false }
            }
            // A process's pidfd is readable only once the process has exited.
            if fds[3].revents != 0 { namespaceGone = true }
            if namespaceGone, let namespace {
                // Say so and stop: the sockets (closed on return) were all that kept it alive.
                var snapshot = published
                snapshot.observationFailure = .namespaceGone(path: namespace.path)
                publish(snapshot)
                return
            }
            if fds[4].revents != 0 {
                SystemCall.clear(eventDescriptor: refreshFD)
                kernel.queries.stale = .both
            }
            if let due = kernel.queries.wakeAt, ContinuousClock.now >= due { kernel.queries.markDue() }
            do throws(PathMonitorError) {
                if fds[1].revents != 0 || resyncPending {
                    changed =
                        try drain(&kernel, events: events, requests: &requests, buffer: buffer, resync: resyncPending)
                        || changed
                    resyncPending = false
                }
                guard changed || unpublished || !kernel.queries.stale.isEmpty else { continue }
                let watched = destinations.withLock { $0 }
                filtered = filterRoutes(on: events, watching: watched, filtered: filtered)
                let (snapshot, settlement) = try kernel.queries.snapshot(
                    of: kernel.store.snapshot, removals: kernel.removals, destinations: watched,
                    requests: &requests, sources: sources, buffer: buffer)
                kernel.removals = AnnouncedRemovals()
                unpublished = false
                if snapshot != published {
                    published = snapshot
                    publish(snapshot)
                    metrics.snapshotsPublished.increment()
                    logger.trace("published a snapshot")
                }
                // What the answers mean for later wake-ups, after the subscribers have them.
                kernel.queries.settle(settlement)
            } catch {
                NetReachDiagnostics.warning("netlink resync failed, retrying in 1 s: \(error)", logger: logger)
                resyncPending = true
                unpublished = true
            }
        }
    }

    /// Makes `watcher` watch the nameserver files, and the name of `namespacePath`; returns its
    /// descriptor for `poll` (-1 when inotify was refused, which is said once: the files are then
    /// read, and the path checked, every ``unwatchedRecheck``).
    /// Its own function: assigning the watcher inside `follow`'s loop sent the compiler's
    /// debug-build pass for moved variables (Swift 6.3) into a very long run.
    private func startWatchingFiles(_ watcher: inout ResolvConfWatcher?, namespacePath: String?) -> Int32 {
        let source = configuration.nameserverSource
        watcher =
            configuration.inotifyAvailable ? ResolvConfWatcher(source: source, namespacePath: namespacePath) : nil
        guard let fd = watcher?.fd else {
            let reason = errnoDescription(configuration.inotifyAvailable ? errno : EMFILE)
            let what = ([source.currentPath] + (namespacePath.map { [$0] } ?? [])).joined(separator: " and ")
            NetReachDiagnostics.warning(
                "cannot watch \(what) with inotify (\(reason)); checking every \(Self.unwatchedRecheck) instead",
                logger: logger)
            return -1
        }
        return fd
    }

    /// How often the nameserver files are read, and a namespace's path checked, when inotify (or
    /// a pidfd) cannot tell when they change: a change is then seen this late at most.
    static let unwatchedRecheck: Duration = .seconds(2)

    /// Keeps the events socket's ``RouteNotificationFilter`` on the addresses the next lookups
    /// ask about (the candidates for the internet and `destinations`); returns the destinations it
    /// was set for (`filtered`: those of the last call, `nil` before the first), so it is made
    /// again only when they change. Without a filter (one too long for the kernel, or a kernel
    /// that refused it) every message is read, as before filters. Set before the lookups are
    /// asked: a route message queued after their answers is never dropped for an address they
    /// cover, and one the earlier filter dropped is already in them.
    private func filterRoutes(
        on events: borrowing NetlinkSocket, watching destinations: Set<IPAddress>, filtered: Set<IPAddress>?
    ) -> Set<IPAddress> {
        guard destinations != filtered else { return destinations }
        let filter = RouteNotificationFilter(watching: configuration.routeLookupAddresses + destinations)
        do throws(PathMonitorError) {
            try events.filter(filter)
        } catch {
            // Every message is still read, as without a filter: slower in a route storm, not wrong.
            NetReachDiagnostics.warning("reading every route message: \(error)", logger: logger)
            try? events.filter(nil)
        }
        return destinations
    }

    /// Reads every pending notification into the store; returns whether the store changed. An
    /// overrun (ENOBUFS), a message stream that cannot be trusted, or `resync` rebuilds the state
    /// with a full dump.
    private func drain(
        _ kernel: inout EngineState, events: borrowing NetlinkSocket, requests: inout NetlinkSocket,
        buffer: UnsafeMutableRawBufferPointer, resync forced: Bool
    ) throws(PathMonitorError) -> Bool {
        // The weightiest cause wins: lost messages, then broken framing, then a retry.
        var resyncReason: NetlinkEngineMetrics.ResyncReason? = forced ? .retry : nil
        var changed = false
        readLoop: while true {
            switch try events.receive(into: buffer) {
            case .wouldBlock: break readLoop
            case .overrun: resyncReason = .overrun
            case .bytes(let count):
                for result in RtnetlinkParser.Messages(UnsafeRawBufferPointer(rebasing: buffer[0..<count])) {
                    switch result {
                    case .failure(let error):
                        metrics.malformed.increment()
                        NetReachDiagnostics.warning("skipped a malformed netlink message: \(error)", logger: logger)
                        if error.breaksFraming && resyncReason != .overrun { resyncReason = .malformed }
                    case .success(let envelope):
                        metrics.received(envelope.message)
                        let absorbed = kernel.store.absorb(
                            kernel.withSysfsFacts(envelope.message), watching: kernel.queries.watch)
                        changed = absorbed.changed || changed
                        kernel.queries.stale.formUnion(absorbed.asksLookups)
                        kernel.removals.add(absorbed)
                    }
                }
            }
        }
        guard let resyncReason else { return changed }
        metrics.resynced(resyncReason)
        if resyncReason != .retry {
            NetReachDiagnostics.warning(
                "netlink messages were lost (overrun or malformed stream); re-reading the kernel state",
                logger: logger, metadata: ["reason": "\(resyncReason.rawValue)"])
        }
        let before = kernel.store.snapshot
        try resync(&kernel, events: events, requests: &requests, buffer: buffer)
        // Whatever was lost may have been a removal: ask again now and after the rechecks.
        kernel.queries.stale = .both
        kernel.removals = AnnouncedRemovals(opaque: .both)
        return changed || kernel.store.snapshot != before
    }

    // MARK: Resync

    static let dumpTimeout: Duration = .seconds(5)
    static let resyncAttempts = 5

    /// Rebuilds the store from dumps of links, addresses and routes, on the requests socket.
    ///
    /// Why this is exact: every notification carries the whole new state of its object, so a dump
    /// taken after the events socket was emptied, followed by every notification queued since, in
    /// order, ends in the kernel's state, whatever the dump saw of changes made meanwhile. The dumps
    /// run on a socket joined to no group, so a flood of notifications cannot stall them; it was
    /// opened with the events socket and lives as long, so a resync reads the same namespace as the
    /// events, never whatever a namespace's path names by then.
    private func resync(
        _ kernel: inout EngineState, events: borrowing NetlinkSocket, requests dumps: inout NetlinkSocket,
        buffer: UnsafeMutableRawBufferPointer
    ) throws(PathMonitorError) {
        // Whatever is queued predates the dump and may miss its own deletions (lost in the overrun):
        // drop it all, past any further overrun, until the socket is empty.
        try Self.discardPending(events, buffer: buffer)
        for _ in 0..<Self.resyncAttempts {
            // Replies to a dump that an earlier attempt gave up on must not be read as this one's.
            try Self.discardPending(dumps, buffer: buffer)
            kernel.store.resetKernelState()
            var consistent = true
            for dump in NetlinkSocket.Dump.allCases {
                consistent = try self.dump(dump, into: &kernel, socket: &dumps, buffer: buffer) && consistent
            }
            if consistent { return }
        }
        throw .dumpFailed("the kernel state kept changing during \(Self.resyncAttempts) dumps")
    }

    /// Runs one dump to its end; returns `false` if the kernel flagged it inconsistent or aborted it.
    private func dump(
        _ dump: NetlinkSocket.Dump, into kernel: inout EngineState, socket: inout NetlinkSocket,
        buffer: UnsafeMutableRawBufferPointer
    ) throws(PathMonitorError) -> Bool {
        let sequence = try socket.requestDump(dump)
        var consistent = true
        while true {
            guard try socket.waitReadable(within: Self.dumpTimeout) else {
                throw .dumpFailed("no answer from the kernel within \(Self.dumpTimeout)")
            }
            let count: Int
            switch try socket.receive(into: buffer) {
            case .wouldBlock: continue
            case .overrun:
                consistent = false // keep reading: a new dump cannot start before this one ends
                continue
            case .bytes(let received): count = received
            }
            for result in RtnetlinkParser.Messages(UnsafeRawBufferPointer(rebasing: buffer[0..<count])) {
                guard case .success(let envelope) = result else {
                    if case .failure(let error) = result {
                        metrics.malformed.increment()
                        NetReachDiagnostics.warning("skipped a malformed netlink message: \(error)", logger: logger)
                        if error.breaksFraming { consistent = false }
                    }
                    continue
                }
                // On the dumps socket only the current dump's replies count.
                guard envelope.sequence == sequence && envelope.portID == socket.portID else { continue }
                // The kernel flags any part of a dump that raced with a change, not only NLMSG_DONE.
                let interrupted = envelope.flags & RtnetlinkParser.flagDumpInterrupted != 0
                if interrupted { consistent = false }
                switch envelope.message {
                case .done(let doneInterrupted):
                    return consistent && !doneInterrupted && !interrupted
                case .error(let code) where code != 0:
                    // The kernel aborts a dump with ENOBUFS when the socket's buffer overflows while
                    // it is being read (and EBUSY/EINTR are as passing): try the whole dump again.
                    if [ENOBUFS, EBUSY, EINTR].contains(code) { return false }
                    // A kernel without nexthop objects (before 5.3) has none to dump.
                    if dump == .nexthops { return consistent }
                    throw .dumpFailed("kernel refused the \(dump) dump: \(errnoDescription(code))")
                case let message:
                    _ = kernel.store.apply(kernel.withSysfsFacts(message))
                }
            }
        }
    }

    /// Reads and drops whatever `descriptor` has queued, past any overrun, until it is empty.
    private static func discardPending(
        _ socket: borrowing NetlinkSocket, buffer: UnsafeMutableRawBufferPointer
    ) throws(PathMonitorError) {
        while true {
            if case .wouldBlock = try socket.receive(into: buffer) { return }
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
