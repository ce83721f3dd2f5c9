import Foundation
import NetReachTestSupport
@testable import netreach
@testable import NetReachObserverCommands
import Testing

/// `netreach get` runs the `netreach-http` executable in its place, so `status`, `watch` and `wait`
/// never load the HTTP stack (Docs/DesignNotes.md). No root needed.
@Suite("netreach get forwarding", .offPool)
struct GetForwardingTests {
    @Test(arguments: [
        (["netreach", "get", "-X", "POST", "http://127.0.0.1/x"], ["get", "-X", "POST", "http://127.0.0.1/x"] as [String]?),
        (["netreach", "get"], ["get"]),
        (["netreach", "get", "--help"], ["get", "--help"]),
        (["netreach", "help", "get"], ["get", "--help"]),
        (["netreach", "watch", "get"], nil),
        (["netreach", "help"], nil),
        (["netreach"], nil),
        (["netreach", "--help"], nil),
    ])
    func onlyGetAndItsHelpAreForwarded(_ arguments: [String], _ forwarded: [String]?) {
        #expect(GetForwarding.helperArguments(arguments) == forwarded)
    }

    @Test func theHelperIsLookedForNextToNetreachThenOnPATH() {
        #expect(GetForwarding.candidates(executable: "/opt/nr/bin/netreach", path: "/usr/local/bin::/usr/bin")
                == ["/opt/nr/bin/netreach-http", "/usr/local/bin/netreach-http", "/usr/bin/netreach-http"])
        #expect(GetForwarding.candidates(executable: nil, path: nil) == [])
    }

    @Test func onlyTheURLSessionHelperLinksFoundationNetworking() throws {
        let netreach = try NetreachProcess.executable()
        let directory = netreach.deletingLastPathComponent()
        let marker = Data("libFoundationNetworking.so".utf8)
        #expect(try Data(contentsOf: netreach).range(of: marker) == nil, "netreach must not need FoundationNetworking")
        // The default `get` (AsyncHTTPClient) loads neither FoundationNetworking nor libcurl.
        let http = try Data(contentsOf: directory.appendingPathComponent("netreach-http"))
        #expect(http.range(of: marker) == nil, "netreach-http must not need FoundationNetworking")
        #expect(http.range(of: Data("libcurl.so".utf8)) == nil, "netreach-http must not need libcurl")
        let urlSession = try Data(contentsOf: directory.appendingPathComponent("netreach-http-urlsession"))
        #expect(urlSession.range(of: marker) != nil, "the check itself must see it in netreach-http-urlsession")
    }

    @Test func getRunsTheHelperWithItsOwnHelpAndExitStatus() throws {
        let help = try Self.run(NetreachProcess.executable(), ["get", "--help"])
        #expect(help.status == 0, "\(help.error)")
        #expect(help.output.contains("USAGE: netreach get [<options>] <url>"), "\(help.output)")
        #expect(help.output.contains("130 interrupted"), "get's own exit table: \(help.output)")
        for code in [4, 5, 6, 7, 8, 22, 23, 26, 28, 35, 47, 56, 60, 61, 63, 64, 74, 130] {
            #expect(help.output.contains("\n  \(code) "), "get's exit status \(code) is missing: \(help.output)")
        }

        let bad = try Self.run(NetreachProcess.executable(), ["get", "--no-such-flag", "http://127.0.0.1:9/"])
        #expect(bad.status == 64, "\(bad.error)")
        #expect(bad.error.contains("--no-such-flag"))
    }

    @Test func aMissingHelperIsExitStatus69WithWhatToDo() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("netreach-forwarding-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let lonely = directory.appendingPathComponent("netreach")
        try FileManager.default.copyItem(at: NetreachProcess.executable(), to: lonely)

        let missing = try Self.runFreshCopy(lonely, ["get", "http://127.0.0.1:9/"], path: directory.path)
        #expect(missing.status == 69)
        #expect(missing.error.contains("netreach-http"), "\(missing.error)")
        #expect(missing.error.contains("swift build --product netreach-http"))

        let helper = directory.appendingPathComponent("netreach-http")
        try Data("not a program".utf8).write(to: helper)   // there, but not executable
        let unusable = try Self.run(lonely, ["get", "http://127.0.0.1:9/"], path: directory.path)
        #expect(unusable.status == 69)
        #expect(unusable.error.contains("could not be run"), "\(unusable.error)")

        // The observers do not need the helper at all.
        #expect(try Self.run(lonely, ["wait", "--help"], path: directory.path).status == 0)
    }

    /// `run` for an executable just written: a process another test forks at that moment inherits
    /// the writer's descriptor for a while, and executing the file then fails with ETXTBSY (seen in
    /// CI), so that is retried for up to 5 s.
    private static func runFreshCopy(_ executable: URL, _ arguments: [String], path: String) throws -> (status: Int32, output: String, error: String) {
        let deadline = ContinuousClock.now + .seconds(5)
        while true {
            do {
                return try run(executable, arguments, path: path)
            } catch ChildProcessError.spawn(_, ETXTBSY) where ContinuousClock.now < deadline {
                usleep(20_000)
            }
        }
    }

    private static func run(_ executable: URL, _ arguments: [String], path: String? = nil) throws -> (status: Int32, output: String, error: String) {
        let finished = try ChildProcess.runBlocking(executable.path, arguments, environment: path.map { ["PATH": $0] })
        return (finished.status, finished.standardOutput, finished.standardError)
    }
}
