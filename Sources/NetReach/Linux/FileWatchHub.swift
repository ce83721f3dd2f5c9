#if os(Linux)
import CNetReachLinux // inotify (IN_CLOEXEC): not in the Glibc module
import NetReachSystem
import Glibc

/// The process's one inotify instance, shared by every engine's file watches: the nameserver
/// files and the path of a watched namespace.
///
/// The kernel gives each user 128 inotify instances by default (`fs.inotify.max_user_instances`)
/// for all of that user's processes together: systemd, udev, kubelet and editors count too. An
/// instance per monitor, and one more per watched namespace, took two per namespace: `serve`
/// watching 64 namespaces would have taken all of root's by itself, and every other program's
/// `inotify_init1` would then fail. Here one instance and one thread (`netreach-files`, blocked in
/// `read`) watch every directory any engine asks for, and each engine has an eventfd that the hub
/// makes readable when one of the names it asked for changes, or a directory it watches goes.
///
/// ```swift
/// guard let subscription = FileWatchHub.shared.subscribe() else { return } // refused: check by hand
/// subscription.watch(["/etc": ["resolv.conf"], "/run/netns": ["blue"]])
/// // poll(subscription.fd) wakes after a change; then subscription.takeChange()
/// ```
final class FileWatchHub: Sendable {
    static let shared = FileWatchHub()

    /// One engine's watches. The names it watches are dropped when it is released.
    final class Subscription: Sendable {
        /// Readable (an eventfd) when a watched name changed since ``takeChange()``.
        let fd: Int32
        fileprivate let id: UInt64
        private let hub: FileWatchHub

        fileprivate init(fd: Int32, id: UInt64, hub: FileWatchHub) {
            self.fd = fd
            self.id = id
            self.hub = hub
        }

        /// Watches exactly these names, each in its directory (two spellings of one directory
        /// share its watch). A directory that cannot be watched is left out.
        func watch(_ wanted: [String: Set<String>]) { hub.set(wanted, for: id) }

        /// Whether a watched name changed since the last call; clears the descriptor.
        func takeChange() -> Bool { SystemCall.clear(eventDescriptor: fd) }

        deinit {
            // Forgotten under the hub's lock before the descriptor closes: the hub never signals
            // a number that may have been handed to another file.
            hub.remove(id)
            close(fd)
        }
    }

    /// One directory's watch: the names each subscriber watches in it.
    private struct Watch {
        var names: [UInt64: Set<String>] = [:]
    }

    private struct State {
        var inotify: Int32 = -1
        var watches: [Int32: Watch] = [:]
        /// Each subscriber's eventfd.
        var subscribers: [UInt64: Int32] = [:]
        var nextID: UInt64 = 0
    }

    private let state = Locked(State())

    /// What every watch asks for: a name created, written and closed, moved, deleted or changed
    /// (a mount's attributes), and the directory itself deleted or moved.
    private static let mask = UInt32(
        IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE | IN_ATTRIB | IN_DELETE_SELF
            | IN_MOVE_SELF)

    /// A new subscription, or `nil` with `errno` set when inotify (or an eventfd) is refused:
    /// EMFILE once the user's instances are all taken. The instance is made at the first
    /// subscription (tried again at the next one if refused) and kept for the process's life.
    func subscribe() -> Subscription? {
        let made = state.withLock { state -> (fd: Int32, id: UInt64, startReader: Int32?)? in
            var startReader: Int32? = nil
            if state.inotify < 0 {
                let inotify = inotify_init1(Int32(IN_CLOEXEC))
                guard inotify >= 0 else { return nil }
                state.inotify = inotify
                startReader = inotify
            }
            let fd = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
            guard fd >= 0 else { return nil }
            defer { state.nextID += 1 }
            state.subscribers[state.nextID] = fd
            return (fd, state.nextID, startReader)
        }
        guard let made else { return nil }
        if let inotify = made.startReader {
            BlockingWork.start(named: "netreach-files") { [self] in readEvents(inotify) }
        }
        return Subscription(fd: made.fd, id: made.id, hub: self)
    }

    private func set(_ wanted: [String: Set<String>], for id: UInt64) {
        state.withLock { state in
            var fresh: [Int32: Set<String>] = [:]
            for (directory, names) in wanted {
                let wd = inotify_add_watch(state.inotify, directory, Self.mask)
                guard wd >= 0 else { continue }
                fresh[wd, default: []].formUnion(names)
                if state.watches[wd] == nil { state.watches[wd] = Watch() }
            }
            Self.replaceNames(of: id, with: fresh, in: &state)
        }
    }

    private func remove(_ id: UInt64) {
        state.withLock { state in
            state.subscribers[id] = nil
            Self.replaceNames(of: id, with: [:], in: &state)
        }
    }

    /// Makes `names` the subscriber's names in each watch, and ends the watches nobody needs.
    private static func replaceNames(of id: UInt64, with names: [Int32: Set<String>], in state: inout State) {
        for wd in Array(state.watches.keys) {
            state.watches[wd]?.names[id] = names[wd]
            if state.watches[wd]?.names.isEmpty == true {
                state.watches[wd] = nil
                inotify_rm_watch(state.inotify, wd)
            }
        }
    }

    /// The hub's thread: reads events for ever and signals the subscribers they concern.
    private func readEvents(_ inotify: Int32) {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 16, alignment: 8)
        defer { buffer.deallocate() }
        while true {
            let count = Glibc.read(inotify, buffer.baseAddress, buffer.count)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return } // only a closed descriptor: never, the instance is kept
            let events = UnsafeRawBufferPointer(rebasing: buffer[0..<count])
            state.withLock { state in
                var concerned: Set<UInt64> = []
                Self.forEachEvent(in: events) { wd, mask, name in
                    if mask & UInt32(IN_Q_OVERFLOW) != 0 {
                        // Events were lost: every subscriber looks again.
                        concerned.formUnion(state.subscribers.keys)
                        return
                    }
                    guard let watch = state.watches[wd] else { return }
                    let selfEvent = mask & UInt32(IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF) != 0
                    for (id, names) in watch.names where selfEvent || names.contains(name) { concerned.insert(id) }
                    // The kernel dropped the watch (its directory went): its subscribers watch anew.
                    if mask & UInt32(IN_IGNORED) != 0 { state.watches[wd] = nil }
                }
                // Under the lock: a subscriber's descriptor is not closed while it is signalled.
                for id in concerned {
                    if let fd = state.subscribers[id] { SystemCall.signal(eventDescriptor: fd) }
                }
            }
        }
    }

    /// Calls `body` with each `struct inotify_event { s32 wd; u32 mask; u32 cookie; u32 len;
    /// char name[len]; }` of `events`.
    private static func forEachEvent(
        in events: UnsafeRawBufferPointer, _ body: (_ wd: Int32, _ mask: UInt32, _ name: String) -> Void
    ) {
        var offset = 0
        while offset + 16 <= events.count {
            let wd = Int32(bitPattern: events.loadU32(at: offset))
            let mask = events.loadU32(at: offset + 4)
            let nameLength = Int(events.loadU32(at: offset + 12))
            let end = min(offset + 16 + nameLength, events.count)
            let name = String(decoding: events[(offset + 16)..<end].prefix { $0 != 0 }, as: UTF8.self)
            body(wd, mask, name)
            offset = end
        }
    }
}
#endif
