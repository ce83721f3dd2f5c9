#if os(Linux)
import Foundation
import NetReachTestSupport
@testable import NetReach
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `netreach get -o` against nginx on 127.0.0.1, compared with curl on the same files in the same
/// run: bytes, resuming, what an error status does to the file, owners and modes, and device nodes
/// (in a private mount namespace, never the machine's /dev).
@Suite(
    "netreach get -o against nginx and curl (integration)", .offPool, .serialized, .needsNamespaceRoot,
    .timeLimit(.minutes(3)))
struct GetDownloadTests {
    @Test func aDownloadIsByteForByteWhatCurlGets() async throws {
        try await offPool { try Self.aDownloadIsByteForByteWhatCurlGetsBody() }
    }

    private static func aDownloadIsByteForByteWhatCurlGetsBody() throws {
        let nginx = try Nginx.start()
        defer { nginx.stop() }
        let ours = nginx.scratch + "/ours.bin"
        let theirs = nginx.scratch + "/theirs.bin"
        let get = try run(netreachPath(), ["get", "-q", "-o", ours, nginx.url("/file.bin")])
        #expect(get.status == 0, "\(get.error)")
        let curl = try run("/usr/bin/curl", ["-sS", "-o", theirs, nginx.url("/file.bin")])
        #expect(curl.status == 0, "\(curl.error)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: ours)) == Data(contentsOf: URL(fileURLWithPath: theirs)))
        #expect(!FileManager.default.fileExists(atPath: ours + ".part"))
    }

    @Test func anInterruptedDownloadKeepsItsPartAndContinueFinishesIt() async throws {
        try await offPool { try Self.anInterruptedDownloadKeepsItsPartAndContinueFinishesItBody() }
    }

    private static func anInterruptedDownloadKeepsItsPartAndContinueFinishesItBody() throws {
        let nginx = try Nginx.start()
        defer { nginx.stop() }
        let ours = nginx.scratch + "/slow.bin"
        // nginx sends /slow/ at 2 MB/s; a 600 ms limit cuts the 4 MB file part way.
        let cut = try run(
            netreachPath(),
            ["get", "-q", "--retries", "0", "--max-time", "600ms", "-o", ours, nginx.url("/slow/file.bin")])
        #expect(cut.status == 28, "a transfer cut by --max-time timed out (curl 28): \(cut.status) \(cut.error)")
        #expect(!FileManager.default.fileExists(atPath: ours), "a half download under the final name")
        let part = try FileManager.default.attributesOfItem(atPath: ours + ".part")[.size] as? Int ?? 0
        #expect(part > 0 && part < Nginx.fileSize, "partial: \(part)")

        let resumed = try run(netreachPath(), ["get", "-o", ours, "--continue", nginx.url("/file.bin")])
        #expect(resumed.status == 0, "\(resumed.error)")
        #expect(resumed.error.contains("resumed at byte \(part)"), "\(resumed.error)")
        let curl = try run("/usr/bin/curl", ["-sS", nginx.url("/file.bin")])
        #expect(try Data(contentsOf: URL(fileURLWithPath: ours)) == curl.outputData)
        // nginx answered the continuation with a range: 206 in its log.
        let log = (try? String(contentsOfFile: nginx.scratch + "/access.log", encoding: .utf8)) ?? ""
        #expect(log.contains("\"GET /file.bin HTTP/1.1\" 206"), "\(log)")
    }

    @Test func aRangeTheUserAsksForIsSavedAsCurlSavesIt() async throws {
        try await offPool { try Self.aRangeTheUserAsksForIsSavedAsCurlSavesItBody() }
    }

    private static func aRangeTheUserAsksForIsSavedAsCurlSavesItBody() throws {
        let nginx = try Nginx.start()
        defer { nginx.stop() }
        for range in ["bytes=0-99", "bytes=1000-1999", "bytes=-10"] {
            let ours = nginx.scratch + "/range-ours.bin"
            let theirs = nginx.scratch + "/range-curl.bin"
            let get = try run(
                netreachPath(), ["get", "-q", "-H", "Range: \(range)", "-o", ours, nginx.url("/file.bin")])
            #expect(get.status == 0, "\(range): \(get.error)")
            let curl = try run("/usr/bin/curl", ["-sS", "-H", "Range: \(range)", "-o", theirs, nginx.url("/file.bin")])
            #expect(curl.status == 0, "\(curl.error)")
            let saved = try Data(contentsOf: URL(fileURLWithPath: ours))
            #expect(saved == (try Data(contentsOf: URL(fileURLWithPath: theirs))), "\(range): \(saved.count) bytes")
            #expect(saved.count < Nginx.fileSize)
        }
        // Two ranges of their own: a usage error.
        let both = try run(
            netreachPath(),
            ["get", "-H", "Range: bytes=0-9", "--continue", "-o", nginx.scratch + "/x", nginx.url("/file.bin")])
        #expect(both.status == 64, "\(both.error)")
    }

    @Test func headPrintsTheHeaderFieldsAsCurlDoes() async throws {
        try await offPool { try Self.headPrintsTheHeaderFieldsAsCurlDoesBody() }
    }

    private static func headPrintsTheHeaderFieldsAsCurlDoesBody() throws {
        let nginx = try Nginx.start()
        defer { nginx.stop() }
        let ours = try run(netreachPath(), ["get", "-q", "-I", nginx.url("/file.bin")])
        #expect(ours.status == 0, "\(ours.error)")
        let curl = try run("/usr/bin/curl", ["-sS", "-I", nginx.url("/file.bin")])
        #expect(ours.output.hasPrefix("HTTP 200 OK\r\n") && ours.output.hasSuffix("\r\n\r\n"), "\(ours.output)")
        // The same fields as curl's (but Date, which moves), in the same order.
        func fields(_ text: String) -> [String] {
            text.components(separatedBy: "\r\n").dropFirst().filter {
                !$0.isEmpty && !$0.lowercased().hasPrefix("date:")
            }.map { $0.lowercased() }
        }
        #expect(fields(ours.output) == fields(curl.output), "ours: \(ours.output) curl: \(curl.output)")
        let log = (try? String(contentsOfFile: nginx.scratch + "/access.log", encoding: .utf8)) ?? ""
        #expect(log.contains("\"HEAD /file.bin HTTP/1.1\" 200"), "\(log)")
        let conflicting = try run(netreachPath(), ["get", "-I", "-d", "x", nginx.url("/file.bin")])
        #expect(conflicting.status == 64, "\(conflicting.error)")
    }

    @Test func anErrorStatusLeavesTheOutputFileAsItWas() async throws {
        try await offPool { try Self.anErrorStatusLeavesTheOutputFileAsItWasBody() }
    }

    private static func anErrorStatusLeavesTheOutputFileAsItWasBody() throws {
        let nginx = try Nginx.start()
        defer { nginx.stop() }
        let file = nginx.scratch + "/keep.txt"
        try Data("precious\n".utf8).write(to: URL(fileURLWithPath: file))
        let missing = try run(netreachPath(), ["get", "-q", "--retries", "0", "-o", file, nginx.url("/missing")])
        #expect(missing.status == 22, "\(missing.error)")
        #expect(try String(contentsOfFile: file, encoding: .utf8) == "precious\n")
        let asked = try run(
            netreachPath(), ["get", "-q", "--retries", "0", "--write-error-body", "-o", file, nginx.url("/missing")])
        #expect(asked.status == 22)
        #expect(try String(contentsOfFile: file, encoding: .utf8).contains("404"))
    }

    @Test func aFailureSaysHowManyAttemptsWereMade() async throws {
        try await offPool { try Self.aFailureSaysHowManyAttemptsWereMadeBody() }
    }

    private static func aFailureSaysHowManyAttemptsWereMadeBody() throws {
        let nginx = try Nginx.start()
        defer { nginx.stop() }
        let missing = try run(netreachPath(), ["get", "--retries", "0", nginx.url("/missing")])
        #expect(missing.status == 22)
        #expect(missing.error.contains("HTTP 404") && missing.error.contains("(1 attempt, after"), "\(missing.error)")
        // Nothing listens on nginx's port once it has stopped: refused (curl 7), provably unsent,
        // retried only when asked (curl's --retry-connrefused).
        let port = nginx.port
        nginx.stop()
        let refused = try run(netreachPath(), ["get", "--retries", "2", "--json", "http://127.0.0.1:\(port)/"])
        #expect(refused.status == 7, "\(refused.error)")
        #expect(refused.output.contains("\"attempts\":1"), "\(refused.output)")
        #expect(
            refused.output.contains("\"exitStatus\":7")
                && refused.output.contains("\"transportKind\":\"cannotConnect\""), "\(refused.output)")
        #expect(refused.output.contains("cannot connect to 127.0.0.1:\(port): Connection refused"), "\(refused.output)")
        let asked = try run(
            netreachPath(), ["get", "--retries", "2", "--retry-connrefused", "--json", "http://127.0.0.1:\(port)/"])
        #expect(asked.status == 7, "\(asked.error)")
        #expect(asked.output.contains("\"attempts\":3"), "\(asked.output)")
    }

    @Test func aPrivateCAIsTrustedWithCacertAsCurlDoes() async throws {
        try await offPool { try Self.aPrivateCAIsTrustedWithCacertAsCurlDoesBody() }
    }

    private static func aPrivateCAIsTrustedWithCacertAsCurlDoesBody() throws {
        let nginx = try Nginx.start(tls: true)
        defer { nginx.stop() }
        let url = nginx.tlsURL("/file.bin")
        let cert = nginx.scratch + "/server.pem"
        let ours = nginx.scratch + "/tls-ours.bin"
        let trusted = try run(netreachPath(), ["get", "-q", "--cacert", cert, "-o", ours, url])
        #expect(trusted.status == 0, "\(trusted.error)")
        let curl = try run("/usr/bin/curl", ["-sS", "--cacert", cert, url])
        #expect(curl.status == 0, "\(curl.error)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: ours)) == curl.outputData)

        // Without it: a refused certificate that names the host, exit 60 as curl, nothing saved.
        let untrusted = try run(
            netreachPath(), ["get", "-q", "--retries", "0", "-o", nginx.scratch + "/untrusted.bin", url])
        #expect(untrusted.status == 60, "\(untrusted.error)")
        #expect(untrusted.error.contains("not trusted"), "\(untrusted.error)")
        #expect(untrusted.error.contains("TLS") && untrusted.error.contains("127.0.0.1"), "\(untrusted.error)")
        #expect(!FileManager.default.fileExists(atPath: nginx.scratch + "/untrusted.bin"))

        // The certificate names the address 127.0.0.1 only: by the name localhost it is refused,
        // as curl refuses it (60), although the connection goes to that very address.
        let byName = "https://localhost:\(nginx.tlsPort)/file.bin"
        let mismatch = try run(netreachPath(), ["get", "-q", "--retries", "0", "--cacert", cert, byName])
        let curlByName = try run("/usr/bin/curl", ["-sS", "-o", "/dev/null", "--cacert", cert, byName])
        #expect(
            mismatch.status == 60 && curlByName.status == 60,
            "ours \(mismatch.status) \(mismatch.error); curl \(curlByName.status)")
        #expect(
            mismatch.error.contains("another host name") && mismatch.error.contains("localhost"), "\(mismatch.error)")

        // --insecure works, and says what it costs.
        let insecure = try run(netreachPath(), ["get", "-q", "--insecure", "-o", nginx.scratch + "/insecure.bin", url])
        #expect(insecure.status == 0, "\(insecure.error)")
        #expect(insecure.error.contains("warning: --insecure"), "\(insecure.error)")

        // The command line has one HTTP client: --transport is gone (the URLSession transport is
        // the library's; TLSTransportTests holds it to refusing a CA it cannot take).
        let unsupported = try run(netreachPath(), ["get", "--transport", "urlsession", "--cacert", cert, url])
        #expect(unsupported.status == 64, "\(unsupported.error)")
        #expect(unsupported.error.contains("--transport"), "\(unsupported.error)")
        let missing = try run(netreachPath(), ["get", "--cacert", "/nonexistent/ca.pem", url])
        #expect(missing.status == 64 && missing.error.contains("/nonexistent/ca.pem"), "\(missing.error)")
    }

    @Test func replacingAFileKeepsItsOwnerAndMode() async throws {
        try await offPool { try Self.replacingAFileKeepsItsOwnerAndModeBody() }
    }

    private static func replacingAFileKeepsItsOwnerAndModeBody() throws {
        let nginx = try Nginx.start()
        defer { nginx.stop() }
        let file = nginx.scratch + "/owned.bin"
        try Data("old".utf8).write(to: URL(fileURLWithPath: file))
        #expect(chown(file, 1234, 5678) == 0 && chmod(file, 0o600) == 0)
        let get = try run(netreachPath(), ["get", "-q", "-o", file, nginx.url("/file.bin")])
        #expect(get.status == 0, "\(get.error)")
        var status = stat()
        #expect(stat(file, &status) == 0)
        #expect(status.st_uid == 1234 && status.st_gid == 5678, "owner \(status.st_uid):\(status.st_gid)")
        #expect(status.st_mode & 0o7777 == 0o600, "mode \(String(status.st_mode & 0o7777, radix: 8))")
        #expect(Int(status.st_size) == Nginx.fileSize)
    }

    @Test func aDeviceNodeIsWrittenInPlaceAndAFullDeviceIsExit23() async throws {
        try await offPool { try Self.aDeviceNodeIsWrittenInPlaceAndAFullDeviceIsExit23Body() }
    }

    private static func aDeviceNodeIsWrittenInPlaceAndAFullDeviceIsExit23Body() throws {
        let nginx = try Nginx.start()
        defer { nginx.stop() }
        // A private mount namespace with its own tmpfs: the nodes exist only there.
        let script = """
            set -e
            d=$(mktemp -d)
            mount -t tmpfs none "$d"
            mknod "$d/null" c 1 3
            mknod "$d/full" c 1 7
            "$1" get -q -o "$d/null" "$2"; echo "null:$?:$(stat -c %F "$d/null")"
            set +e
            "$1" get -q --retries 0 -o "$d/full" "$2" 2>"$d/err"; echo "full:$?:$(stat -c %F "$d/full"):$(cat "$d/err")"
            ls "$d"
            """
        let result = try run(
            "/usr/bin/unshare",
            [
                "-m", "--propagation", "private", "sh", "-c", script, "sh",
                netreachPath(), nginx.url("/file.bin"),
            ])
        #expect(result.status == 0, "\(result.error)")
        #expect(result.output.contains("null:0:character special file"), "\(result.output)")
        #expect(result.output.contains("full:23:character special file"), "\(result.output)")
        #expect(result.output.contains("No space left on device"), "\(result.output)")
        #expect(!result.output.contains(".part"), "\(result.output)")
    }
}

// MARK: - nginx on loopback

/// nginx serving a 4 MB file on 127.0.0.1 (and at 2 MB/s under /slow/, and its first 400 kB as
/// small.bin), from a scratch directory that holds its configuration, logs and pid file.
struct Nginx {
    static let fileSize = 4_000_000
    static let smallSize = 400_000
    let scratch: String
    let port: Int
    let tlsPort: Int
    let process: ChildProcess

    func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }
    func tlsURL(_ path: String) -> String { "https://127.0.0.1:\(tlsPort)\(path)" }

    /// With `tls`, also serves HTTPS with a self-signed certificate for 127.0.0.1 (`server.pem`).
    static func start(tls: Bool = false) throws -> Nginx {
        let scratch = NSTemporaryDirectory() + "netreach-nginx-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: scratch + "/root/slow", withIntermediateDirectories: true)
        let bytes = try randomBytes(fileSize)
        try bytes.write(to: URL(fileURLWithPath: scratch + "/root/file.bin"))
        try bytes.write(to: URL(fileURLWithPath: scratch + "/root/slow/file.bin"))
        try bytes.prefix(smallSize).write(to: URL(fileURLWithPath: scratch + "/root/small.bin"))
        if tls {
            let made = try run(
                "/usr/bin/openssl",
                [
                    "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-keyout", scratch + "/server.key", "-out", scratch + "/server.pem", "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                ])
            guard made.status == 0 else { throw NginxError(log: "openssl: \(made.error)") }
        }
        for attempt in 0..<5 {
            let port = try ExternalServer.freePort()
            let tlsPort = tls ? try ExternalServer.freePort() : 0
            let tlsServer =
                tls
                ? """
                    server {
                        listen 127.0.0.1:\(tlsPort) ssl;
                        ssl_certificate \(scratch)/server.pem;
                        ssl_certificate_key \(scratch)/server.key;
                        root \(scratch)/root;
                    }
                """ : ""
            let config = """
                daemon off;
                worker_processes 1;
                pid \(scratch)/nginx.pid;
                error_log \(scratch)/error.log;
                events { worker_connections 64; }
                http {
                    access_log \(scratch)/access.log;
                    client_body_temp_path \(scratch)/tmp;
                    proxy_temp_path \(scratch)/tmp;
                    fastcgi_temp_path \(scratch)/tmp;
                    uwsgi_temp_path \(scratch)/tmp;
                    scgi_temp_path \(scratch)/tmp;
                    server {
                        listen 127.0.0.1:\(port);
                        root \(scratch)/root;
                        location /slow/ { limit_rate 2m; }
                    }
                \(tlsServer)
                }
                """
            try config.write(toFile: scratch + "/nginx.conf", atomically: true, encoding: .utf8)
            let process = try ChildProcess(
                "/usr/sbin/nginx", ["-c", scratch + "/nginx.conf", "-p", scratch], output: .null, error: .null)
            // Ready when it accepts a connection (bounded: 10 s).
            let deadline = Date().addingTimeInterval(10)
            while Date() < deadline && process.isRunning {
                if ExternalServer.canConnect(host: "127.0.0.1", port: port)
                    && (!tls || ExternalServer.canConnect(host: "127.0.0.1", port: tlsPort))
                {
                    // Accepting is not enough: another test's server may have taken the port.
                    guard ExternalServer.portsNotListenedOn(by: process.pid, tls ? [port, tlsPort] : [port]).isEmpty
                    else { break }
                    return Nginx(scratch: scratch, port: port, tlsPort: tlsPort, process: process)
                }
                usleep(20_000)
            }
            process.kill()
            _ = process.waitBlocking(timeout: .seconds(10))
            if attempt == 4 { break }
        }
        throw NginxError(log: (try? String(contentsOfFile: scratch + "/error.log", encoding: .utf8)) ?? "")
    }

    func stop() {
        process.terminate()
        if process.waitBlocking(timeout: .seconds(5)) == nil { process.kill() }
        _ = process.waitBlocking(timeout: .seconds(10))
        try? FileManager.default.removeItem(atPath: scratch)
    }
}

struct NginxError: Error, CustomStringConvertible {
    var log: String
    var description: String { "nginx did not start: \(log)" }
}

// MARK: - Running commands

/// The `netreach` executable the tests run.
func netreachPath() throws -> String {
    try NetreachProcess.executable().path
}

struct RunResult {
    var status: Int32
    var outputData: Data
    var error: String
    var output: String { String(decoding: outputData, as: UTF8.self) }
}

/// Runs `executable` with `arguments` to its end (killed after 60 s), collecting both outputs.
func run(_ executable: String, _ arguments: [String]) throws -> RunResult {
    let child = try ChildProcess(executable, arguments)
    var status = child.waitBlocking(timeout: .seconds(60))
    if status == nil {
        child.kill()
        status = child.waitBlocking(timeout: .seconds(10))
    }
    return RunResult(status: status ?? -1, outputData: child.output, error: child.standardError)
}

/// A test file's worth of random bytes, read from the kernel (building them one `UInt8.random`
/// at a time took seconds in a debug build).
func randomBytes(_ count: Int) throws -> Data {
    let source = try FileHandle(forReadingFrom: URL(fileURLWithPath: "/dev/urandom"))
    defer { try? source.close() }
    return try source.read(upToCount: count) ?? Data()
}
#endif
