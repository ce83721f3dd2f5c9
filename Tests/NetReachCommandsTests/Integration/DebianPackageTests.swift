import Foundation
import NetReachTestSupport
import Testing

/// The Debian package `scripts/build-deb.sh` makes, checked by lintian and by dpkg itself: clean,
/// with the executable, netreach(1), the units and the examples where Debian puts them.
///
/// Of the static release executable when one is built (scripts/build-release.sh); otherwise (CI,
/// where a release build would take 11 minutes more) of the debug executable with
/// `--toolchain-binary`, whose one difference lintian sees is the toolchain's RUNPATH: that tag
/// alone is suppressed then.
@Suite(
    "The Debian package (lintian)", .offPool,
    .enabled(
        if: ExternalServer.available("lintian", "patchelf", "dpkg-deb")))
struct DebianPackageTests {
    static let root = ReleaseBuild.root
    static let releaseBinary = ReleaseBuild.binary

    /// build-deb.sh compresses the package (a debug binary is some hundred megabytes) and lintian
    /// reads all of it: minutes on two busy cores, so their waits are backstops of 15 minutes.
    @Test func theDebianPackageIsLintianCleanAndHasEverythingInPlace() async throws {
        let output = try TemporaryDirectory("netreach-deb")
        defer { output.remove() }
        let release = ReleaseBuild.isBuilt
        let binary = release ? Self.releaseBinary.path : try NetreachProcess.executable().path
        let built = try await ChildProcess.run(
            "/bin/bash",
            [
                Self.root.appendingPathComponent("scripts/build-deb.sh").path, "--binary", binary, "--output",
                output.url.path,
            ]
                + (release ? [] : ["--toolchain-binary"]),
            timeout: .seconds(900))
        try #require(built.status == 0, "\(built.standardError)")
        let deb = built.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)

        // The size report names the file's real size and the executable's as packaged.
        let debBytes = try #require(
            (try FileManager.default.attributesOfItem(atPath: deb)[.size] as? NSNumber)?.intValue)
        let report = try #require(
            built.standardError.split(separator: "\n").last { $0.hasPrefix("build-deb.sh: size: ") },
            "\(built.standardError)")
        #expect(report.contains(" \(debBytes) bytes;"), "\(report); the file has \(debBytes) bytes")
        let packaged = try await ChildProcess.run(
            "/bin/sh", ["-c", "dpkg-deb --fsys-tarfile \"$1\" | tar -xOf - ./usr/bin/netreach | wc -c", "sh", deb],
            timeout: .seconds(900))
        let executableBytes = packaged.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(
            report.hasSuffix("usr/bin/netreach \(executableBytes) bytes"), "\(report); packaged: \(executableBytes)")

        let lintian = try await ChildProcess.run(
            ExternalServer.require("lintian"),
            ["--tag-display-limit", "0"] + (release ? [] : ["--suppress-tags", "custom-library-search-path"]) + [deb],
            timeout: .seconds(900))
        #expect(lintian.status == 0, "\(lintian.standardOutput)")
        let tags = lintian.standardOutput.split(separator: "\n").filter { $0.hasPrefix("E:") || $0.hasPrefix("W:") }
        #expect(tags.isEmpty, "\(tags)")

        let contents = try await ChildProcess.run(ExternalServer.require("dpkg-deb"), ["--contents", deb])
        for path in [
            "./usr/bin/netreach", "./usr/share/man/man1/netreach.1.gz", "./lib/systemd/system/netreach.service",
            "./lib/systemd/system/netreach-wait-online.service",
            "./usr/share/doc/netreach/examples/netreach-rules.yml", "./usr/share/doc/netreach/examples/serve.yaml",
            "./usr/share/doc/netreach/examples/web.yml",
            "./usr/share/doc/netreach/copyright",
        ] {
            #expect(contents.standardOutput.contains(path), "\(path) missing: \(contents.standardOutput)")
        }
    }
}
