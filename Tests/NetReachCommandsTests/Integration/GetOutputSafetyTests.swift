#if os(Linux)
import Foundation
import NetReachTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Where `netreach get -o` writes, against nginx on 127.0.0.1 and beside curl: `-o -` is standard
/// output, and a link planted in a sticky, world-writable directory by another user is not
/// followed. Three users take part, as in /tmp: the directory's owner, the link's owner and the
/// one who runs `get` (each its own uid, through setpriv).
@Suite(
    "netreach get -o: standard output and someone else's links (integration)", .offPool, .serialized,
    .needsNamespaceRoot, .timeLimit(.minutes(3)))
struct GetOutputSafetyTests {
    static let directoryOwner: UInt32 = 4201
    static let linkOwner: UInt32 = 4202
    static let runner: UInt32 = 4203

    @Test func dashIsStandardOutputAsWithCurl() async throws {
        try await offPool {
            let nginx = try Nginx.start()
            defer { nginx.stop() }
            let directory = nginx.scratch + "/cwd"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            let ours = try ChildProcess.runBlocking(
                netreachPath(), ["get", "-q", "-o", "-", nginx.url("/small.bin")], directory: directory,
                timeout: .seconds(60))
            #expect(ours.status == 0, "\(ours.standardError)")
            let curl = try ChildProcess.runBlocking(
                "/usr/bin/curl", ["-sS", "-o", "-", nginx.url("/small.bin")], directory: directory,
                timeout: .seconds(60))
            #expect(curl.status == 0, "\(curl.standardError)")
            #expect(ours.output == curl.output)
            #expect(ours.output.count == Nginx.smallSize)
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory).isEmpty, "a file named '-'")

            // `./-` is still a file of that name, for whoever wants one.
            let named = try ChildProcess.runBlocking(
                netreachPath(), ["get", "-q", "-o", "./-", nginx.url("/small.bin")], directory: directory,
                timeout: .seconds(60))
            #expect(named.status == 0, "\(named.standardError)")
            #expect(FileManager.default.contents(atPath: directory + "/-") == curl.output)
            // And --continue has no file to resume on standard output.
            let resume = try ChildProcess.runBlocking(
                netreachPath(), ["get", "-o", "-", "--continue", nginx.url("/small.bin")], timeout: .seconds(60))
            #expect(resume.status == 64 && resume.standardError.contains("--continue needs --output FILE"))
        }
    }

    @Test func aLinkPlantedInAStickyDirectoryIsNotFollowed() async throws {
        try await offPool {
            let nginx = try Nginx.start()
            defer { nginx.stop() }
            // A world-readable place for the three users: /tmp/…/shared (1777, the directory
            // owner's), and the runner's own file the planted link points at.
            let base = nginx.scratch + "/users"
            let shared = base + "/shared"
            try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: true)
            #expect(chmod(nginx.scratch, 0o755) == 0 && chmod(base, 0o755) == 0)
            #expect(chown(shared, Self.directoryOwner, Self.directoryOwner) == 0 && chmod(shared, 0o1777) == 0)
            // In a directory of the runner's: the new file is made beside it and renamed over it.
            let home = base + "/runner"
            try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
            #expect(chown(home, Self.runner, Self.runner) == 0)
            let victim = home + "/file"
            try Data("the runner's own file".utf8).write(to: URL(fileURLWithPath: victim))
            #expect(chown(victim, Self.runner, Self.runner) == 0)
            let link = shared + "/download.bin"
            #expect(symlink(victim, link) == 0 && lchown(link, Self.linkOwner, Self.linkOwner) == 0)

            let ours = try Self.asRunner([netreachPath(), "get", "-q", "-o", link, nginx.url("/small.bin")])
            #expect(ours.status == 23, "curl's 'could not write': \(ours.status) \(ours.standardError)")
            #expect(ours.standardError.contains("symbolic link of user \(Self.linkOwner)"), "\(ours.standardError)")
            #expect(ours.standardError.contains("not followed"), "\(ours.standardError)")
            #expect(
                String(decoding: FileManager.default.contents(atPath: victim) ?? Data(), as: UTF8.self)
                    == "the runner's own file")

            // A link of the runner's own, or of the directory's owner, is followed: the kernel's rule.
            for owner in [Self.runner, Self.directoryOwner] {
                #expect(lchown(link, owner, owner) == 0)
                #expect(chown(victim, Self.runner, Self.runner) == 0)
                let followed = try Self.asRunner([netreachPath(), "get", "-q", "-o", link, nginx.url("/small.bin")])
                #expect(followed.status == 0, "link of \(owner): \(followed.standardError)")
                #expect(FileManager.default.contents(atPath: victim)?.count == Nginx.smallSize)
                try Data("the runner's own file".utf8).write(to: URL(fileURLWithPath: victim))
            }

            // curl follows the link unless the kernel's fs.protected_symlinks stops it: the same
            // rule, which the kernel applies only when it is on.
            #expect(lchown(link, Self.linkOwner, Self.linkOwner) == 0)
            let curl = try Self.asRunner(["/usr/bin/curl", "-sS", "-o", link, nginx.url("/small.bin")])
            let protected = (try? String(contentsOfFile: "/proc/sys/fs/protected_symlinks", encoding: .utf8))?
                .trimmingCharacters(in: .whitespacesAndNewlines)
            if protected == "0" {
                #expect(curl.status == 0, "\(curl.standardError)")
            } else {
                #expect(curl.status == 23, "the kernel refuses the link to curl too: \(curl.standardError)")
            }
        }
    }

    /// Runs `command` as ``runner``, with no supplementary groups and no capabilities.
    private static func asRunner(_ command: [String]) throws -> ChildProcess.Finished {
        try ChildProcess.runBlocking(
            "/usr/bin/setpriv",
            ["--reuid", "\(runner)", "--regid", "\(runner)", "--clear-groups", "--inh-caps=-all", "--"] + command,
            directory: "/", timeout: .seconds(60))
    }
}
#endif
