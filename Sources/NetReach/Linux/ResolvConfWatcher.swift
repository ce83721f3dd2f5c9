#if os(Linux)
import CNetReachLinux // inotify (IN_NONBLOCK, IN_CLOEXEC): not in the Glibc module
import NetReachSystem
import Glibc

/// Watches every file of a ``NameserverSource`` through inotify on directories, so it survives
/// the rename and symlink swaps that systemd-resolved and NetworkManager make, and files that do
/// not exist yet: for each file it follows the symlink chain link by link and watches the
/// directory of every link and of the final target; where a directory is missing, it watches the
/// nearest existing ancestor for the next component, and walks again when that appears.
struct ResolvConfWatcher: ~Copyable {
    let fd: Int32
    let source: NameserverSource
    private var watches: [Int32: (directory: String, names: Set<String>)] = [:]
    /// How many symlinks a chain may have (the kernel's own limit).
    static let maximumLinks = 40

    init?(source: NameserverSource) {
        let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { return nil }
        self.fd = fd
        self.source = source
        refreshWatches()
    }

    deinit { close(fd) }

    /// Drains pending events; returns whether any concerned the files (so they must be re-read).
    mutating func drain() -> Bool {
        var relevant = false
        var buffer = [UInt8](repeating: 0, count: 8192)
        while true {
            let count = buffer.withUnsafeMutableBytes { try? SystemCall.read(fd, into: $0) }
            guard let count, count > 0 else { break }
            buffer.withUnsafeBytes { raw in
                var offset = 0
                // struct inotify_event { s32 wd; u32 mask; u32 cookie; u32 len; char name[len]; }
                while offset + 16 <= count {
                    let wd = Int32(bitPattern: raw.loadU32(at: offset))
                    let mask = raw.loadU32(at: offset + 4)
                    let nameLength = Int(raw.loadU32(at: offset + 12))
                    let end = min(offset + 16 + nameLength, count)
                    let name = String(decoding: raw[(offset + 16)..<end].prefix { $0 != 0 }, as: UTF8.self)
                    let selfEvents = UInt32(IN_Q_OVERFLOW | IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF)
                    if mask & selfEvents != 0 || (watches[wd]?.names.contains(name) ?? false) { relevant = true }
                    offset = end
                }
            }
        }
        if relevant { refreshWatches() }
        return relevant
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

    /// (Re)adds watches so they are exactly ``wantedWatches(for:)``.
    ///
    /// A directory created between looking and watching (`mkdir -p` racing with us) raises no
    /// event for a watch that does not exist yet, so look again after watching, until what is
    /// wanted stays the same (bounded: each round follows one more created level).
    private mutating func refreshWatches() {
        var wanted = Self.wantedWatches(for: source)
        for _ in 0..<Self.maximumLinks {
            apply(wanted)
            let again = Self.wantedWatches(for: source)
            if again == wanted { return }
            wanted = again
        }
    }

    private mutating func apply(_ wanted: [String: Set<String>]) {
        let mask = UInt32(
            IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE | IN_ATTRIB
                | IN_DELETE_SELF | IN_MOVE_SELF)
        // Two spellings of one directory (`/etc/../run/systemd/resolve` from a relative link, and
        // `/run/systemd/resolve`) get the same watch: its names are the union of both.
        var fresh: [Int32: (directory: String, names: Set<String>)] = [:]
        for (directory, names) in wanted {
            let wd = inotify_add_watch(fd, directory, mask)
            guard wd >= 0 else { continue }
            fresh[wd, default: (directory, [])].names.formUnion(names)
        }
        for wd in watches.keys where fresh[wd] == nil { inotify_rm_watch(fd, wd) }
        watches = fresh
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
