import ArgumentParser
import Dispatch
import HTTPTypes
import NetReach
import NetReachHTTP
import NetReachSystem
import OpenAPIRuntime

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// `netreach get URL`: the connectivity-aware HTTP layer from the shell. Waits for the network
/// when asked, retries only when that is safe, and says what happened in one line.
struct GetCommand: NetreachSubcommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        _superCommandName: NetreachCommand.commandName,
        abstract: "Send an HTTP request that can wait for the network and is retried only when safe.",
        discussion: """
            The body goes to standard output (or --output FILE); a one-line summary goes to \
            standard error:
              netreach: 200 OK, 1 attempt, waited 2.4s for connectivity, 1532 bytes in 2.5s
            When standard error is a terminal, a spinner shows why the request is waiting and a \
            bar shows download progress.

            Without --wait-for-connectivity the request is attempted even when the path is \
            unsatisfied (no preflight), and a failure says what the path was. With it, the \
            request waits (within --max-time) until the path is satisfied, then starts.

            Timeouts: --stall-timeout (30s) ends an attempt when no byte moves for that long; a \
            download that keeps flowing is never cut. --max-time (no limit unless given; \
            --timeout is another name for it) bounds the whole command.

            Downloads: with --output, the body goes to FILE.part and is renamed over FILE when \
            whole; an existing FILE keeps its owner and mode, and a device or pipe (/dev/null) is \
            written in place. When an attempt breaks, the retry asks for the rest (Range, with \
            If-Range, and Accept-Encoding: identity, so that the range counts the bytes as \
            written, decoded); a failed run keeps FILE.part, and --continue resumes it later. A \
            206 in a content coding, or of another version than If-Range named, is never \
            spliced: the next attempt asks for the whole body. A body that ends before its \
            Content-Length (or last chunk) is exit status 18, what came kept, as curl keeps it.

            Content codings: as curl --compressed, get asks for gzip and deflate \
            (Accept-Encoding: deflate, gzip) and writes the body decoded (gzip, zlib or raw \
            deflate, and stacked codings such as 'gzip, gzip'); --compressed is accepted and \
            changes nothing, and -H 'Accept-Encoding: identity' asks for the body uncoded. br, \
            zstd or any other coding sent unasked is exit status 61, never written as if decoded.

            Header fields: as curl sends User-Agent: curl/X and Accept: */*, get sends \
            User-Agent: netreach/\(NetreachCommand.version) and Accept: */*; --user-agent or an \
            -H field of the same name replaces either, and -H 'Name:' (nothing after the colon) \
            removes it, as -A '' removes the User-Agent. -H 'Accept-Encoding:' sends no \
            Accept-Encoding and writes the body as it came, coded or not (as curl without \
            --compressed). -H 'Host:' is refused (64): curl then sends no Host at all, which \
            HTTP/1.1 forbids, and the transport always writes one; -H 'Host: NAME' sends another.

            Connecting elsewhere: --resolve HOST:PORT:ADDR and --connect-to \
            HOST1:PORT1:HOST2:PORT2 send the connections for a host and port (a redirect's too) \
            to another address or host, as curl's options of those names do; Host, the TLS server \
            name and the certificate's name stay the URL's host. Through a proxy they do not apply.

            Retries: GET, HEAD, OPTIONS, PUT, DELETE and TRACE are retried on 408, 429, 500, \
            502, 503, 504 and failures that can pass: timeouts, a connection lost, a name the \
            resolver could not look up now (capped exponential back-off with jitter, \
            Retry-After honoured). As curl's --retry, not a refused connection unless \
            --retry-connrefused, nor a name that does not exist, a proxy that refused, a \
            refused certificate or a 4xx. POST and PATCH are retried only if the request \
            provably never left, or with --idempotency-key (or an Idempotency-Key header), \
            whose key is the same on every attempt.

            Examples:
              netreach get https://example.com/ --wait-for-connectivity --max-time 2m
              netreach get -X POST -d @order.json -H 'Content-Type: application/json' \\
                  --idempotency-key https://api.example.com/orders
              netreach get https://example.com/big.iso --output big.iso --retries 5
              netreach get https://example.com/big.iso --output big.iso --continue
              netreach get --resolve example.com:443:127.0.0.1 https://example.com/
              netreach get --create-dirs -o 2026/q4/report.pdf https://example.com/report.pdf

            \(ExitStatusTable.help(for: "get"))
            """
    )

    @Argument(help: ArgumentHelp("The http or https URL.", valueName: "url"))
    var url: String

    @Option(
        name: [.customShort("X"), .customLong("request")],
        help: ArgumentHelp("The method. (default: GET, or POST with --data)", valueName: "method"))
    var method: String?

    @Flag(
        name: [.customShort("I"), .customLong("head")],
        help: "Send HEAD and print the status line and header fields on standard output (as curl -I).")
    var head = false

    @Option(
        name: [.customShort("H"), .customLong("header")],
        help: ArgumentHelp(
            "A header field, 'Name: value'; repeat for more. It replaces the default User-Agent or Accept of its name; 'Name:' with nothing after it removes one (as curl; 'Accept-Encoding:' also leaves the body coded as it came, and 'Host:' is refused: HTTP/1.1 needs one), 'Name;' sends it empty.",
            valueName: "header"))
    var headers: [String] = []

    @Option(
        name: [.customShort("A"), .customLong("user-agent")], parsing: .unconditional,
        help: ArgumentHelp(
            "The User-Agent to send instead of netreach/\(NetreachCommand.version); '' sends none (as curl -A '').",
            valueName: "name"))
    var userAgent: String?

    @Option(
        name: [.customShort("d"), .customLong("data")],
        help: ArgumentHelp("The body: text, @FILE for a file's bytes, or @- for standard input.", valueName: "data"))
    var data: String?

    @Option(
        name: [.customShort("u"), .customLong("user")],
        help: ArgumentHelp(
            "Basic authentication, 'user:password' (as in the URL's user:password@).", valueName: "user:password"))
    var user: String?

    @Flag(help: "Wait for a usable network path (within --max-time) instead of failing when there is none.")
    var waitForConnectivity = false

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "The longest the whole command may take, waiting, every attempt and back-off included: 30s, 500ms, 2m, 1h, or seconds. (default: no limit)",
            valueName: "duration"),
        transform: { try WaitDuration(parsing: $0) })
    var maxTime: WaitDuration?

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("The same as --max-time.", valueName: "duration"),
        transform: { try WaitDuration(parsing: $0) })
    var timeout: WaitDuration?

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "Give up an attempt when no byte was sent or received for this long; a transfer that keeps flowing is never cut. (default: 30s)",
            valueName: "duration"),
        transform: { try WaitDuration(parsing: $0) })
    var stallTimeout: WaitDuration = .seconds(30)

    @Option(help: ArgumentHelp("Retries after the first attempt, when safe (0 to 10).", valueName: "n"))
    var retries = 2

    @Flag(help: "Retry a refused connection too (as curl's --retry-connrefused).")
    var retryConnrefused = false

    @Option(
        help: ArgumentHelp("Follow at most this many redirects (0 to 50; never from https to http).", valueName: "n"))
    var maxRedirs = 10

    @Flag(help: "Do not follow redirects: a 3xx is the answer (exit 22).")
    var noLocation = false

    @Flag(help: "Send a new Idempotency-Key (the same on every attempt), which makes a POST or PATCH safe to retry.")
    var idempotencyKey = false

    @Option(
        name: [.short, .long],
        help: ArgumentHelp(
            "Write the body to this file instead of standard output: to FILE.part first, renamed over FILE when whole (a device or pipe is written in place). '-' is standard output, as with curl; './-' a file named '-'.",
            valueName: "file"))
    var output: String?

    /// The file `--output` names: `nil` for standard output, whether there is no `--output` or it
    /// is `-` (curl's spelling).
    private var outputFile: String? { output == "-" ? nil : output }

    @Flag(
        help:
            "Create the directories --output FILE needs that are missing (mode 0750, as curl --create-dirs); without it a missing directory is exit status 23."
    )
    var createDirs = false

    @Flag(
        name: [.customShort("C"), .customLong("continue")],
        help: "Continue a partial --output file (FILE.part, or FILE) from where it stopped, with a range request.")
    var continueDownload = false

    @Flag(
        help: "Write the body of an unsuccessful status to --output too; by default an error leaves the file as it was."
    )
    var writeErrorBody = false

    @Option(
        name: .customLong("max-filesize"),
        help: ArgumentHelp(
            "Stop with status 63 once the body passes this many bytes (k, M, G: 1024, 1024², 1024³), counted as written: after a gzip or deflate body is decoded. A body announced larger fails before it is written. Default: 1G for a decoded body, no limit otherwise.",
            valueName: "bytes"),
        transform: { value in
            guard let bytes = Self.byteCount(value) else {
                throw ValidationError("--max-filesize takes a number of bytes, with k, M or G after it if you like.")
            }
            return bytes
        })
    var maxFilesize: Int64?

    @Flag(
        help:
            "Print JSON lines on standard output: waiting events, then the response (or the error); the response line carries the body, up to 64 MiB, unless --output."
    )
    var json = false

    @Flag(name: [.short, .long], help: "No summary, spinner or progress bar; errors still go to standard error.")
    var quiet = false

    @OptionGroup(title: "TLS, proxies and connecting")
    var connection: ConnectionOptions

    // Gone with the second and third executables (issue 22); kept hidden so that a script that
    // still says --transport hears why, rather than "'urlsession' is not a URL".
    @Option(help: .hidden)
    var transport: String?

    func validate() throws {
        if let transport {
            throw ValidationError(
                "--transport \(transport): netreach get has one HTTP client, AsyncHTTPClient; --transport is no longer an option (the URLSession transport is the NetReachURLSession library's)."
            )
        }
        _ = try target
        _ = try httpMethod
        let (given, removed) = try headerLines
        // curl sends no Host then; AsyncHTTPClient writes one whenever a request has none, so
        // it could only be sent anyway, which the user said not to do.
        let host = HTTPField.Name("Host")!
        if removed.contains(host), given[host] == nil {
            throw ValidationError(
                "-H 'Host:' would send no Host field, as curl does, but HTTP/1.1 requires one (RFC 9112, section 3.2: a server answers 400 without it) and netreach's HTTP client always writes it; give -H 'Host: NAME' to send another."
            )
        }
        guard (0...10).contains(retries) else { throw ValidationError("--retries must be between 0 and 10.") }
        guard (0...50).contains(maxRedirs) else { throw ValidationError("--max-redirs must be between 0 and 50.") }
        if maxTime != nil && timeout != nil {
            throw ValidationError("--timeout is the same as --max-time: give one of them.")
        }
        if totalLimit?.isZero == true { throw ValidationError("--max-time must be more than 0.") }
        guard !stallTimeout.isZero else { throw ValidationError("--stall-timeout must be more than 0.") }
        if output?.isEmpty == true { throw ValidationError("--output needs a file name.") }
        if continueDownload && outputFile == nil {
            throw ValidationError("--continue needs --output FILE: it resumes a file.")
        }
        if continueDownload, try headerLines.fields[.range] != nil {
            throw ValidationError("--continue asks for a range of its own: give it or a Range header, not both.")
        }
        if writeErrorBody && outputFile == nil { throw ValidationError("--write-error-body needs --output FILE.") }
        if createDirs && outputFile == nil { throw ValidationError("--create-dirs needs --output FILE.") }
        if head && outputFile != nil {
            throw ValidationError(
                "--head prints the header fields on standard output: redirect it rather than give --output.")
        }
        if let user, !user.contains(":") { throw ValidationError("--user takes 'user:password'.") }
    }

    // MARK: What the flags mean

    /// The URL, checked: http or https with a host.
    private var target: URL {
        get throws(ValidationError) {
            guard let parsed = URL(string: url), let scheme = parsed.scheme?.lowercased(),
                scheme == "http" || scheme == "https", parsed.host?.isEmpty == false
            else {
                throw ValidationError(
                    "'\(url)' is not an http or https URL with a host, such as https://example.com/path.")
            }
            return parsed
        }
    }

    private var httpMethod: HTTPRequest.Method {
        get throws(ValidationError) {
            if head {
                if data != nil { throw ValidationError("--head sends no body: give --head or --data, not both.") }
                if let method, method.uppercased() != "HEAD" {
                    throw ValidationError("--head is the method HEAD: it cannot be -X \(method).")
                }
                return .head
            }
            guard let method else { return data == nil ? .get : .post }
            guard let parsed = HTTPRequest.Method(method.uppercased()) else {
                throw ValidationError("'\(method)' is not an HTTP method (a token such as GET, POST, PUT, DELETE).")
            }
            return parsed
        }
    }

    /// The `-H` lines: the fields to send, and the names of those `Name:` (nothing after the colon)
    /// removes, as curl reads them. `Name;` is a field sent empty.
    private var headerLines: (fields: HTTPFields, removed: Set<HTTPField.Name>) {
        get throws(ValidationError) {
            var fields = HTTPFields()
            var removed = Set<HTTPField.Name>()
            for line in headers {
                let refusal = ValidationError(
                    "'\(line)' is not a header field; write it as 'Name: value' ('Name:' removes one, 'Name;' sends it empty)."
                )
                func name(_ text: Substring) throws(ValidationError) -> HTTPField.Name {
                    guard let name = HTTPField.Name(text.trimmingSpaces()) else { throw refusal }
                    return name
                }
                if let colon = line.firstIndex(of: ":") {
                    let field = try name(line[..<colon])
                    let value = String(line[line.index(after: colon)...]).trimmingSpaces()
                    if value.isEmpty {
                        removed.insert(field)
                    } else {
                        fields.append(HTTPField(name: field, value: value))
                    }
                } else if let semicolon = line.firstIndex(of: ";"),
                    line[line.index(after: semicolon)...].allSatisfy({ $0 == " " || $0 == "\t" })
                {
                    fields.append(HTTPField(name: try name(line[..<semicolon]), value: ""))
                } else {
                    throw refusal
                }
            }
            return (fields, removed)
        }
    }

    /// What `get` sends besides the request's own fields, as curl sends `User-Agent: curl/X` and
    /// `Accept: */*`: `User-Agent: netreach/VERSION` (or `--user-agent`'s; none for `-A ''`) and
    /// `Accept: */*`, each unless a `-H` line gives or removes a field of its name. They come
    /// first, then the `-H` fields in their order, as curl orders them.
    private var headerFields: HTTPFields {
        get throws(ValidationError) {
            let (given, removed) = try headerLines
            var fields = HTTPFields()
            func add(_ name: HTTPField.Name, _ value: String) {
                guard !value.isEmpty, given[name] == nil, !removed.contains(name) else { return }
                fields.append(HTTPField(name: name, value: value))
            }
            add(.userAgent, userAgent ?? "netreach/\(NetreachCommand.version)")
            add(.accept, "*/*")
            fields.append(contentsOf: given)
            return fields
        }
    }

    // MARK: Running

    func run(_ capabilities: Capabilities) async throws {
        if quiet || json { NetReachDiagnostics.handler = nil }
        var request = Request(method: try httpMethod, target: .url(try target), headerFields: try headerFields)
        request.body = try readBody()
        if let user {
            request.headerFields[.authorization] = "Basic " + Data(user.utf8).base64EncodedString()
        }
        // A key given as a header is the caller's promise too: the service must know of it.
        if let key = request.headerFields[.init("Idempotency-Key")!] {
            request.headerFields[.init("Idempotency-Key")!] = nil
            request.idempotencyKey = key
        } else if idempotencyKey {
            request = request.withIdempotencyKey()
        }

        // -H 'Accept-Encoding:': no coding asked for, so none is decoded (curl without --compressed).
        let (given, removed) = try headerLines
        let leavesCodings = removed.contains(.acceptEncoding) && given[.acceptEncoding] == nil
        // Before anything starts: an option the transport cannot honour is a usage error.
        let client = try connection.makeTransport { [maxFilesize] chosen throws(TransportSettingsError) in
            var settings = chosen
            if leavesCodings { settings.decodesContentCodings = false }
            guard let maxFilesize else { return try capabilities.makeTransport(settings) }
            var limited = settings
            limited.maximumDecodedBodySize = maxFilesize
            return FileSizeLimitedTransport(base: try capabilities.makeTransport(limited), limit: maxFilesize)
        }
        let monitor = PathMonitor()
        // Without waiting, the path only explains a failure: the service starts the monitor then,
        // so a request that succeeds never pays for reading the system's network state.
        if waitForConnectivity { monitor.start(queue: DispatchQueue(label: "netreach.monitor")) }
        defer { monitor.cancel() }

        let report = GetReport(json: json, quiet: quiet, monitor: monitor)
        let service = NetworkService(
            policy: policy, transport: client, monitor: monitor,
            onWaiting: { report.waiting($0) })

        let started = ContinuousClock.now
        let output = outputFile
        let sending = Task {
            [request, output, json, continueDownload, writeErrorBody, createDirs] () async throws -> (Response, Int64)
            in
            // JSON lines carry the body itself (bounded by the policy's buffered limit); otherwise
            // the body goes out as it arrives, to the file or to standard output.
            if json && output == nil {
                let response = try await service.send(request) { received, expected in
                    report.progress(received, expected)
                }
                return (response, Int64(response.body.count))
            }
            return try await Self.stream(
                request, through: service, to: output, resume: continueDownload,
                writeErrorBody: writeErrorBody, createDirs: createDirs, report: report)
        }
        let signalSources = TerminationSignals.install { sending.cancel() }
        defer { signalSources.forEach { $0.cancel() } }

        let result = await sending.result
        report.finishTerminal()
        let elapsed = ContinuousClock.now - started
        switch result {
        case .success(let (response, count)):
            if head && !json {
                do throws(StandardStream.WriteError) {
                    try StandardStream.output.write(Data(Self.headerBlock(response).utf8))
                } catch {
                    throw CLIExitCode.outputFailed(error)
                }
            }
            report.response(response, bytes: count, key: request.idempotencyKey, output: output, elapsed: elapsed)
            // A --json line that could not be written is lost output too.
            if let lost = report.lostOutput { throw CLIExitCode.outputFailed(lost) }
        case .failure(let thrown as ExitCode):
            // The body could not be written to standard output (said on standard error already).
            throw thrown
        case .failure(let thrown):
            // The service throws only NetworkError; Task erases the type.
            let error = thrown as? NetworkError ?? .cancelled
            // An error status's body goes to standard output, never over an --output file.
            if case .unsuccessfulStatus(_, let body) = error.reason, output == nil, !json {
                do throws(StandardStream.WriteError) { try StandardStream.output.write(body) } catch {
                    throw CLIExitCode.outputFailed(error)
                }
            }
            report.failure(error, key: request.idempotencyKey, output: output, elapsed: elapsed)
            throw CLIExitCode.exitCode(for: error)
        }
    }

    /// Sends `request` and writes the body as it arrives: to `output` (through `NAME.part`, resumed
    /// across attempts with range requests) or to standard output. Returns the response and how
    /// many bytes went out.
    private static func stream(
        _ request: Request, through service: NetworkService, to output: String?, resume: Bool,
        writeErrorBody: Bool, createDirs: Bool, report: GetReport
    ) async throws -> (Response, Int64) {
        if let output {
            do throws(NetworkError) {
                // Before anything is sent, as the file itself is opened then.
                if createDirs { try OutputDirectories.create(for: output) }
                let result = try await service.download(request, to: URL(fileURLWithPath: output), resume: resume) {
                    received, expected in
                    report.progress(received, expected)
                }
                if !result.resumedAt.isEmpty || result.restarts > 0 { report.resumed(result) }
                let response = Response(
                    status: result.status, headerFields: result.headerFields, url: result.url,
                    attempts: result.attempts, waitedForConnectivity: result.waitedForConnectivity)
                return (response, result.bytes)
            } catch {
                if case .unsuccessfulStatus(_, let body) = error.reason, writeErrorBody {
                    saveErrorBody(body, to: output)
                }
                throw error
            }
        }
        let streaming = try await service.bytes(request)
        let expected = streaming.body.expectedLength
        var written: Int64 = 0
        report.progress(0, expected)
        do {
            for try await chunk in streaming.body {
                try StandardStream.output.write(chunk)
                written += Int64(chunk.count)
                report.progress(written, expected)
            }
        } catch let error as StandardStream.WriteError {
            // A body that was lost must never end in a "200 OK" summary and status 0.
            throw CLIExitCode.outputFailed(error)
        }
        let response = Response(
            status: streaming.status, headerFields: streaming.headerFields, url: streaming.url,
            attempts: streaming.attempts, waitedForConnectivity: streaming.waitedForConnectivity)
        return (response, written)
    }

    /// `--max-filesize`'s value: a number of bytes, perhaps with curl's k, M or G (powers of
    /// 1024) after it; nil for anything else.
    static func byteCount(_ text: String) -> Int64? {
        let multipliers: [Character: Int64] = [
            "k": 1 << 10, "K": 1 << 10, "m": 1 << 20, "M": 1 << 20, "g": 1 << 30, "G": 1 << 30,
        ]
        var digits = Substring(text)
        var multiplier: Int64 = 1
        if let last = digits.last, let found = multipliers[last] {
            multiplier = found
            digits = digits.dropLast()
        }
        guard !digits.isEmpty, digits.allSatisfy(\.isASCII), let number = Int64(digits), number >= 0 else { return nil }
        let (bytes, overflow) = number.multipliedReportingOverflow(by: multiplier)
        return overflow ? nil : bytes
    }

    /// `--head`'s output, as curl -I prints it (CRLF line ends, a blank line at the end): the
    /// status line, then each header field. The status line names no HTTP version, which the
    /// transport does not report: `HTTP 200 OK`.
    static func headerBlock(_ response: Response) -> String {
        var lines = [
            "HTTP \(response.status.code)"
                + (response.status.reasonPhrase.isEmpty ? "" : " \(response.status.reasonPhrase)")
        ]
        for field in response.headerFields { lines.append("\(field.name.rawName): \(field.value)") }
        return lines.joined(separator: "\r\n") + "\r\n\r\n"
    }

    /// `--write-error-body`: what the server said about an error status replaces the file.
    private static func saveErrorBody(_ body: Data, to output: String) {
        do throws(OutputFileError) {
            let file = try OutputFile.open(output)
            try file.write(body)
            try file.commit()
        } catch {
            StandardStream.complain("cannot write the error body to '\(output)': \(error)")
        }
    }

    /// `--max-time` (or its other name, `--timeout`).
    private var totalLimit: WaitDuration? { maxTime ?? timeout }

    private var policy: RequestPolicy {
        var policy = RequestPolicy()
        policy.waitsForConnectivity = waitForConnectivity
        if let total = totalLimit { policy.timeoutIntervalForResource = total.duration }
        policy.timeoutIntervalForRequest = stallTimeout.duration
        policy.redirects = noLocation ? .never : .follow(limit: maxRedirs)
        var retryPolicy = DefaultRetryPolicy()
        retryPolicy.retryLimit = retries
        // curl's transient failures: a refused connection only when asked.
        if !retryConnrefused { retryPolicy.retryableTransportFailures.remove(.cannotConnect) }
        policy.retryPolicy = retryPolicy
        return policy
    }

    /// The `--data` bytes: literal text, a file (`@FILE`, read as it is sent) or standard input (`@-`,
    /// read as it is sent, once).
    private func readBody() throws(ExitCode) -> HTTPBody? {
        guard let data else { return nil }
        guard data.hasPrefix("@") else { return HTTPBody(data) }
        let path = String(data.dropFirst())
        if path == "-" { return FileBody.stream(descriptor: 0) }
        do throws(FileBodyError) {
            return try FileBody.make(path: path)
        } catch {
            StandardStream.complain("cannot read --data file \(error)")
            throw CLIExitCode.cannotRead
        }
    }
}
