#if os(Linux)
import NetReachSystem
import Glibc

/// Watches every file of a ``NameserverSource`` through inotify on directories, so it survives
/// the rename and symlink swaps that systemd-resolved and NetworkManager make, and files that do
/// not exist yet: for each file it follows the symlink chain link by link and watches the
/// directory of every link and of the final target; where a directory is missing, it watches the
/// nearest existing ancestor for the next component, and walks again when that appears.
///
/// It also watches the name of a namespace's path (`/run/netns/NAME`), when its engine has one.
/// The watches are the process's ``FileWatchHub``'s: one inotify instance for every engine.
struct ResolvConfWatcher {
    private let subscription: FileWatchHub.Subscription
    let source: NameserverSource
    /// The namespace path's directory and name, watched besides the files.
    private let namespaceWatch: [String: Set<String>]
    /// How many symlinks a chain may have (the kernel's own limit).
    static let maximumLinks = 40

    /// Readable when a watched name changed: then ``drain()``.
    var fd: Int32 { subscription.fd }

    /// `nil` with `errno` set when the hub cannot watch (inotify refused: EMFILE once the user's
    /// instances are all taken).
    init?(source: NameserverSource, namespacePath: String? = nil) {
        guard let subscription = FileWatchHub.shared.subscribe() else { return nil }
        self.subscription = subscription
        self.source = source
        namespaceWatch =
            namespacePath.map { path in
                let (directory, name) = Self.split(path)
                return [directory: [name]]
            } ?? [:]
        refreshWatches()
    }

    /// Whether a watched name changed since the last call (the files must then be read again, and
    /// the namespace's path checked); watches again where the files now lead.
    func drain() -> Bool {
        guard subscription.takeChange() else { return false }
        refreshWatches()
        return true
    }

    /// The directories to watch, and the names in each that matter, for the source's files now.
    static func wantedWatches(for source: NameserverSource) -> [String: Set<String>] {
        var wanted: [String: Set<String>] = [:]
        for path in source.watchedPaths {
            var current = path
            for _ in 0...maximumLinks {
                let (directory, name) = split(current)
                guard isDirectory(directory) else {
                    let (ancestor, child) = nearestExistingAncestor(of: directory)
                    wanted[ancestor, default: []].insert(child)
                    break
                }
                wanted[directory, default: []].insert(name)
                guard let target = readLink(current) else { break }
                current = target.hasPrefix("/") ? target : (directory == "/" ? "" : directory) + "/" + target
            }
        }
        return wanted
    }

    /// Watches exactly ``wantedWatches(for:)`` and the namespace's name.
    ///
    /// A directory created between looking and watching (`mkdir -p` racing with us) raises no
    /// event for a watch that does not exist yet, so look again after watching, until what is
    /// wanted stays the same (bounded: each round follows one more created level).
    private func refreshWatches() {
        var wanted = Self.wantedWatches(for: source)
        for _ in 0..<Self.maximumLinks {
            subscription.watch(wanted.merging(namespaceWatch) { $0.union($1) })
            let again = Self.wantedWatches(for: source)
            if again == wanted { return }
            wanted = again
        }
    }

    private static func split(_ path: String) -> (String, String) {
        guard let slash = path.lastIndex(of: "/") else { return (".", path) }
        let directory = String(path[..<slash])
        return (directory.isEmpty ? "/" : directory, String(path[path.index(after: slash)...]))
    }

    /// The deepest existing ancestor of a missing directory, and the name of its child on the way.
    private static func nearestExistingAncestor(of directory: String) -> (String, String) {
        var missing = directory
        while true {
            let (parent, name) = split(missing)
            if isDirectory(parent) || parent == "/" || parent == "." { return (parent, name) }
            missing = parent
        }
    }

    private static func isDirectory(_ path: String) -> Bool {
        var status = stat()
        return stat(path, &status) == 0 && (status.st_mode & S_IFMT) == S_IFDIR
    }

    private static func readLink(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink(path, &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
#endif
