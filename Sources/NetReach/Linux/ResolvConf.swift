#if os(Linux)
import Glibc

/// Reads nameservers from resolv.conf.
///
/// Documented fallbacks (DESIGN.md: bad input never crashes): a missing or unreadable file, or one
/// with no valid `nameserver` line, means no nameservers (`supportsDNS == false`); a line that is
/// not a valid `nameserver ADDRESS` is skipped; files over 64 KiB are read only up to that size.
enum ResolvConf {
    static let maximumSize = 64 * 1024

    /// The nameservers named in `text`, in order, without duplicates.
    static func nameservers(in text: Substring) -> [IPAddress] {
        var result: [IPAddress] = []
        // `isNewline` covers "\r\n", which Swift treats as one Character equal to neither "\r" nor "\n".
        for line in text.split(whereSeparator: \.isNewline) {
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard fields.count >= 2, fields[0] == "nameserver",
                  let address = IPAddress(String(fields[1])), !result.contains(address) else { continue }
            result.append(address)
        }
        return result
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

/// Watches resolv.conf through inotify on its directory, so it survives the rename and symlink
/// swaps that systemd-resolved and NetworkManager make. When the file is a symlink, the target's
/// directory is watched too, since writes there raise no event in `/etc`.
struct ResolvConfWatcher: ~Copyable {
    let fd: Int32
    let path: String
    private var watches: [Int32: (directory: String, names: Set<String>)] = [:]

    init?(path: String) {
        let fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { return nil }
        self.fd = fd
        self.path = path
        refreshWatches()
    }

    deinit { close(fd) }

    /// Drains pending events; returns whether any concerned resolv.conf (so it must be re-read).
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
                    if mask & UInt32(IN_Q_OVERFLOW) != 0 || mask & UInt32(IN_IGNORED) != 0 {
                        relevant = true
                    } else if let watch = watches[wd], watch.names.contains(name) {
                        relevant = true
                    }
                    offset = end
                }
            }
        }
        if relevant { refreshWatches() }
        return relevant
    }

    /// (Re)adds watches on the file's directory and, for a symlink, its target's directory.
    private mutating func refreshWatches() {
        var wanted: [String: Set<String>] = [:]
        let (directory, name) = split(path)
        wanted[directory, default: []].insert(name)
        if let target = realpath(path, nil) {
            let resolved = String(cString: target)
            free(target)
            let (targetDirectory, targetName) = split(resolved)
            wanted[targetDirectory, default: []].insert(targetName)
        }
        for (wd, watch) in watches where wanted[watch.directory] == nil {
            inotify_rm_watch(fd, wd)
            watches[wd] = nil
        }
        let mask = UInt32(IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE | IN_ATTRIB)
        for (directory, names) in wanted {
            let wd = inotify_add_watch(fd, directory, mask)
            if wd >= 0 { watches[wd] = (directory, names) }
        }
    }

    private func split(_ path: String) -> (String, String) {
        guard let slash = path.lastIndex(of: "/") else { return (".", path) }
        let directory = String(path[..<slash])
        return (directory.isEmpty ? "/" : directory, String(path[path.index(after: slash)...]))
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
