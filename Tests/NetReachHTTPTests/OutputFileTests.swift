import Foundation
import NetReachHTTP
import NetReachTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif
#if os(Linux)
import CNetReachLinux // SOCK_STREAM: Glibc alone does not make it visible here
#endif

/// What `netreach get -o FILE` does to FILE: a regular file is replaced only when the body is
/// complete, keeping its owner and mode; links are followed; devices and pipes are written in
/// place and never replaced. All on the real file system; device nodes only in a private mount
/// namespace (``PrivateDevices``), never the machine's `/dev`.
@Suite("OutputFile: -o never leaves a half-written file and never replaces a device", .offPool)
struct OutputFileTests {
    // MARK: Regular files

    @Test func aNewFileAppearsOnlyAtCommit() throws {
        let scratch = try Scratch()
        let target = scratch.path + "/new.bin"
        let file = try OutputFile.open(target)
        #expect(file.destination == .replacing(final: target, partial: target + ".part"))

        try file.write(Array("hello ".utf8))
        try file.write(Array("big world".utf8)[4...]) // an ArraySlice
        #expect(!exists(target))
        #expect(contents(target + ".part") == "hello world")
        #expect(file.written == 11)
        #expect(file.resumeOffset == 0)

        try file.commit()
        #expect(contents(target) == "hello world")
        #expect(!exists(target + ".part"))
    }

    @Test func anExistingFileKeepsItsContentAndInodeUntilCommit() throws {
        let scratch = try Scratch()
        let target = try scratch.file("page.html", "old")
        let oldInode = try #require(status(target)).st_ino

        let file = try OutputFile.open(target)
        try file.write(Data("new content".utf8))
        #expect(contents(target) == "old")
        #expect(status(target)?.st_ino == oldInode)

        try file.commit()
        #expect(contents(target) == "new content")
        #expect(status(target)?.st_ino != oldInode)
    }

    @Test(.needsRootForOutputFile) func replacingKeepsTheOldFilesOwnerGroupAndMode() throws {
        let scratch = try Scratch()
        let target = try scratch.file("secret", "old")
        #expect(chown(target, 1234, 5678) == 0)
        #expect(chmod(target, 0o600) == 0)

        let file = try OutputFile.open(target)
        try file.write(Array("new".utf8))
        try file.commit()

        let replaced = try #require(status(target))
        #expect(contents(target) == "new")
        #expect(replaced.st_uid == 1234)
        #expect(replaced.st_gid == 5678)
        #expect(replaced.st_mode & 0o7777 == 0o600)
    }

    @Test func aNewFileGetsMode0666LessTheUmask() throws {
        let scratch = try Scratch()
        let target = scratch.path + "/fresh"
        // 027 rather than the usual 022, so a hard-wired 0644 would fail. umask is per process:
        // set only around the open (which creates the file), the rest of the tests never see it.
        let previous = umask(0o027)
        let opened = Result { () throws(OutputFileError) in try OutputFile.open(target) }
        umask(previous)
        let file = try opened.get()
        try file.write(Array("x".utf8))
        try file.commit()

        let created = try #require(status(target))
        #expect(created.st_mode & 0o7777 == 0o640)
        #expect(created.st_uid == geteuid())
    }

    // MARK: Symbolic links

    @Test func aRelativeLinkIsFollowedAndKept() throws {
        let scratch = try Scratch()
        try scratch.directory("data")
        try scratch.directory("links")
        let real = try scratch.file("data/real", "old")
        let link = scratch.path + "/links/link"
        #expect(symlink("../data/real", link) == 0)

        let file = try OutputFile.open(link)
        // The name the kernel reached, not the link's text joined by hand.
        let reached = try #require(realPath(real))
        #expect(file.destination == .replacing(final: reached, partial: reached + ".part"))
        try file.write(Array("new".utf8))
        #expect(exists(real + ".part"))
        #expect(!exists(link + ".part"))
        try file.commit()

        #expect(contents(real) == "new")
        #expect(linkText(link) == "../data/real")
        #expect(!exists(real + ".part"))
    }

    @Test func anAbsoluteLinkIsFollowedAndKept() throws {
        let scratch = try Scratch()
        try scratch.directory("data")
        let real = try scratch.file("data/real", "old")
        let link = scratch.path + "/link"
        #expect(symlink(real, link) == 0)

        let file = try OutputFile.open(link)
        try file.write(Array("new".utf8))
        try file.commit()

        #expect(contents(real) == "new")
        #expect(linkText(link) == real)
    }

    @Test func aDanglingLinkCreatesItsTarget() throws {
        let scratch = try Scratch()
        try scratch.directory("data")
        let link = scratch.path + "/link"
        #expect(symlink("data/missing", link) == 0)

        let file = try OutputFile.open(link)
        try file.write(Array("created".utf8))
        try file.commit()

        #expect(contents(scratch.path + "/data/missing") == "created")
        #expect(linkText(link) == "data/missing")
    }

    @Test func aDanglingLinkLeavesNothingWhenTheDownloadFails() throws {
        let scratch = try Scratch()
        try scratch.directory("data")
        let link = scratch.path + "/link"
        #expect(symlink("data/missing", link) == 0)

        let file = try OutputFile.open(link)
        try file.write(Array("half".utf8))
        file.abandon()

        #expect(!exists(scratch.path + "/data/missing"))
        #expect(!exists(scratch.path + "/data/missing.part"))
        #expect(linkText(link) == "data/missing")
    }

    @Test func aLoopOfLinksIsTheKernelsELOOP() throws {
        let scratch = try Scratch()
        let link = scratch.path + "/a"
        #expect(symlink("b", link) == 0)
        #expect(symlink("a", scratch.path + "/b") == 0)

        let error = #expect(throws: OutputFileError.self) { try OutputFile.open(link) }
        #expect(error?.errno == ELOOP)
    }

    // MARK: Someone else's names in a sticky, world-writable directory

    // Three users, as in /tmp: the directory's owner, whoever planted a name there, and the one
    // writing (root here, whom the kernel's protected_* rules do not exempt either).

    @Test(.needsRootForOutputFile) func aLinkPlantedByAnotherUserIsNotFollowed() throws {
        let shared = try StickyDirectory()
        let victim = try shared.scratch.file("victim", "precious")
        let link = shared.path + "/report.html"
        #expect(symlink(victim, link) == 0)
        #expect(lchown(link, StickyDirectory.planter, StickyDirectory.planter) == 0)

        let error = #expect(throws: OutputFileError.self) { try OutputFile.open(link) }
        #expect(
            error?.reason
                == .untrusted(file: link, isLink: true, owner: StickyDirectory.planter, directory: shared.path))
        #expect(error?.description.contains("not followed") == true)
        #expect(contents(victim) == "precious")
        #expect(!exists(victim + ".part"))
        #expect(!exists(link + ".part"))
    }

    @Test(.needsRootForOutputFile, arguments: [StickyDirectory.owner, 0])
    func aLinkOfTheDirectorysOwnerOrOfTheWriterIsFollowed(linkOwner: UInt32) throws {
        let shared = try StickyDirectory()
        let real = try shared.scratch.file("real", "old")
        let link = shared.path + "/report.html"
        #expect(symlink(real, link) == 0)
        #expect(lchown(link, linkOwner, linkOwner) == 0)

        let file = try OutputFile.open(link)
        try file.write(Array("new".utf8))
        try file.commit()
        #expect(contents(real) == "new")
    }

    @Test(.needsRootForOutputFile) func aFileOfAnotherUserIsNotReplaced() throws {
        let shared = try StickyDirectory()
        let planted = try shared.scratch.file("sticky/report.html", "theirs")
        #expect(chown(planted, StickyDirectory.planter, StickyDirectory.planter) == 0)

        let error = #expect(throws: OutputFileError.self) { try OutputFile.open(planted) }
        #expect(
            error?.reason
                == .untrusted(file: planted, isLink: false, owner: StickyDirectory.planter, directory: shared.path))
        // Replacing it would have handed the planter the new file: it keeps the old one's owner.
        #expect(status(planted)?.st_uid == StickyDirectory.planter)
        #expect(contents(planted) == "theirs")
    }

    @Test(.needsRootForOutputFile) func aLinkThatLeadsToAFileOfAnotherUserThereIsNotWritten() throws {
        let shared = try StickyDirectory()
        let planted = try shared.scratch.file("sticky/data", "theirs")
        #expect(chown(planted, StickyDirectory.planter, StickyDirectory.planter) == 0)
        let link = shared.scratch.path + "/mine"
        #expect(symlink(planted, link) == 0)

        let error = #expect(throws: OutputFileError.self) { try OutputFile.open(link) }
        #expect(
            error?.reason
                == .untrusted(file: planted, isLink: false, owner: StickyDirectory.planter, directory: shared.path))
        #expect(contents(planted) == "theirs")
    }

    @Test(.needsRootForOutputFile) func aFIFOOfAnotherUserIsNotOpened() throws {
        let shared = try StickyDirectory()
        let fifo = shared.path + "/pipe"
        #expect(mkfifo(fifo, 0o666) == 0)
        #expect(chown(fifo, StickyDirectory.planter, StickyDirectory.planter) == 0)

        // Opening would wait for a reader; refusing does not.
        let error = #expect(throws: OutputFileError.self) { try OutputFile.open(fifo) }
        #expect(
            error?.reason
                == .untrusted(file: fifo, isLink: false, owner: StickyDirectory.planter, directory: shared.path))
    }

    @Test(.needsRootForOutputFile) func theSameNamesOutsideAStickyDirectoryAreWritten() throws {
        let scratch = try Scratch()
        let theirs = try scratch.file("theirs", "old")
        #expect(chown(theirs, StickyDirectory.planter, StickyDirectory.planter) == 0)
        let link = scratch.path + "/link"
        #expect(symlink(theirs, link) == 0)
        #expect(lchown(link, StickyDirectory.planter, StickyDirectory.planter) == 0)

        let file = try OutputFile.open(link)
        try file.write(Array("new".utf8))
        try file.commit()
        #expect(contents(theirs) == "new")
        #expect(status(theirs)?.st_uid == StickyDirectory.planter)
    }

    // MARK: What cannot be written

    @Test func aDirectoryIsAnError() throws {
        let scratch = try Scratch()
        let error = #expect(throws: OutputFileError.self) { try OutputFile.open(scratch.path) }
        #expect(error?.reason == .isDirectory)
        #expect(error?.description == "'\(scratch.path)' is a directory")

        let slashed = #expect(throws: OutputFileError.self) { try OutputFile.open(scratch.path + "/not-yet/") }
        #expect(slashed?.reason == .isDirectory)
    }

    @Test func aMissingDirectoryIsAnErrorNamingIt() throws {
        let scratch = try Scratch()
        let target = scratch.path + "/nope/file"
        let error = #expect(throws: OutputFileError.self) { try OutputFile.open(target) }
        #expect(error?.reason == .system(.create, file: target + ".part", errno: ENOENT))
        #expect(error?.description.hasSuffix(": the directory '\(scratch.path)/nope' does not exist") == true)
    }

    @Test func aSocketIsAnError() throws {
        let scratch = try Scratch()
        let path = scratch.path + "/socket"
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        try #require(listener >= 0)
        defer { close(listener) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { bytes in
            for (index, byte) in path.utf8.enumerated() { bytes[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        try #require(bound == 0)

        let error = #expect(throws: OutputFileError.self) { try OutputFile.open(path) }
        #expect(error?.reason == .socket)
    }

    @Test func aSecondWriterOfTheSameFileIsBusy() throws {
        let scratch = try Scratch()
        let target = scratch.path + "/shared"
        let first = try OutputFile.open(target)
        let error = #expect(throws: OutputFileError.self) { try OutputFile.open(target, resume: true) }
        #expect(error?.reason == .busy(partial: target + ".part"))

        first.abandon()
        let second = try OutputFile.open(target)
        second.abandon()
    }

    // MARK: Abandoning and resuming

    @Test func abandonRemovesThePartialAndLeavesTheFinalFileAlone() throws {
        let scratch = try Scratch()
        let target = try scratch.file("kept", "old")
        let inode = status(target)?.st_ino

        let file = try OutputFile.open(target)
        try file.write(Array("half a bo".utf8))
        file.abandon()

        #expect(!exists(target + ".part"))
        #expect(contents(target) == "old")
        #expect(status(target)?.st_ino == inode)
        #expect(throws: OutputFileError.self) { try file.write(Array("more".utf8)) }
    }

    @Test func aFileDroppedWithoutCommitRemovesItsPartial() throws {
        let scratch = try Scratch()
        let target = scratch.path + "/dropped"
        func writeAndForget() throws {
            let file = try OutputFile.open(target)
            try file.write(Array("lost".utf8))
        }
        try writeAndForget()
        #expect(!exists(target + ".part"))
        #expect(!exists(target))
    }

    @Test func aKeptPartialIsResumedFromItsSize() throws {
        let scratch = try Scratch()
        let target = scratch.path + "/big.iso"
        let first = try OutputFile.open(target, resume: true)
        try first.write(Array("first ".utf8))
        first.abandon(keepPartial: true)
        #expect(contents(target + ".part") == "first ")
        #expect(!exists(target))

        let second = try OutputFile.open(target, resume: true)
        #expect(second.resumeOffset == 6)
        try second.write(Array("second".utf8))
        #expect(second.written == 6)
        try second.commit()
        #expect(contents(target) == "first second")
    }

    @Test func resumingFromTheFinalNameCopiesItAndLeavesItUntilCommit() throws {
        let scratch = try Scratch()
        let target = try scratch.file("curl-left-this", "abc")
        let inode = status(target)?.st_ino

        let file = try OutputFile.open(target, resume: true)
        #expect(file.resumeOffset == 3)
        #expect(contents(target + ".part") == "abc")
        try file.write(Array("def".utf8))
        #expect(contents(target) == "abc")
        #expect(status(target)?.st_ino == inode)

        try file.commit()
        #expect(contents(target) == "abcdef")
    }

    @Test func withoutResumeALeftoverPartialIsReplacedByANewFile() throws {
        let scratch = try Scratch()
        let target = scratch.path + "/again"
        let leftover = try scratch.file("again.part", "stale bytes")
        // A second name keeps the leftover's inode alive, so its number cannot be reused.
        let witness = scratch.path + "/witness"
        try #require(link(leftover, witness) == 0)

        let file = try OutputFile.open(target)
        #expect(file.resumeOffset == 0)
        #expect(status(leftover)?.st_ino != status(witness)?.st_ino)
        #expect(contents(leftover) == "")
        #expect(contents(witness) == "stale bytes") // unlinked, not truncated
        try file.write(Array("fresh".utf8))
        try file.commit()
        #expect(contents(target) == "fresh")
    }

    @Test func truncateForRestartStartsTheBodyAgain() throws {
        let scratch = try Scratch()
        let target = scratch.path + "/restarted"
        _ = try scratch.file("restarted.part", "0123")

        let file = try OutputFile.open(target, resume: true)
        #expect(file.resumeOffset == 4)
        try file.write(Array("45".utf8))
        // The server ignored Range and sends everything: start over.
        try file.truncateForRestart()
        #expect(file.resumeOffset == 0)
        #expect(file.written == 0)
        #expect(contents(target + ".part") == "")
        try file.write(Array("whole body".utf8))
        try file.commit()
        #expect(contents(target) == "whole body")
    }

    // MARK: Open files named through /proc (/dev/stdout)

    @Test func aProcReferenceToARegularFileAppendsInPlace() throws {
        let scratch = try Scratch()
        let target = scratch.path + "/redirected"
        // As `{ echo header; netreach get -o /dev/stdout; } > redirected` leaves standard output.
        let descriptor = open(target, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
        try #require(descriptor >= 0)
        defer { close(descriptor) }
        #expect(write(descriptor, "header\n", 7) == 7)
        let inode = status(target)?.st_ino

        let reference = "/proc/self/fd/\(descriptor)"
        let file = try OutputFile.open(reference, resume: true)
        #expect(file.destination == .inPlace(reference))
        #expect(file.resumeOffset == 0)
        try file.write(Array("body".utf8))
        try file.commit()

        #expect(contents(target) == "header\nbody")
        #expect(status(target)?.st_ino == inode)
        #expect(!exists(target + ".part"))
    }

    @Test func aProcReferenceToAPipeWritesThePipe() throws {
        var ends: [Int32] = [-1, -1]
        try #require(pipe(&ends) == 0)
        defer { close(ends[0]) }
        for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        // Read what is there without waiting for end of file: a child another test spawned before
        // FD_CLOEXEC was set may hold a copy of the write end.
        _ = fcntl(ends[0], F_SETFL, O_NONBLOCK)

        let reference = "/proc/self/fd/\(ends[1])"
        let file = try OutputFile.open(reference)
        #expect(file.destination == .inPlace(reference))
        try file.write(Array("through the pipe".utf8))
        try file.commit()
        close(ends[1])

        #expect(readAll(ends[0]) == "through the pipe")
    }

    // MARK: Devices and FIFOs (private mount namespace)

    @Test(.needsRootForOutputFile) func theNullDeviceStaysADevice() async throws {
        try await PrivateDevices.with { devices in
            let null = devices.path("null")
            let before = try #require(status(null))

            let file = try OutputFile.open(null)
            #expect(file.destination == .inPlace(null))
            let chunk = [UInt8](repeating: 0x5a, count: 64 * 1024)
            for _ in 0..<16 { try file.write(chunk) }
            #expect(file.written == 1 << 20)
            try file.commit()

            let after = try #require(status(null))
            #expect(after.st_mode & S_IFMT == S_IFCHR)
            #expect(after.st_ino == before.st_ino)
            #expect(after.st_rdev == before.st_rdev)
            #expect(after.st_rdev == deviceNumber(major: 1, minor: 3))
            #expect(!exists(null + ".part"))
        }
    }

    @Test(.needsRootForOutputFile) func theFullDeviceIsATypedNoSpaceError() async throws {
        try await PrivateDevices.with { devices in
            let full = devices.path("full")
            let file = try OutputFile.open(full)
            let error = #expect(throws: OutputFileError.self) { try file.write(Array("lost".utf8)) }
            #expect(error?.reason == .system(.write, file: full, errno: ENOSPC))
            #expect(error?.errno == ENOSPC)
            #expect(error?.description == "'\(full)': No space left on device (errno 28)")
            // Once a write failed, commit refuses too.
            #expect(throws: OutputFileError.self) { try file.commit() }
            file.abandon()

            #expect((status(full)?.st_mode ?? 0) & S_IFMT == S_IFCHR)
            #expect(status(full)?.st_rdev == deviceNumber(major: 1, minor: 7))
            #expect(!exists(full + ".part"))
        }
    }

    @Test(.needsRootForOutputFile) func aFIFOReceivesTheBytesInPlace() async throws {
        try await PrivateDevices.with { devices in
            let fifo = devices.path("fifo")
            // The reader first (non-blocking, so neither open waits for the other); the bytes fit
            // in the pipe's buffer, so they are read after the writer has closed.
            let reader = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
            try #require(reader >= 0)
            defer { close(reader) }

            let file = try OutputFile.open(fifo)
            #expect(file.destination == .inPlace(fifo))
            try file.write(Array("through the fifo".utf8))
            try file.commit()

            #expect(readAll(reader) == "through the fifo")
            #expect((status(fifo)?.st_mode ?? 0) & S_IFMT == S_IFIFO)
            #expect(!exists(fifo + ".part"))
        }
    }

    @Test(.needsRootForOutputFile) func aDeviceCannotResumeOrRestart() async throws {
        try await PrivateDevices.with { devices in
            let null = devices.path("null")
            let file = try OutputFile.open(null, resume: true)
            #expect(file.resumeOffset == 0)
            try file.truncateForRestart() // nothing written yet: nothing to take back
            try file.write(Array("x".utf8))
            let error = #expect(throws: OutputFileError.self) { try file.truncateForRestart() }
            #expect(error?.reason == .cannotRestart)
            file.abandon()
        }
    }

    @Test(.needsRootForOutputFile) func aFullDiskNeverLeavesAHalfFileUnderTheFinalName() async throws {
        try await PrivateDevices.with { devices in
            let target = devices.path("small/data") // a 64 KiB tmpfs
            try Data("old".utf8).write(to: URL(fileURLWithPath: target))

            let file = try OutputFile.open(target)
            let chunk = [UInt8](repeating: 1, count: 256 * 1024)
            let error = #expect(throws: OutputFileError.self) { try file.write(chunk) }
            #expect(error?.reason == .system(.write, file: target + ".part", errno: ENOSPC))
            #expect(throws: OutputFileError.self) { try file.commit() }
            #expect(contents(target) == "old")
            file.abandon()
            #expect(!exists(target + ".part"))
        }
    }

    @Test(.needsRootForOutputFile) func aReadOnlyFileSystemIsATypedError() async throws {
        try await PrivateDevices.with { devices in
            let target = devices.path("readonly/data")
            let error = #expect(throws: OutputFileError.self) { try OutputFile.open(target) }
            #expect(error?.reason == .system(.create, file: target + ".part", errno: EROFS))
            #expect(error?.description.contains("Read-only file system") == true)

            // A file that could not be written in place is not replaced by a rename either.
            let existing = devices.path("readonly/existing")
            let refused = #expect(throws: OutputFileError.self) { try OutputFile.open(existing) }
            #expect(refused?.reason == .system(.open, file: existing, errno: EROFS))
            #expect(contents(existing) == "old\n")
        }
    }
}

// MARK: - Support

extension Trait where Self == ConditionTrait {
    /// Needs root (chown, mount): skipped without it, but run (and failing) when `CI=true`, where a
    /// skip would hide a broken test.
    static var needsRootForOutputFile: Self {
        .enabled(
            if: NamespaceTestGate.shouldRun,
            "needs root to chown files and mount a private tmpfs with device nodes; run as root or with CI=true")
    }
}

/// A tmpfs holding `null` and `full` device nodes, a FIFO, a 64 KiB file system (`small/`) and a
/// read-only one (`readonly/`, holding `existing`), mounted in a private mount namespace that `unshare -m` creates and
/// a `sleep` keeps alive. The test process, multi-threaded and so unable to enter it, reaches it
/// through `/proc/PID/root`: the machine's own `/dev` and mounts are never touched.
struct PrivateDevices {
    /// The `sleep` holding the namespace.
    let pid: pid_t
    /// The mount point: an empty directory outside, the tmpfs inside.
    let mountPoint: String

    /// `name` inside the tmpfs, as the test process reaches it.
    func path(_ name: String) -> String { "/proc/\(pid)/root\(mountPoint)/\(name)" }

    /// Runs `body` with a fresh namespace, and ends the namespace afterwards (the `sleep` is killed;
    /// it would end by itself after 60 s).
    static func with(_ body: (PrivateDevices) async throws -> Void) async throws {
        let scratch = try Scratch()
        let script = """
            set -e
            mount -t tmpfs -o mode=0755 none "$0"
            mknod "$0/null" c 1 3
            mknod "$0/full" c 1 7
            mkfifo "$0/fifo"
            mkdir "$0/small" "$0/readonly"
            mount -t tmpfs -o size=64k none "$0/small"
            mount -t tmpfs none "$0/readonly"
            echo old > "$0/readonly/existing"
            mount -o remount,ro "$0/readonly"
            touch "$0/ready"
            exec sleep 60
            """
        let process = try ChildProcess(
            "/usr/bin/unshare", ["-m", "--propagation", "private", "sh", "-c", script, scratch.path],
            output: .null)
        let devices = PrivateDevices(pid: process.pid, mountPoint: scratch.path)
        defer {
            process.kill()
            _ = process.waitBlocking(timeout: .seconds(10))
            // Only now may the mount point go: removing it earlier would detach the tmpfs inside.
            withExtendedLifetime(scratch) {}
        }
        let deadline = ContinuousClock.now + .seconds(30)
        while !exists(devices.path("ready")) {
            guard process.isRunning, ContinuousClock.now < deadline else {
                throw PrivateDevicesError(
                    description: "the private mount namespace did not start: \(process.standardError)")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        // Not the machine's file system: the node lives on the namespace's tmpfs, another device
        // than the empty directory it covers outside.
        #expect(status(devices.path("null"))?.st_dev != status(scratch.path)?.st_dev)
        try await body(devices)
    }
}

struct PrivateDevicesError: Error, CustomStringConvertible {
    var description: String
}

/// `sticky/` in a scratch directory, made like /tmp: mode 1777, owned by ``owner``.
struct StickyDirectory {
    /// The directory's owner.
    static let owner: UInt32 = 4101
    /// Another user, who plants names in it.
    static let planter: UInt32 = 4102

    let scratch: Scratch
    var path: String { scratch.path + "/sticky" }

    init() throws {
        scratch = try Scratch()
        try scratch.directory("sticky")
        guard chown(path, Self.owner, Self.owner) == 0, chmod(path, 0o1777) == 0 else {
            throw PrivateDevicesError(description: "cannot make \(path) sticky: errno \(errno)")
        }
    }
}

/// The canonical path of `path`, as the kernel resolves it.
func realPath(_ path: String) -> String? {
    guard let resolved = realpath(path, nil) else { return nil }
    defer { free(resolved) }
    return String(cString: resolved)
}

/// A directory of its own under /tmp, removed with everything in it when dropped.
final class Scratch {
    let path: String

    init() throws {
        var template = Array("/tmp/netreach-output-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw PrivateDevicesError(description: "mkdtemp failed") }
        path = String(cString: made)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    /// Writes `text` to `name` inside; returns its path.
    @discardableResult
    func file(_ name: String, _ text: String) throws -> String {
        let file = path + "/" + name
        try Data(text.utf8).write(to: URL(fileURLWithPath: file))
        return file
    }

    /// Makes the directory `name` inside.
    func directory(_ name: String) throws {
        try FileManager.default.createDirectory(atPath: path + "/" + name, withIntermediateDirectories: true)
    }
}

/// lstat(2): what `path` itself is (not what a link leads to); nil if nothing.
private func status(_ path: String) -> stat? {
    var info = stat()
    return lstat(path, &info) == 0 ? info : nil
}

private func exists(_ path: String) -> Bool { status(path) != nil }

/// makedev(3), which Swift's Glibc module lacks: Linux's encoding of a device number.
private func deviceNumber(major: dev_t, minor: dev_t) -> dev_t {
    (minor & 0xff) | ((major & 0xfff) << 8) | ((minor & ~0xff) << 12) | ((major & ~0xfff) << 32)
}

private func contents(_ path: String) -> String? {
    FileManager.default.contents(atPath: path).map { String(decoding: $0, as: UTF8.self) }
}

private func linkText(_ path: String) -> String? {
    try? FileManager.default.destinationOfSymbolicLink(atPath: path)
}

/// Everything readable from `descriptor` now (until EOF, or until a non-blocking one is empty).
private func readAll(_ descriptor: Int32) -> String {
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
        let count = read(descriptor, &buffer, buffer.count)
        if count <= 0 { break }
        bytes += buffer[..<count]
    }
    return String(decoding: bytes, as: UTF8.self)
}
