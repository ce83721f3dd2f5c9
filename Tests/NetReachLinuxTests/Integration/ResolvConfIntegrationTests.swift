import Dispatch
import Foundation
import NetReach
import Testing

/// `supportsDNS` follows resolv.conf through the inotify watch on its directory, including the
/// rename and symlink swaps resolvers make (DESIGN.md "Path semantics").
@Suite("resolv.conf changes (integration)", .needsNamespaceRoot)
struct ResolvConfIntegrationTests {
    private static func startedMonitor(in lab: NetnsLab) -> PathMonitor {
        let source = SystemPathSource(configuration: .init(namespace: lab.namespace, resolvConfPath: lab.resolvConfPath))
        let monitor = PathMonitor(source: source)
        monitor.start(queue: DispatchQueue(label: "resolv.conf"))
        return monitor
    }

    @Test func supportsDNSFollowsWritesRenamesAndSymlinkSwaps() async throws {
        try await NetnsLab.withLab { lab in
            try lab.writeResolvConf("# written by NetReachLinuxTests\nsearch lab.invalid\n")
            let monitor = Self.startedMonitor(in: lab)
            defer { monitor.cancel() }
            let log = PathLog.consuming(monitor.paths)
            #expect(monitor.currentPath.status == .satisfied)
            #expect(!monitor.currentPath.supportsDNS)

            try lab.writeResolvConf("nameserver 10.123.0.53\n")
            await LabPoll.until("a nameserver written in place turns supportsDNS on") { log.last?.supportsDNS == true }

            try lab.replaceResolvConf("# renamed over, no nameserver\noptions ndots:1\n")
            await LabPoll.until("a file renamed over it without nameserver turns supportsDNS off") { log.last?.supportsDNS == false }

            try lab.replaceResolvConfWithSymlink(toNewFileIn: "stub", containing: "nameserver 2001:db8:123::53\n")
            await LabPoll.until("a symlink to a file with a nameserver turns supportsDNS on") { log.last?.supportsDNS == true }

            #expect(log.paths.map(\.supportsDNS) == [false, true, false, true])
            #expect(log.paths.allSatisfy { $0.status == .satisfied })
        }
    }

    @Test func editingTheSymlinkTargetInPlaceIsSeen() async throws {
        try await NetnsLab.withLab { lab in
            let target = try lab.replaceResolvConfWithSymlink(toNewFileIn: "stub", containing: "nameserver 10.123.0.53\n")
            let monitor = Self.startedMonitor(in: lab)
            defer { monitor.cancel() }
            let log = PathLog.consuming(monitor.paths)
            #expect(monitor.currentPath.supportsDNS)

            try "# nameserver removed\n".write(toFile: target, atomically: false, encoding: .utf8)
            await LabPoll.until("editing the symlink's target turns supportsDNS off") { log.last?.supportsDNS == false }
            #expect(log.paths.map(\.supportsDNS) == [true, false])
        }
    }
}
