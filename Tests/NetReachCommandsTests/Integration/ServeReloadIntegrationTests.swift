import Foundation
import NetReachTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `serve --all-namespaces` as `ip netns` namespaces come and go, asked over HTTP by curl.
@Suite("netreach serve --all-namespaces (integration)", .offPool, .needsNamespaceRoot)
struct ServeAllNamespacesTests {
    @Test func namespacesAreWatchedAsIpNetnsAddsThemAndWithdrawnAsItDeletesThem() async throws {
        let name = "nr-all-\(getpid())"
        let serve = try NetreachProcess.start(["serve", "--listen", "127.0.0.1:0", "--all-namespaces"])
        defer { serve.kill() }
        let base = try await ServeClient.baseURL(of: serve)
        let events = try ChildProcess(ServeClient.curl, ["-sSN", "--max-time", "120", base + "/api/v1/events"])
        defer { events.kill() }
        let available = #"netreach_namespace_available{namespace="\#(name)"} 1.0"#

        try await LabCommand.ip(["netns", "add", name])
        do {
            // Seen from the mount it gets, not from a timer: the same as `ip netns list` says.
            await ServeClient.until("the new namespace is watched", base, "/metrics") { $0.body.contains(available) }
            let metrics = try await ServeClient.get(base + "/metrics")
            // Its lo is down and it has no route: the path says so, from inside it.
            #expect(
                metrics.body.contains(
                    #"netreach_path_satisfied{namespace="\#(name)",destination=""} 0.0"#), "\(metrics.body)")
            #expect(metrics.body.contains(#"netreach_interface_up{namespace="\#(name)",interface="lo""#))
            let path = try await ServeClient.get(base + "/api/v1/path?namespace=\(name)")
            #expect(path.status == 200)
            #expect(path.body.contains(#""status":"unsatisfied""#))
            // /probe may enter it while it is watched.
            let probe = try await ServeClient.get(base + "/probe?target=127.0.0.1&namespace=\(name)")
            #expect(probe.status == 200, "\(probe.body)")
        } catch {
            _ = try? await LabCommand.ip(["netns", "del", name])
            throw error
        }
        try await LabCommand.ip(["netns", "del", name])

        await ServeClient.until("the namespace is withdrawn", base, "/metrics") {
            !$0.body.contains(#"namespace="\#(name)""#)
        }
        #expect(try await ServeClient.get(base + "/api/v1/path?namespace=\(name)").status == 404)
        #expect(try await ServeClient.get(base + "/probe?target=127.0.0.1&namespace=\(name)").status == 404)
        await LabPoll.until("the stream says it is no longer watched") {
            events.outputLines.contains {
                $0 == #"data: {"available":false,"namespace":"\#(name)","watched":false}"#
            }
        }
        #expect(
            events.outputLines.contains(
                #"data: {"destination":"","namespace":"\#(name)","path":null,"port":443,"protocol":"tcp"}"#),
            "\(events.outputLines.suffix(10))")
        serve.signal(SIGTERM)
        #expect(await serve.exitStatus() == 0, "standard error: \(serve.standardError)")
    }
}

/// `serve --config FILE`: read again on SIGHUP and on `POST /-/reload`; a bad file keeps the
/// running configuration; at start, a bad file is exit status 78. In this namespace: no root.
@Suite("netreach serve --config (integration)", .offPool)
struct ServeConfigIntegrationTests {
    private func makeDirectory() throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("serve-reload-\(UUID())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return directory
    }

    private func write(_ text: String, to path: String) throws {
        // Replaced whole, as editors and configuration managers do: never read half-written.
        try Data(text.utf8).write(to: URL(fileURLWithPath: path), options: .atomic)
    }

    @Test func sighupAndPostReloadReadTheFileAgainAndABadFileIsKeptOut() async throws {
        let directory = try makeDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/serve.yaml"
        try write("to:\n  one: 127.0.0.1\n", to: file)
        let serve = try NetreachProcess.start([
            "serve", "--listen", "127.0.0.1:0", "--config", file, "--enable-lifecycle",
        ])
        defer { serve.kill() }
        let base = try await ServeClient.baseURL(of: serve)
        let one = #"netreach_path_satisfied{namespace="",destination="one"} 1.0"#
        let two = #"netreach_path_satisfied{namespace="",destination="two"} 1.0"#
        await ServeClient.until("one is watched", base, "/metrics") { $0.body.contains(one) }
        #expect(
            try await ServeClient.get(base + "/metrics").body.contains("netreach_config_last_reload_successful 1.0"))

        try write(#"{"to": {"two": "127.0.0.2"}, "ready_when": "to=two"}"#, to: file)
        serve.signal(SIGHUP)
        await ServeClient.until("two replaces one", base, "/metrics") {
            $0.body.contains(two) && !$0.body.contains(#"destination="one""#)
        }
        let verbose = try await ServeClient.get(base + "/readyz?verbose")
        #expect(verbose.body.contains("two"), "\(verbose.body)")

        try write("to: {three: 127.0.0.3\n", to: file)
        let refused = try await ServeClient.get(base + "/-/reload", extra: ["-X", "POST"])
        #expect(refused.status == 500)
        #expect(refused.body.hasPrefix("not reloaded, the running configuration is kept: \(file): not YAML or JSON"))
        var metrics = try await ServeClient.get(base + "/metrics").body
        #expect(metrics.contains("netreach_config_last_reload_successful 0.0"))
        #expect(metrics.contains(two))
        #expect(!metrics.contains(#"destination="three""#))
        #expect(serve.isRunning)

        try write("to:\n  three: 127.0.0.3\n", to: file)
        let reloaded = try await ServeClient.get(base + "/-/reload", extra: ["-X", "POST"])
        #expect(reloaded.status == 200)
        // The answer comes once the new path has been read.
        metrics = try await ServeClient.get(base + "/metrics").body
        #expect(metrics.contains(#"netreach_path_satisfied{namespace="",destination="three"} 1.0"#), "\(metrics)")
        #expect(metrics.contains("netreach_config_last_reload_successful 1.0"))
        #expect(serve.standardError.contains("serve: not reloaded, the running configuration is kept: "))
        #expect(serve.standardError.contains("serve: reloaded \(file): this namespace, 1 destination"))

        serve.signal(SIGTERM)
        #expect(await serve.exitStatus() == 0, "standard error: \(serve.standardError)")
    }

    @Test func withoutEnableLifecycleNothingChangesState() async throws {
        let serve = try NetreachProcess.start(["serve", "--listen", "127.0.0.1:0"])
        defer { serve.kill() }
        let base = try await ServeClient.baseURL(of: serve)
        let post = try await ServeClient.get(base + "/-/reload", extra: ["-X", "POST"])
        #expect(post.status == 403)
        #expect(post.body == "the lifecycle API is not enabled: serve --enable-lifecycle\n")
        let get = try await ServeClient.get(base + "/-/reload", extra: ["-D", "-"])
        #expect(get.status == 405)
        #expect(get.body.lowercased().contains("allow: post"), "\(get.body)")
        let postMetrics = try await ServeClient.get(base + "/metrics", extra: ["-X", "POST", "-D", "-"])
        #expect(postMetrics.status == 405)
        #expect(postMetrics.body.lowercased().contains("allow: get, head"))
        // SIGHUP without --config re-reads nothing, and does not end the server.
        serve.signal(SIGHUP)
        await LabPoll.until("the reload is reported") {
            serve.standardError.contains("serve: reloaded: this namespace")
        }
        #expect(try await ServeClient.get(base + "/livez").status == 200)
        serve.signal(SIGTERM)
        #expect(await serve.exitStatus() == 0)
    }

    @Test(arguments: [
        ("to: {db: [1]}", "serve: FILE: to.db: expected a host, or a mapping of host, port and protocol"),
        (
            "to: {db: 10.0.0.5}\nready_when: to=web",
            "serve: --ready-when to=web: no --to web=HOST is given (with FILE)."
        ),
        ("listen: 10.0.0.1:nope", "serve: FILE: listen 10.0.0.1:nope: expected HOST:PORT"),
        ("namespace: [blue]", "serve: FILE: unknown key \"namespace\""),
    ])
    func aBadFileAtStartIsExitStatus78WithTheReason(text: String, message: String) async throws {
        let directory = try makeDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/serve.yaml"
        try write(text, to: file)
        // No --listen: it would replace the file's.
        let serve = try NetreachProcess.start(["serve", "--config", file])
        defer { serve.kill() }
        #expect(await serve.exitStatus() == 78)
        let expected = message.replacingOccurrences(of: "FILE", with: file)
        #expect(serve.standardError.contains(expected), "\(serve.standardError)")
    }

    @Test func aMissingFileIs78AndAnEmptyConfigOptionIsAUsageError() async throws {
        let missing = try NetreachProcess.start(["serve", "--config", "/nonexistent/serve.yaml"])
        #expect(await missing.exitStatus() == 78)
        #expect(missing.standardError.contains("cannot read /nonexistent/serve.yaml: No such file or directory"))
        let empty = try NetreachProcess.start(["serve", "--config", ""])
        #expect(await empty.exitStatus() == 64)
    }
}
