import Foundation
import NetReachTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `serve` under `Deploy/systemd/netreach.service`'s own sandbox, applied for real by
/// Scripts/run_under_unit.py: the unit's system call filter loaded into the kernel with libseccomp
/// (its groups expanded by the systemd of this machine), its user, capabilities, limits and the
/// other filters its settings make (the script says which settings it emulates and which not).
/// `systemd-analyze verify` (``DeployTests``) reads the unit but cannot see a filter that kills
/// the service as it starts: the shipped unit did, and the first test shows the runner sees it.
@Suite(
    "netreach serve under its systemd unit's sandbox", .offPool, .needsNamespaceRoot,
    .enabled(if: UnitSandbox.isAvailable, "needs systemd-analyze and python3-seccomp for /usr/bin/python3"))
struct ServeUnderUnitTests {
    /// The unit as shipped before SystemCallErrorNumber=EPERM: a call outside the filter killed
    /// the whole process (SIGSYS, status 159), and serve makes one as it starts (Dispatch's
    /// worker threads call setpriority, of @resources, which the unit refuses).
    @Test func withoutAnErrnoTheUnitsFilterKillsServeAsItStarts() async throws {
        let shipped = try UnitSandbox.shippedText()
        #expect(shipped.contains("\nSystemCallErrorNumber=EPERM\n"))
        let directory = try TemporaryDirectory("netreach-unit")
        defer { directory.remove() }
        let unit = try UnitSandbox.write(
            shipped.replacingOccurrences(of: "\nSystemCallErrorNumber=EPERM\n", with: "\n"), in: directory)
        let port = try FreePort.pick()
        let serve = try UnitSandbox.start(
            unit: unit, [NetreachProcess.executable().path, "serve", "--listen", "127.0.0.1:\(port)"])
        defer { serve.kill() }
        #expect(await serve.exitStatus(timeout: .seconds(60)) == 128 + SIGSYS, "\(serve.standardError)")
    }

    /// The unit as shipped, in a lab namespace of its own (serve watches the namespace it runs
    /// in): READY=1, /livez and /metrics, the lab's default route deleted and added again, a
    /// reload, then SIGTERM and exit 0 with STOPPING=1, as systemd would see it.
    @Test func serveLivesThroughStartAPathChangeAReloadAndStopUnderTheUnit() async throws {
        try await NetnsLab.withLab { lab in
            let directory = try TemporaryDirectory("netreach-unit")
            defer { directory.remove() }
            let notify = directory.path("notify")
            let receiver = try DatagramReceiver(path: notify)
            defer { receiver.close() }
            // The service's user is not root: it must be let write to the socket.
            #expect(chmod(notify, 0o666) == 0)
            let config = directory.path("serve.yaml")
            try Data("to:\n  gateway: \(NetnsLab.ipv4Gateway)\n".utf8).write(to: URL(fileURLWithPath: config))
            let port = try FreePort.pick()
            let base = "http://127.0.0.1:\(port)"
            let serve = try UnitSandbox.start(
                unit: UnitSandbox.shippedUnit.path,
                [NetreachProcess.executable().path, "serve", "--listen", "127.0.0.1:\(port)", "--config", config],
                environment: ["NOTIFY_SOCKET": notify], namespace: lab.name)
            defer { serve.kill() }

            let ready = try #require(receiver.next(timeout: .seconds(60)), "\(serve.standardError)")
            #expect(ready.hasPrefix("READY=1\n"), "\(ready)")
            // The process answering is the one the sandbox holds.
            let status = try String(contentsOfFile: "/proc/\(serve.pid)/status", encoding: .utf8)
            for line in ["Seccomp:\t2", "NoNewPrivs:\t1", "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000"] {
                #expect(status.contains(line + "\n"), "\(status)")
            }
            #expect(!status.contains("\nUid:\t0\t"), "\(status)")
            // LimitNOFILE=65536, or as high as this machine lets root raise it (a container's
            // root may lack CAP_SYS_RESOURCE; the runner says so).
            let hard = try #require(UnitSandbox.openFileLimits("self")?.hard)
            let files = min(65536, hard)
            let limits = UnitSandbox.openFileLimits("\(serve.pid)")
            #expect(limits?.soft == files && limits?.hard == files, "\(String(describing: limits))")

            #expect(try await ServeClient.get(base + "/livez", namespace: lab.name).status == 200)
            let internet = #"netreach_path_satisfied{namespace="",destination=""}"#
            let gateway = #"netreach_path_satisfied{namespace="",destination="gateway"}"#
            let metrics = try await ServeClient.get(base + "/metrics", namespace: lab.name)
            #expect(metrics.body.contains(internet + " 1.0"), "\(metrics.body)")
            #expect(metrics.body.contains(gateway + " 1.0"), "\(metrics.body)")

            try await lab.deleteDefaultRoute()
            await ServeClient.until("the deleted route is seen", base, "/api/v1/path", namespace: lab.name) {
                $0.body.contains(#""status":"unsatisfied""#)
            }
            await ServeClient.until("the path is unsatisfied in /metrics", base, "/metrics", namespace: lab.name) {
                $0.body.contains(internet + " 0.0")
            }
            try await lab.addDefaultRoute()
            await ServeClient.until("the route added again is seen", base, "/metrics", namespace: lab.name) {
                $0.body.contains(internet + " 1.0")
            }

            try Data("to:\n  loopback: 127.0.0.1\n".utf8).write(to: URL(fileURLWithPath: config), options: .atomic)
            serve.signal(SIGHUP)
            await ServeClient.until("the reload is applied", base, "/metrics", namespace: lab.name) {
                $0.body.contains(#"netreach_path_satisfied{namespace="",destination="loopback"} 1.0"#)
                    && !$0.body.contains(#"destination="gateway""#)
            }
            #expect(serve.standardError.contains("serve: reloaded \(config)"), "\(serve.standardError)")
            #expect(serve.isRunning)

            serve.signal(SIGTERM)
            #expect(await serve.exitStatus() == 0, "\(serve.standardError)")
            var rest: [String] = []
            while let message = receiver.next(timeout: .seconds(1)) { rest.append(message) }
            #expect(rest.last == "STOPPING=1", "\(rest)")
        }
    }

    /// The unit's commented TLS lines, as an operator turns them on: the web configuration and its
    /// certificate and key (root's, 0600) handed over by LoadCredential=, serve started with
    /// `--web.config.file ${CREDENTIALS_DIRECTORY}/web.yml` under the unit's filter and dynamic
    /// user. TLS and the password hold, bcrypt's thread and a reload (SIGHUP) run under the filter,
    /// and SIGTERM ends it with 0.
    @Test(.enabled(if: ExternalServer.available("htpasswd", "openssl")))
    func serveSpeaksTLSWithAPasswordFromCredentialsUnderTheUnit() async throws {
        let directory = try TemporaryDirectory("netreach-unit")
        defer { directory.remove() }
        let certificates = try await TestCertificates.make()
        defer { certificates.remove() }
        // /etc/netreach as an operator fills it: root's files, the key readable by root alone.
        let etc = directory.path("etc")
        try FileManager.default.createDirectory(atPath: etc, withIntermediateDirectories: true)
        _ = try await DeployWebConfig.install(in: etc, certificates: certificates, password: "unit-s3cret")
        #expect(chmod(etc + "/tls.key", 0o600) == 0)
        var text = try UnitSandbox.shippedText()
        for name in ["web.yml", "tls.crt", "tls.key"] {
            let line = "#   LoadCredential=\(name):/etc/netreach/\(name)\n"
            try #require(text.contains(line), "the unit no longer suggests \(line)")
            text = text.replacingOccurrences(of: line, with: "LoadCredential=\(name):\(etc)/\(name)\n")
        }
        let execStart = try #require(
            text.split(separator: "\n").first { $0.hasPrefix("#   ExecStart=") && $0.contains("--web.config.file") },
            "the unit no longer suggests an ExecStart with --web.config.file")
        let unit = try UnitSandbox.write(text, in: directory)
        let credentials = directory.path("credentials")
        try FileManager.default.createDirectory(atPath: credentials, withIntermediateDirectories: true)
        // ExecStart= as suggested, ${CREDENTIALS_DIRECTORY} expanded as systemd does, on a free loopback port.
        let port = try FreePort.pick()
        let command = execStart.dropFirst("#   ExecStart=".count).split(separator: " ").map {
            String($0).replacingOccurrences(of: "${CREDENTIALS_DIRECTORY}", with: credentials)
                .replacingOccurrences(of: "0.0.0.0:9817", with: "127.0.0.1:\(port)")
                .replacingOccurrences(of: "/usr/bin/netreach", with: (try? NetreachProcess.executable().path) ?? "")
        }
        let serve = try UnitSandbox.start(unit: unit, command, credentials: credentials)
        defer { serve.kill() }
        let base = try await ServeClient.baseURL(of: serve)
        #expect(base == "https://127.0.0.1:\(port)", "\(serve.standardError)")
        let status = try String(contentsOfFile: "/proc/\(serve.pid)/status", encoding: .utf8)
        #expect(status.contains("Seccomp:\t2\n") && !status.contains("\nUid:\t0\t"), "\(status)")
        let ca = ["--cacert", certificates.path("ca.pem")]
        #expect(try await ServeClient.get(base + "/livez", extra: ca).status == 200, "\(serve.standardError)")
        #expect(try await ServeClient.get(base + "/metrics", extra: ca).status == 401)
        let password = ca + ["-u", "\(DeployWebConfig.user):unit-s3cret"]
        let metrics = try await ServeClient.get(base + "/metrics", extra: password)
        #expect(metrics.status == 200 && metrics.body.contains("netreach_build_info"), "\(serve.standardError)")
        serve.signal(SIGHUP)
        await LabPoll.until("serve reloads its web configuration", timeout: .seconds(30)) {
            serve.standardError.contains("reloaded \(credentials)/web.yml")
        }
        #expect(try await ServeClient.get(base + "/metrics", extra: password).status == 200)
        #expect(serve.isRunning, "\(serve.standardError)")
        serve.signal(SIGTERM)
        #expect(await serve.exitStatus() == 0, "\(serve.standardError)")
    }

    /// `--namespace PID` with what the unit's comment asked for before: CAP_SYS_ADMIN alone is not
    /// enough, since opening another process's `/proc/PID/ns/net` is a ptrace access check
    /// (EACCES). serve says so on standard error and in /readyz; with CAP_SYS_PTRACE too, as the
    /// comment says now, it enters and reads the namespace.
    @Test func enteringANamespaceByProcessIDNeedsCapSysPtraceAndServeSaysWhy() async throws {
        try await NetnsLab.withLab { lab in
            // A process living in the lab namespace, whose id names it.
            let holder = try ChildProcess(LabCommand.ipExecutable, ["netns", "exec", lab.name, "/bin/sleep", "600"])
            defer { holder.kill() }
            let pid = holder.pid
            await LabPoll.until("the holder is in the lab namespace") {
                UnitSandbox.inode("/proc/\(pid)/ns/net") == UnitSandbox.inode("/run/netns/\(lab.name)")
            }
            let directory = try TemporaryDirectory("netreach-unit")
            defer { directory.remove() }
            let available = #"netreach_namespace_available{namespace="\#(pid)"}"#

            for (capabilities, enters) in [("CAP_SYS_ADMIN", false), ("CAP_SYS_ADMIN CAP_SYS_PTRACE", true)] {
                let text = try UnitSandbox.shippedText()
                    .replacingOccurrences(
                        of: "\nCapabilityBoundingSet=\n", with: "\nCapabilityBoundingSet=\(capabilities)\n"
                    )
                    .replacingOccurrences(
                        of: "\nAmbientCapabilities=\n", with: "\nAmbientCapabilities=\(capabilities)\n"
                    )
                    .replacingOccurrences(of: "\nRestrictNamespaces=yes\n", with: "\n")
                let unit = try UnitSandbox.write(text, in: directory)
                let serve = try UnitSandbox.start(
                    unit: unit,
                    [NetreachProcess.executable().path, "serve", "--listen", "127.0.0.1:0", "--namespace", "\(pid)"])
                defer { serve.kill() }
                let base = try await ServeClient.baseURL(of: serve)
                if enters {
                    await ServeClient.until("the namespace is read", base, "/metrics") {
                        $0.body.contains(available + " 1.0")
                    }
                    let readyz = try await ServeClient.get(base + "/readyz?verbose")
                    #expect(readyz.status == 200, "\(capabilities): \(readyz.body)")
                    #expect(!serve.standardError.contains("cannot enter"), "\(serve.standardError)")
                } else {
                    let why =
                        "cannot enter /proc/\(pid)/ns/net: Permission denied (EACCES): it needs CAP_SYS_ADMIN and CAP_SYS_PTRACE (entering by process id); nothing is read from it"
                    let said = await serve.waitForOutput(timeout: .seconds(60)) { _, error in
                        error.contains("serve: network namespace \(pid): \(why)\n")
                    }
                    #expect(said, "\(serve.standardError)")
                    let readyz = try await ServeClient.get(base + "/readyz?verbose")
                    let metrics = try await ServeClient.get(base + "/metrics")
                    #expect(readyz.status == 503)
                    #expect(readyz.body.contains("[-]namespace \(pid) failed: \(why)\n"), "\(readyz.body)")
                    #expect(metrics.body.contains(available + " 0.0"), "\(metrics.body)")
                }
                serve.signal(SIGTERM)
                #expect(await serve.exitStatus() == 0, "\(capabilities): \(serve.standardError)")
            }
        }
    }
}

/// Scripts/run_under_unit.py and the unit it reads.
enum UnitSandbox {
    static let python = "/usr/bin/python3"
    static let runner = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Scripts/run_under_unit.py")
    static let shippedUnit = DeployTests.deploy.appendingPathComponent("systemd/netreach.service")

    /// Whether the runner can work here: systemd-analyze, and libseccomp's binding for Debian's
    /// python (not the one first on PATH, which may be another). Always with CI=true, so the
    /// suite fails there rather than skip.
    static let isAvailable: Bool = {
        guard ExternalServer.available("systemd-analyze") else { return false }
        if ProcessInfo.processInfo.environment["CI"] == "true" { return true }
        let probe = try? ChildProcess.runBlocking(python, ["-c", "import seccomp"], timeout: .seconds(30))
        return probe?.status == 0
    }()

    static func shippedText() throws -> String { try String(contentsOf: shippedUnit, encoding: .utf8) }

    /// Writes a unit's text into `directory`; its path.
    static func write(_ text: String, in directory: TemporaryDirectory) throws -> String {
        let path = directory.path("netreach-\(UUID().uuidString.prefix(8)).service")
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// Starts `command` under `unit`'s sandbox, with `environment` added to what systemd would
    /// give it; inside the `ip netns` namespace `namespace` when given. `ip netns exec` and the
    /// runner each replace themselves: the child's pid is the command's.
    static func start(
        unit: String, _ command: [String], environment: [String: String] = [:], namespace: String? = nil,
        credentials: String? = nil
    ) throws -> ChildProcess {
        var arguments = [runner.path, unit]
        if let credentials { arguments += ["--credentials", credentials] }
        for (name, value) in environment.sorted(by: { $0.key < $1.key }) {
            arguments += ["--setenv", "\(name)=\(value)"]
        }
        arguments += ["--"] + command
        if let namespace {
            return try ChildProcess(LabCommand.ipExecutable, ["netns", "exec", namespace, python] + arguments)
        }
        return try ChildProcess(python, arguments)
    }

    /// The soft and hard limit of open files of process `pid` (or `self`), from /proc.
    static func openFileLimits(_ pid: String) -> (soft: Int, hard: Int)? {
        guard let limits = try? String(contentsOfFile: "/proc/\(pid)/limits", encoding: .utf8),
            let line = limits.split(separator: "\n").first(where: { $0.hasPrefix("Max open files") })
        else { return nil }
        let numbers = line.split(separator: " ").dropFirst(3).prefix(2).compactMap { Int($0) }
        return numbers.count == 2 ? (numbers[0], numbers[1]) : nil
    }

    /// The inode of what `path` leads to; `nil` if it cannot be read.
    static func inode(_ path: String) -> UInt64? {
        var status = stat()
        return stat(path, &status) == 0 ? UInt64(status.st_ino) : nil
    }
}
