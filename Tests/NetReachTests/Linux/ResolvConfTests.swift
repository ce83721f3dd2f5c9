#if os(Linux)
import Foundation
import NetReachTestSupport
@testable import NetReach
import Testing

private func ip(_ text: String) -> IPAddress { IPAddress(text)! }

/// A fresh temporary directory for one test, removed by `remove()`.
private struct TemporaryDirectory {
    let path: String

    init() throws {
        path = NSTemporaryDirectory() + "netreach-tests-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    /// Writes `bytes` to `name` inside the directory; returns the file's path.
    @discardableResult
    func write(_ bytes: [UInt8], to name: String) throws -> String {
        let file = "\(path)/\(name)"
        try FileManager.default.createDirectory(
            atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try Data(bytes).write(to: URL(fileURLWithPath: file))
        return file
    }

    @discardableResult
    func write(_ text: String, to name: String) throws -> String { try write(Array(text.utf8), to: name) }

    func remove() { try? FileManager.default.removeItem(atPath: path) }
}

/// Waits (up to 5 s) until the watcher's descriptor is readable, then drains it.
private func drainWhenReadable(_ watcher: ResolvConfWatcher) -> Bool {
    var descriptor = pollfd(fd: watcher.fd, events: Int16(POLLIN), revents: 0)
    _ = poll(&descriptor, 1, 5_000)
    return watcher.drain()
}

/// Waits (up to `milliseconds`) until `subscription`'s descriptor is readable; whether it was.
private func signalled(_ subscription: FileWatchHub.Subscription, within milliseconds: Int32) -> Bool {
    var descriptor = pollfd(fd: subscription.fd, events: Int16(POLLIN), revents: 0)
    return poll(&descriptor, 1, milliseconds) == 1 && subscription.takeChange()
}

/// The inotify instances this process holds (`/proc/self/fd` links to `anon_inode:inotify`).
private func inotifyInstances() -> Int {
    let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
    return descriptors.filter { name in
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + name)) == "anon_inode:inotify"
    }.count
}

@Suite("FileWatchHub: one inotify instance for every engine", .offPool)
struct FileWatchHubTests {
    /// Root's 128 instances (`fs.inotify.max_user_instances`) are shared with every other program:
    /// 200 engines' watches, in one namespace's directory and many files, take at most one more.
    @Test func twoHundredWatchersShareOneInstance() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let before = inotifyInstances()
        var watchers: [ResolvConfWatcher] = []
        for index in 0..<200 {
            let file = try directory.write("nameserver 192.0.2.53\n", to: "resolv-\(index).conf")
            let watcher = try #require(
                ResolvConfWatcher(
                    source: NameserverSource(candidates: [file], resolvedUpstreamPath: nil),
                    namespacePath: directory.path + "/netns/ns-\(index)"))
            watchers.append(watcher)
        }
        // One instance at most (the hub's, made here if no test made it before); the margin is
        // for tests running beside this one that open their own (serve's namespace directory).
        let after = inotifyInstances()
        #expect(after - before < 20, "\(before) instances before 200 watchers, \(after) after")
        // Each still hears of its own file, and only of it. The hub reads events in order, on its
        // own thread: once the last watcher has heard of a write, every earlier event (a file
        // written while the next watcher was being made) has been handed out, and is cleared.
        try directory.write("nameserver 192.0.2.54\n", to: "resolv-199.conf")
        #expect(drainWhenReadable(watchers[199]))
        for watcher in watchers { _ = watcher.drain() }
        try directory.write("nameserver 192.0.2.54\n", to: "resolv-7.conf")
        #expect(drainWhenReadable(watchers[7]))
        #expect(!watchers[8].drain())
    }

    @Test func aNameIsSignalledToWhoWatchesItAndAReleasedSubscriberFreesNothingOthersNeed() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let hub = FileWatchHub.shared
        let first = try #require(hub.subscribe())
        var second = try #require(hub.subscribe())
        first.watch([directory.path: ["a"]])
        second.watch([directory.path: ["a", "b"]])
        try directory.write("x", to: "b")
        #expect(signalled(second, within: 5_000))
        #expect(!signalled(first, within: 100), "b is not first's")
        // The directory's watch outlives the subscriber that leaves it.
        second = try #require(hub.subscribe())
        try directory.write("x", to: "a")
        #expect(signalled(first, within: 5_000))
        // A directory deleted and made again: the subscriber is told, and watches anew.
        let sub = directory.path + "/sub"
        try FileManager.default.createDirectory(atPath: sub, withIntermediateDirectories: true)
        first.watch([sub: ["f"]])
        try FileManager.default.removeItem(atPath: sub)
        #expect(signalled(first, within: 5_000), "its directory went")
        try FileManager.default.createDirectory(atPath: sub, withIntermediateDirectories: true)
        first.watch([sub: ["f"]])
        try directory.write("x", to: "sub/f")
        #expect(signalled(first, within: 5_000))
    }
}

@Suite("ResolvConfWatcher", .offPool)
struct ResolvConfWatcherTests {
    @Test func oneDirectoryReachedTwoWaysWatchesTheNamesOfBoth() throws {
        // Ubuntu's layout: resolv.conf -> ../run/resolve/stub-resolv.conf (relative), and
        // resolved's upstream list in the same directory, named without "..".
        let root = NSTemporaryDirectory() + "netreach-watch-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: root + "/etc", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: root + "/run/resolve", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: root) }
        try "nameserver 127.0.0.53\n".write(
            toFile: root + "/run/resolve/stub-resolv.conf", atomically: false, encoding: .utf8)
        try "nameserver 192.0.2.53\n".write(
            toFile: root + "/run/resolve/resolv.conf", atomically: false, encoding: .utf8)
        try FileManager.default.createSymbolicLink(
            atPath: root + "/etc/resolv.conf", withDestinationPath: "../run/resolve/stub-resolv.conf")
        guard
            let watcher = ResolvConfWatcher(
                source: NameserverSource(
                    candidates: [root + "/etc/resolv.conf"], resolvedUpstreamPath: root + "/run/resolve/resolv.conf"))
        else {
            Issue.record("inotify_init1 failed")
            return
        }
        let quiet = watcher.drain()
        #expect(!quiet)
        // Both files' changes count, whichever spelling of the directory the watch was filed under.
        for name in ["resolv.conf", "stub-resolv.conf", "resolv.conf"] {
            try "nameserver 192.0.2.54\n".write(
                toFile: root + "/run/resolve/" + name, atomically: false, encoding: .utf8)
            // The close that raises IN_CLOSE_WRITE can be delayed: a process spawned by another
            // test at that moment holds a copy of the descriptor until it execs. Wait for it.
            let seen = drainWhenReadable(watcher)
            #expect(seen, "a write to \(name)")
        }
    }
}

@Suite("ResolvConf: parsing text", .offPool)
struct ResolvConfTextTests {
    private func parse(_ text: String) -> [IPAddress] { ResolvConf.nameservers(in: Substring(text)) }

    @Test func nameserversInFileOrder() {
        #expect(parse("nameserver 192.0.2.53\nnameserver 2001:db8::53\n") == [ip("192.0.2.53"), ip("2001:db8::53")])
    }

    @Test func commentedLinesAreSkipped() {
        #expect(
            parse(
                """
                # nameserver 192.0.2.1
                ; nameserver 192.0.2.2
                #nameserver 192.0.2.3
                nameserver 192.0.2.53
                """) == [ip("192.0.2.53")])
    }

    @Test func tabsSeparateFields() {
        #expect(parse("nameserver\t192.0.2.53\n") == [ip("192.0.2.53")])
    }

    @Test func trailingTextAfterABlankIsIgnoredButNotGluedToTheAddress() {
        #expect(parse("nameserver 192.0.2.53 # office\n") == [ip("192.0.2.53")])
        #expect(parse("nameserver 192.0.2.53#office\nnameserver 192.0.2.54;x\n").isEmpty)
    }

    @Test func aLineMustStartWithTheKeyword() {
        #expect(parse(" nameserver 192.0.2.1\n\tnameserver 192.0.2.2\nnameserver1.2.3.4\n").isEmpty)
    }

    @Test func ipv4IsReadAsInetAtonReadsIt() {
        #expect(
            parse("nameserver 127.1\nnameserver 0x7f.0.0.2\nnameserver 2130706435\n")
                == [ip("127.0.0.1"), ip("127.0.0.2"), ip("127.0.0.3")])
        #expect(parse("nameserver 010.0.0.1\n") == [ip("8.0.0.1")])
    }

    @Test func onlyTheFirstThreeCountDuplicatesIncluded() {
        #expect(
            ResolvConf.configuredNameservers(
                in: "nameserver 192.0.2.1\nnameserver 192.0.2.1\nnameserver 192.0.2.1\nnameserver 192.0.2.9\n")
                == [ip("192.0.2.1"), ip("192.0.2.1"), ip("192.0.2.1")])
        #expect(
            parse("nameserver 192.0.2.1\nnameserver 192.0.2.1\nnameserver 192.0.2.1\nnameserver 192.0.2.9\n") == [
                ip("192.0.2.1")
            ])
    }

    @Test func anyZoneIsAcceptedAndDropped() {
        #expect(
            parse("nameserver fe80::1%lo\nnameserver fe80::2%7\nnameserver fe80::3%no-such-if0\n")
                == [ip("fe80::1"), ip("fe80::2"), ip("fe80::3")])
        #expect(parse("nameserver fe80::4%\n") == [ip("fe80::4")])
    }

    @Test func ipv6ZoneIsDropped() {
        #expect(parse("nameserver fe80::53%lo\n") == [ip("fe80::53")])
    }

    @Test func duplicatesAreKeptOnce() {
        #expect(
            parse("nameserver 192.0.2.53\nnameserver 198.51.100.53\nnameserver 192.0.2.53\n")
                == [ip("192.0.2.53"), ip("198.51.100.53")])
    }

    @Test func otherDirectivesAndGarbageLinesAreSkipped() {
        #expect(
            parse(
                """
                search example.com
                options edns0 trust-ad
                this is not a resolv.conf line
                nameserverr 192.0.2.1
                NAMESERVER 192.0.2.2
                nameserver 203.0.113.53
                """) == [ip("203.0.113.53")])
    }

    @Test func nameserverWithoutAddressIsSkipped() {
        #expect(parse("nameserver\nnameserver   \nnameserver 192.0.2.53\n") == [ip("192.0.2.53")])
    }

    @Test func invalidAddressIsSkipped() {
        #expect(
            parse(
                "nameserver 192.0.2.256\nnameserver dns.example.com\nnameserver 2001:db8:::1\nnameserver 192.0.2.53\n")
                == [ip("192.0.2.53")])
    }

    @Test func aCarriageReturnIsPartOfTheAddressAsInGlibc() {
        // glibc ends lines at "\n" only and wants the address exact: a CRLF file has no nameserver
        // for it (it falls back on 127.0.0.1), so none for us either.
        #expect(parse("nameserver 192.0.2.53\rnameserver 198.51.100.53\r").isEmpty)
        #expect(parse("nameserver 192.0.2.53\r\nnameserver 2001:db8::53\r\n").isEmpty)
        #expect(parse("nameserver 192.0.2.1\u{0B}x\n").isEmpty)
    }

    @Test func emptyTextHasNoNameservers() {
        #expect(parse("").isEmpty)
    }
}

/// The parser against glibc itself: each text is bind-mounted over /etc/resolv.conf in a private
/// mount namespace (`unshare -m`; the machine's own file is never touched) and a script asks
/// `res_ninit` what it kept.
@Suite("ResolvConf: the same nameservers as glibc", .offPool, .needsNamespaceRoot)
struct ResolvConfGlibcDifferentialTests {
    static let texts = [
        "nameserver 192.0.2.53\n", " nameserver 192.0.2.1\nnameserver 192.0.2.53\n", "nameserver 192.0.2.53#x\n",
        "nameserver 192.0.2.53 #x\n", "nameserver 192.0.2.53;x\n",
        "nameserver 192.0.2.53\r\nnameserver 2001:db8::1\r\n",
        "nameserver 127.1\nnameserver 0x7f.0.0.2\nnameserver 2130706435\n", "nameserver 1.2.3\n",
        "nameserver 192.0.2.1\nnameserver 192.0.2.2\nnameserver 192.0.2.3\nnameserver 192.0.2.4\n",
        "nameserver fe80::1%lo\nnameserver 2001:db8::53\n", "nameserver fe80::1%no-such-if0\nnameserver 192.0.2.1\n",
        "nameserver fe80::1%1\n", "nameserver fe80::1%\n", "nameserver1.2.3.4\n", "", "#nameserver 192.0.2.1\n;x\n",
        "nameserver 192.0.2.256\nnameserver 010.0.0.1\n", "nameserver 192.0.2.53\rnameserver 198.51.100.53\r",
        "nameserver 192.0.2.1\nnameserver 192.0.2.1\nnameserver 192.0.2.1\nnameserver 192.0.2.9\n",
        "nameserver\t\t192.0.2.1\t# c\n", "nameserver 192.0.2.1\u{0B}x\n",
        "search a b\noptions ndots:2\nnameserver 192.0.2.7\n",
        "nameserver 2001:db8::53\nnameserver fe80::1%no-such-if0\nnameserver 192.0.2.1\n",
    ]

    @Test(arguments: texts)
    func theParserKeepsWhatGlibcKeeps(_ text: String) async throws {
        let directory = NSTemporaryDirectory() + "netreach-glibc-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/resolv.conf"
        try text.write(toFile: file, atomically: false, encoding: .utf8)
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
            "Fixtures/glibc_nameservers.py"
        ).path
        let output = try await LabCommand.run(
            "/usr/bin/unshare",
            ["-m", "sh", "-c", "mount --bind \"$0\" /etc/resolv.conf && exec python3 \"$1\"", file, script])
        let glibc = output.split(separator: "\n").map(String.init)
        let ours = ResolvConf.configuredNameservers(in: Substring(text))
        // With no valid line glibc falls back on 127.0.0.1; we report no nameserver instead.
        let expected =
            ours.isEmpty
            ? ["count 1", "127.0.0.1"]
            : ["count \(ours.count)"] + ours.map { $0.family == .ipv4 ? $0.description : "ipv6" }
        #expect(glibc == expected, "text \(text.debugDescription): ours \(ours)")
    }
}

@Suite("ResolvConf: reading files", .offPool)
struct ResolvConfFileTests {
    @Test func readsAFile() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let file = try directory.write("search example.com\nnameserver 192.0.2.53\n", to: "resolv.conf")
        #expect(ResolvConf.nameservers(atPath: file) == [ip("192.0.2.53")])
    }

    @Test func binaryGarbageAroundAValidLineIsSkipped() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let garbage: [UInt8] = [0xff, 0xfe, 0x00, 0xc3, 0x28, 0x80, 0x0a, 0xe2, 0x82, 0x0a]
        let file = try directory.write(garbage + Array("nameserver 192.0.2.53\n".utf8) + garbage, to: "resolv.conf")
        #expect(ResolvConf.nameservers(atPath: file) == [ip("192.0.2.53")])
    }

    @Test func binaryGarbageInsideTheAddressIsRejected() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let file = try directory.write(
            Array("nameserver 192.0.2.53".utf8) + [0xff, 0x00] + Array("\n".utf8), to: "resolv.conf")
        #expect(ResolvConf.nameservers(atPath: file).isEmpty)
    }

    @Test func emptyFileHasNoNameservers() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let file = try directory.write([UInt8](), to: "resolv.conf")
        #expect(ResolvConf.nameservers(atPath: file).isEmpty)
    }

    @Test func missingFileHasNoNameservers() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        #expect(ResolvConf.nameservers(atPath: "\(directory.path)/resolv.conf").isEmpty)
    }

    @Test func directoryHasNoNameservers() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        #expect(ResolvConf.nameservers(atPath: directory.path).isEmpty)
    }

    @Test func onlyTheFirst64KiBOfAHugeFileAreRead() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        // 1 MiB: a nameserver at the start, comment padding, another nameserver past 64 KiB.
        var text = "nameserver 192.0.2.53\n"
        let padding = "# " + String(repeating: "x", count: 1021) + "\n" // 1 KiB a line
        while text.utf8.count < 1 << 20 { text += padding }
        text += "nameserver 198.51.100.53\n"
        let file = try directory.write(text, to: "resolv.conf")

        // The nameserver past 64 KiB is not seen: proof the rest of the file was not read.
        #expect(ResolvConf.nameservers(atPath: file) == [ip("192.0.2.53")])
    }

    @Test func fifoDoesNotBlock() throws {
        // A FIFO with no writer: reading must not wait for one.
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = "\(directory.path)/resolv.conf"
        try #require(mkfifo(path, 0o600) == 0)
        #expect(ResolvConf.nameservers(atPath: path).isEmpty)
    }
}

@Suite("SysfsReader")
struct SysfsReaderTests {
    @Test func devtypeWlanFromUevent() throws {
        let root = try TemporaryDirectory()
        defer { root.remove() }
        try root.write("INTERFACE=wlan0\nIFINDEX=3\nDEVTYPE=wlan\n", to: "wlan0/uevent")
        let facts = SysfsReader(root: root.path).facts(forInterface: "wlan0")
        #expect(facts.deviceType == "wlan")
        #expect(facts.isWireless == false)
    }

    @Test func devtypeWwanFromUevent() throws {
        let root = try TemporaryDirectory()
        defer { root.remove() }
        try root.write("DEVTYPE=wwan\nINTERFACE=wwan0\nIFINDEX=5\n", to: "wwan0/uevent")
        #expect(SysfsReader(root: root.path).facts(forInterface: "wwan0").deviceType == "wwan")
    }

    @Test func wirelessSubdirectoryMarksWireless() throws {
        let root = try TemporaryDirectory()
        defer { root.remove() }
        try root.write("INTERFACE=wlp2s0\nIFINDEX=3\n", to: "wlp2s0/uevent")
        try FileManager.default.createDirectory(
            atPath: "\(root.path)/wlp2s0/wireless", withIntermediateDirectories: true)
        let facts = SysfsReader(root: root.path).facts(forInterface: "wlp2s0")
        #expect(facts.deviceType == nil)
        #expect(facts.isWireless)
    }

    @Test func phy80211LinkMarksWireless() throws {
        let root = try TemporaryDirectory()
        defer { root.remove() }
        try root.write("INTERFACE=wlan0\n", to: "wlan0/uevent")
        try FileManager.default.createDirectory(atPath: "\(root.path)/phy0", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(
            atPath: "\(root.path)/wlan0/phy80211", withDestinationPath: "../phy0")
        #expect(SysfsReader(root: root.path).facts(forInterface: "wlan0").isWireless)
    }

    @Test func plainEthernetHasNoFacts() throws {
        let root = try TemporaryDirectory()
        defer { root.remove() }
        try root.write("INTERFACE=eth0\nIFINDEX=2\n", to: "eth0/uevent")
        let facts = SysfsReader(root: root.path).facts(forInterface: "eth0")
        #expect(facts.deviceType == nil)
        #expect(facts.isWireless == false)
    }

    @Test func missingInterfaceDirectoryHasNoFacts() throws {
        let root = try TemporaryDirectory()
        defer { root.remove() }
        let facts = SysfsReader(root: root.path).facts(forInterface: "eth9")
        #expect(facts.deviceType == nil)
        #expect(facts.isWireless == false)
    }

    @Test func unreadableRootHasNoFacts() {
        let facts = SysfsReader(root: "/nonexistent/netreach/sys/class/net").facts(forInterface: "wlan0")
        #expect(facts.deviceType == nil)
        #expect(facts.isWireless == false)
    }

    @Test(arguments: ["../wlan0", "wlan0/..", "a/b", "..", ".", ""])
    func namesThatLeaveTheRootAreRejected(name: String) throws {
        // A fixture that would answer "wlan" if the reader followed the name out of its root.
        let base = try TemporaryDirectory()
        defer { base.remove() }
        try base.write("DEVTYPE=wlan\n", to: "wlan0/uevent")
        try base.write("DEVTYPE=wlan\n", to: "root/a/b/uevent")
        try base.write("DEVTYPE=wlan\n", to: "root/uevent")
        try base.write("DEVTYPE=wlan\n", to: "uevent")
        try FileManager.default.createDirectory(atPath: "\(base.path)/root/wireless", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: "\(base.path)/wireless", withIntermediateDirectories: true)
        let facts = SysfsReader(root: "\(base.path)/root").facts(forInterface: name)
        #expect(facts.deviceType == nil)
        #expect(facts.isWireless == false)
    }
}
#endif
