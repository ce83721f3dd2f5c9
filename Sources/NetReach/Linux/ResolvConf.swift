#if os(Linux)
import CNetReachLinux   // inotify (IN_NONBLOCK, IN_CLOEXEC): not in the Glibc module
import Glibc

/// Where a monitor's nameservers come from: candidate resolv.conf files, the first that exists
/// winning (`ip netns exec` uses `/etc/netns/NAME/resolv.conf` when there is one, else
/// `/etc/resolv.conf`), and systemd-resolved's list of upstream servers, which decides when the
/// chosen file names only resolved's local stub.
struct NameserverSource: Sendable, Hashable {
    var candidates: [String]
    /// `/run/systemd/resolve/resolv.conf`; `nil` to take the stub at its word.
    var resolvedUpstreamPath: String?

    /// The file in use now: the first candidate that exists (the last one if none does).
    var currentPath: String {
        candidates.first { access($0, F_OK) == 0 } ?? candidates.last ?? "/etc/resolv.conf"
    }

    /// The nameservers a program would use now. When the file names only systemd-resolved's stub
    /// (127.0.0.53, 127.0.0.54) and resolved's upstream list exists, those upstream servers
    /// decide (as `systemd-networkd-wait-online --dns` judges): the stub always answers, even
    /// with no server behind it.
    func nameservers() -> [IPAddress] {
        let servers = ResolvConf.nameservers(atPath: currentPath)
        guard !servers.isEmpty, servers.allSatisfy(ResolvConf.stubAddresses.contains),
              let upstream = resolvedUpstreamPath, access(upstream, F_OK) == 0 else { return servers }
        return ResolvConf.nameservers(atPath: upstream)
    }

    /// Every file whose change can change ``nameservers()``.
    var watchedPaths: [String] { candidates + (resolvedUpstreamPath.map { [$0] } ?? []) }
}

/// Reads nameservers from resolv.conf the way glibc's resolver does (`res_init`).
///
/// Documented fallbacks (bad input never crashes): a missing or unreadable file, or one with no
/// valid `nameserver` line, means no nameservers (`supportsDNS == false`); files over 64 KiB are
/// read only up to that size.
enum ResolvConf {
    static let maximumSize = 64 * 1024
    /// glibc's MAXNS: later `nameserver` lines are ignored.
    static let maximumNameservers = 3
    /// systemd-resolved's local stub listeners.
    static let stubAddresses: Set<IPAddress> = [IPAddress("127.0.0.53")!, IPAddress("127.0.0.54")!]

    /// The nameservers named in `text`, as glibc's resolver takes them, without duplicates:
    /// see ``configuredNameservers(in:)``.
    static func nameservers(in text: Substring) -> [IPAddress] {
        var result: [IPAddress] = []
        for address in configuredNameservers(in: text) where !result.contains(address) { result.append(address) }
        return result
    }

    /// The `nameserver` entries glibc's `res_init` (2.36) keeps, in order, duplicates included,
    /// checked against glibc itself on this machine (a differential test reads what `res_ninit` keeps):
    /// - a line counts only if it *starts* with `nameserver` followed by a space or tab;
    /// - the address ends at the first space, tab or newline, and must be exact: `192.0.2.1#x`,
    ///   `192.0.2.1;x` and a CRLF line's `192.0.2.1\r` are rejected, not trimmed;
    /// - IPv4 is read by `inet_aton`, so `127.1`, `0x7f.0.0.1`, `2130706433` and octal `010.0.0.1`
    ///   are addresses; IPv6 by `inet_pton`, with an optional `%zone` that is dropped (glibc keeps
    ///   the address whatever the zone names);
    /// - only the first three valid lines count (MAXNS), duplicates among them too.
    ///
    /// Unlike glibc, which then falls back on 127.0.0.1, no valid line means no nameserver: a
    /// resolver that will ask a server nobody configured is not DNS support.
    static func configuredNameservers(in text: Substring) -> [IPAddress] {
        var result: [IPAddress] = []
        for line in text.utf8.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true) {
            guard result.count < maximumNameservers else { break }
            if let address = nameserver(in: Array(line)) { result.append(address) }
        }
        return result
    }

    private static let keyword = Array("nameserver".utf8)
    private static let space = UInt8(ascii: " "), tab = UInt8(ascii: "\t")

    /// The address of one `nameserver` line, or `nil` if glibc would not take it.
    private static func nameserver(in line: [UInt8]) -> IPAddress? {
        guard line.count > keyword.count, line.starts(with: keyword),
              line[keyword.count] == space || line[keyword.count] == tab else { return nil }
        var token = line.dropFirst(keyword.count).drop { $0 == space || $0 == tab }
        if let end = token.firstIndex(where: { $0 == space || $0 == tab }) { token = token[..<end] }
        // Exact: no trailing "\r", "\v" or "\f" (C's other white space), no NUL.
        guard !token.isEmpty, !token.contains(where: { $0 == 0 || (9...13).contains($0) }) else { return nil }
        let text = String(decoding: token, as: UTF8.self)
        var ipv4 = in_addr()
        if inet_aton(text, &ipv4) != 0 {
            return withUnsafeBytes(of: ipv4.s_addr) { IPAddress(bytes: Array($0)) }
        }
        // glibc keeps an IPv6 address whatever its zone says (an unknown interface, nothing).
        let address = text.split(separator: "%", maxSplits: 1, omittingEmptySubsequences: false)[0]
        var ipv6 = in6_addr()
        guard inet_pton(AF_INET6, String(address), &ipv6) == 1 else { return nil }
        return withUnsafeBytes(of: ipv6) { IPAddress(bytes: Array($0)) }
    }

    /// Reads and parses the file at `path` (following symlinks); `[]` when it cannot be read.
    static func nameservers(atPath path: String) -> [IPAddress] {
        guard let bytes = readFile(path, limit: maximumSize) else { return [] }
        return nameservers(in: Substring(String(decoding: bytes, as: UTF8.self)))
    }
}

/// Reads at most `limit` bytes of a file; `nil` if it cannot be opened.
func readFile(_ path: String, limit: Int) -> [UInt8]? {
    let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var bytes = [UInt8](repeating: 0, count: limit)
    var total = 0
    while total < limit {
        let count = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + total, limit - total) }
        if count < 0 && errno == EINTR { continue }
        guard count > 0 else { break }
        total += count
    }
    return Array(bytes.prefix(total))
}

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
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
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
        let mask = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE | IN_ATTRIB
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

/// What sysfs says about an interface that the netlink link message does not.
struct SysfsReader: Sendable {
    /// `/sys/class/net`, or a fixture directory in tests.
    var root: String

    /// `DEVTYPE` from `uevent`, and whether `wireless` or `phy80211` exists. Unreadable entries
    /// give `nil`/`false`: classification then falls back on ARPHRD, link kind and name.
    func facts(forInterface name: String) -> (deviceType: String?, isWireless: Bool) {
        guard !name.isEmpty, !name.contains("/"), name != "..", name != "." else { return (nil, false) }
        let directory = "\(root)/\(name)"
        var deviceType: String?
        if let uevent = readFile("\(directory)/uevent", limit: 4096) {
            for line in String(decoding: uevent, as: UTF8.self).split(separator: "\n") where line.hasPrefix("DEVTYPE=") {
                deviceType = String(line.dropFirst("DEVTYPE=".count))
            }
        }
        let isWireless = access("\(directory)/wireless", F_OK) == 0 || access("\(directory)/phy80211", F_OK) == 0
        return (deviceType, isWireless)
    }
}
#endif
