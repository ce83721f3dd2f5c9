import Dispatch
import Foundation
import NetReachTestSupport
import Testing

@testable import NetReach

#if canImport(Glibc)
import Glibc
#endif

/// `supportsDNS` follows resolv.conf through the inotify watch on its directory, including the
/// rename and symlink swaps resolvers make (LinuxPathSemantics.md, "DNS").
@Suite("resolv.conf changes (integration)", .offPool, .needsNamespaceRoot)
struct ResolvConfIntegrationTests {
    private static func startedMonitor(
        in lab: NetnsLab, resolvedUpstreamPath: String? = nil, nameserverWatchDelay: Duration? = nil,
        inotifyAvailable: Bool = true
    ) -> PathMonitor {
        var configuration = SystemPathSource.Configuration(namespace: lab.namespace, resolvConfPath: lab.resolvConfPath)
        configuration.resolvedUpstreamPath = resolvedUpstreamPath
        configuration.inotifyAvailable = inotifyAvailable
        if let nameserverWatchDelay { configuration.nameserverWatchDelay = nameserverWatchDelay }
        let source = SystemPathSource(configuration: configuration)
        let monitor = PathMonitor(source: source)
        monitor.start(queue: DispatchQueue(label: "resolv.conf"))
        return monitor
    }

    @Test func supportsDNSFollowsWritesRenamesAndSymlinkSwaps() async throws {
        try await NetnsLab.withLab { lab in
            try lab.writeResolvConf("# written by NetReachTests\nsearch lab.invalid\n")
            let monitor = Self.startedMonitor(in: lab)
            defer { monitor.cancel() }
            let log = PathLog.consuming(monitor.paths)
            #expect(monitor.currentPath.status == .satisfied)
            #expect(!monitor.currentPath.supportsDNS)

            try lab.writeResolvConf("nameserver 10.123.0.53\n")
            await LabPoll.until("a nameserver written in place turns supportsDNS on") { log.last?.supportsDNS == true }

            try lab.replaceResolvConf("# renamed over, no nameserver\noptions ndots:1\n")
            await LabPoll.until("a file renamed over it without nameserver turns supportsDNS off") {
                log.last?.supportsDNS == false
            }

            try lab.replaceResolvConfWithSymlink(toNewFileIn: "stub", containing: "nameserver 2001:db8:123::53\n")
            await LabPoll.until("a symlink to a file with a nameserver turns supportsDNS on") {
                log.last?.supportsDNS == true
            }

            #expect(log.paths.map(\.supportsDNS) == [false, true, false, true])
            #expect(log.paths.allSatisfy { $0.status == .satisfied })
        }
    }

    /// The files are watched only a while after the first path (a monitor stopped sooner makes no
    /// inotify instance, whose closing costs the process a kernel grace period); what is written
    /// before the watch starts is read when it starts.
    @Test func aWriteBeforeTheWatchStartsIsSeenWhenItStarts() async throws {
        try await NetnsLab.withLab { lab in
            try lab.writeResolvConf("search lab.invalid\n")
            let monitor = Self.startedMonitor(in: lab, nameserverWatchDelay: .seconds(2))
            defer { monitor.cancel() }
            let log = PathLog.consuming(monitor.paths)
            #expect(!monitor.currentPath.supportsDNS)

            // Written in place before the watch exists: no inotify event will ever tell of it.
            try lab.writeResolvConf("nameserver 10.123.0.53\n")
            await LabPoll.until("the write is read when the watch starts") { log.last?.supportsDNS == true }
            try lab.writeResolvConf("# the nameserver removed\n")
            await LabPoll.until("a write after the watch started is seen") { log.last?.supportsDNS == false }
            #expect(log.paths.map(\.supportsDNS) == [false, true, false])
        }
    }

    /// Without inotify (the user's `fs.inotify.max_user_instances`, 128 by default, all taken),
    /// the files are read every `NetlinkEngine.unwatchedRecheck`: a write in place and a symlink
    /// swap are seen, late, not never.
    @Test func withInotifyRefusedTheFilesAreReadEveryFewSeconds() async throws {
        try await NetnsLab.withLab { lab in
            try lab.writeResolvConf("search lab.invalid\n")
            let monitor = Self.startedMonitor(in: lab, inotifyAvailable: false)
            defer { monitor.cancel() }
            let log = PathLog.consuming(monitor.paths)
            #expect(!monitor.currentPath.supportsDNS)

            try lab.writeResolvConf("nameserver 10.123.0.53\n")
            await LabPoll.until("a write in place is read") { log.last?.supportsDNS == true }
            try lab.replaceResolvConfWithSymlink(toNewFileIn: "stub", containing: "# no nameserver\n")
            await LabPoll.until("a symlink swap is read") { log.last?.supportsDNS == false }
            #expect(log.paths.map(\.supportsDNS) == [false, true, false])
        }
    }

    @Test func editingTheSymlinkTargetInPlaceIsSeen() async throws {
        try await NetnsLab.withLab { lab in
            let target = try lab.replaceResolvConfWithSymlink(
                toNewFileIn: "stub", containing: "nameserver 10.123.0.53\n")
            let monitor = Self.startedMonitor(in: lab)
            defer { monitor.cancel() }
            let log = PathLog.consuming(monitor.paths)
            #expect(monitor.currentPath.supportsDNS)

            try "# nameserver removed\n".write(toFile: target, atomically: false, encoding: .utf8)
            await LabPoll.until("editing the symlink's target turns supportsDNS off") { log.last?.supportsDNS == false }
            #expect(log.paths.map(\.supportsDNS) == [true, false])
        }
    }

    @Test func aSymlinkToATargetWhoseDirectoriesDoNotExistYetIsPickedUpWhenTheyDo() async throws {
        // systemd-resolved's stub link at boot: /etc/resolv.conf -> /run/systemd/resolve/stub-resolv.conf
        // before /run/systemd/resolve exists.
        try await NetnsLab.withLab { lab in
            let target = lab.directory + "/run/systemd/resolve/stub-resolv.conf"
            #expect(symlink(target, lab.resolvConfPath) == 0)
            let monitor = Self.startedMonitor(in: lab)
            defer { monitor.cancel() }
            let log = PathLog.consuming(monitor.paths)
            #expect(!monitor.currentPath.supportsDNS)

            try FileManager.default.createDirectory(
                atPath: lab.directory + "/run/systemd/resolve", withIntermediateDirectories: true)
            try "nameserver 10.123.0.53\n".write(toFile: target, atomically: false, encoding: .utf8)
            await LabPoll.until("the target created under new directories turns supportsDNS on") {
                log.last?.supportsDNS == true
            }

            try FileManager.default.removeItem(atPath: lab.directory + "/run")
            await LabPoll.until("the target's directories removed turn supportsDNS off") {
                log.last?.supportsDNS == false
            }
            try FileManager.default.createDirectory(
                atPath: lab.directory + "/run/systemd/resolve", withIntermediateDirectories: true)
            try "nameserver 10.123.0.54\n".write(toFile: target, atomically: false, encoding: .utf8)
            await LabPoll.until("created again, it is picked up again") { log.last?.supportsDNS == true }
            #expect(log.paths.map(\.supportsDNS) == [false, true, false, true])
        }
    }

    @Test func theResolvedStubIsJudgedByItsUpstreamServers() async throws {
        try await NetnsLab.withLab { lab in
            let upstream = lab.directory + "/resolved-upstream.conf"
            try "# This is /run/systemd/resolve/resolv.conf managed by man:systemd-resolved(8).\nsearch .\n"
                .write(toFile: upstream, atomically: false, encoding: .utf8)
            try lab.writeResolvConf("nameserver 127.0.0.53\noptions edns0 trust-ad\nsearch .\n")
            let monitor = Self.startedMonitor(in: lab, resolvedUpstreamPath: upstream)
            defer { monitor.cancel() }
            let log = PathLog.consuming(monitor.paths)
            // The stub answers, but with no upstream server there is no DNS.
            #expect(!monitor.currentPath.supportsDNS)

            try "nameserver 10.123.0.53\nsearch .\n".write(toFile: upstream, atomically: false, encoding: .utf8)
            await LabPoll.until("an upstream server turns supportsDNS on") { log.last?.supportsDNS == true }

            // Without the upstream file, the stub is taken at its word.
            try "search .\n".write(toFile: upstream, atomically: false, encoding: .utf8)
            await LabPoll.until("no upstream server turns it off again") { log.last?.supportsDNS == false }
            try FileManager.default.removeItem(atPath: upstream)
            await LabPoll.until("without the upstream file the stub is taken at its word") {
                log.last?.supportsDNS == true
            }
            #expect(log.paths.map(\.supportsDNS) == [false, true, false, true])
        }
    }

    @Test func etcNetnsResolvConfAppearingAndDisappearingAfterStartIsFollowed() async throws {
        try await NetnsLab.withLab { lab in
            defer { EtcNetns.remove(for: lab) }
            let source = SystemPathSource(configuration: .init(namespace: lab.namespace))
            let monitor = PathMonitor(source: source)
            monitor.start(queue: DispatchQueue(label: "etc-netns"))
            defer { monitor.cancel() }
            let log = PathLog.consuming(monitor.paths)
            // The machine's own resolv.conf (only read) decides first; the namespace's own file,
            // once it appears, must decide the other way.
            let hostHasDNS = !NameserverSource(
                candidates: ["/etc/resolv.conf"], resolvedUpstreamPath: source.configuration.resolvedUpstreamPath
            )
            .nameservers().isEmpty
            #expect(monitor.currentPath.supportsDNS == hostHasDNS)

            try EtcNetns.writeResolvConf(hostHasDNS ? "search lab.invalid\n" : "nameserver 10.123.0.53\n", for: lab)
            await LabPoll.until("the namespace's own resolv.conf decides") { log.last?.supportsDNS == !hostHasDNS }

            try FileManager.default.removeItem(atPath: EtcNetns.directory(for: lab))
            await LabPoll.until("without it, the machine's decides again") { log.last?.supportsDNS == hostHasDNS }
            #expect(log.paths.map(\.supportsDNS) == [hostHasDNS, !hostHasDNS, hostHasDNS])
        }
    }
}
