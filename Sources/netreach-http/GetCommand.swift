import ArgumentParser
import Dispatch
import Foundation
import HTTPTypes
import NetReach
import NetReachAsyncHTTPClient
import NetReachCLI
import NetReachHTTP
import OpenAPIRuntime

/// `netreach get URL`: the connectivity-aware HTTP layer from the shell. Waits for the network
/// when asked, retries only when that is safe, and says what happened in one line.
struct GetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Send an HTTP request that can wait for the network and is retried only when safe.",
        discussion: """
            The body goes to standard output (or --output FILE); a one-line summary goes to \
            standard error:
              netreach: 200 OK, 1 attempt, waited 2.4s for connectivity, 1532 bytes in 2.5s
            When standard error is a terminal, a spinner shows why the request is waiting and a \
            bar shows download progress.

            Without --wait-for-connectivity the request is attempted even when the path is \
            unsatisfied (no preflight), and a failure says what the path was. With it, the \
            request waits (within --timeout) until the path is satisfied, then starts.

            Retries: GET, HEAD, OPTIONS, PUT, DELETE and TRACE are retried on 408, 429, 500, \
            502, 503, 504 and transient failures (capped exponential back-off with jitter, \
            Retry-After honoured). POST and PATCH are retried only if the request provably \
            never left (connection refused, DNS failure) or with --idempotency-key (or an \
            Idempotency-Key header), whose key is the same on every attempt.

            Examples:
              netreach get https://example.com/ --wait-for-connectivity --timeout 2m
              netreach get -X POST -d @order.json -H 'Content-Type: application/json' \\
                  --idempotency-key https://api.example.com/orders
              netreach get https://example.com/big.iso --output big.iso

            \(CLIExitCode.getTable)
            """
    )

    @Argument(help: ArgumentHelp("The http or https URL.", valueName: "url"))
    var url: String

    @Option(name: [.customShort("X"), .customLong("request")],
            help: ArgumentHelp("The method. (default: GET, or POST with --data)", valueName: "method"))
    var method: String?

    @Option(name: [.customShort("H"), .customLong("header")],
            help: ArgumentHelp("A header field, 'Name: value'; repeat for more.", valueName: "header"))
    var headers: [String] = []

    @Option(name: [.customShort("d"), .customLong("data")],
            help: ArgumentHelp("The body: text, @FILE for a file's bytes, or @- for standard input.", valueName: "data"))
    var data: String?

    @Flag(help: "Wait for a usable network path (within --timeout) instead of failing when there is none.")
    var waitForConnectivity = false

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "The longest the whole request may take, waiting and retries included: 30s, 500ms, 2m, 1h, or seconds. (default: 30s)",
            valueName: "duration"),
        transform: { try WaitDuration(parsing: $0) })
    var timeout: WaitDuration = .seconds(30)

    @Option(help: ArgumentHelp("Retries after the first attempt, when safe (0 to 10).", valueName: "n"))
    var retries = 2

    @Flag(help: "Send a new Idempotency-Key (the same on every attempt), which makes a POST or PATCH safe to retry.")
    var idempotencyKey = false

    @Option(name: [.short, .long], help: ArgumentHelp("Write the body to this file instead of standard output.", valueName: "file"))
    var output: String?

    @Flag(help: "Print JSON lines on standard output: waiting events, then the response (or the error).")
    var json = false

    @Flag(name: [.short, .long], help: "No summary, spinner or progress bar; errors still go to standard error.")
    var quiet = false

    @Option(help: ArgumentHelp("The HTTP client: asynchttpclient or urlsession.", valueName: "transport"))
    var transport: TransportChoice = .asynchttpclient

    enum TransportChoice: String, ExpressibleByArgument, CaseIterable {
        case asynchttpclient, urlsession
    }

    func validate() throws {
        _ = try target
        _ = try httpMethod
        _ = try headerFields
        guard (0...10).contains(retries) else { throw ValidationError("--retries must be between 0 and 10.") }
        guard !timeout.isZero else { throw ValidationError("--timeout must be more than 0.") }
        if output?.isEmpty == true { throw ValidationError("--output needs a file name.") }
    }

    // MARK: What the flags mean

    /// The URL, checked: http or https with a host.
    private var target: URL {
        get throws(ValidationError) {
            guard let parsed = URL(string: url), let scheme = parsed.scheme?.lowercased(),
                  scheme == "http" || scheme == "https", parsed.host?.isEmpty == false else {
                throw ValidationError("'\(url)' is not an http or https URL with a host, such as https://example.com/path.")
            }
            return parsed
        }
    }

    private var httpMethod: HTTPRequest.Method {
        get throws(ValidationError) {
            guard let method else { return data == nil ? .get : .post }
            guard let parsed = HTTPRequest.Method(method.uppercased()) else {
                throw ValidationError("'\(method)' is not an HTTP method (a token such as GET, POST, PUT, DELETE).")
            }
            return parsed
        }
    }

    private var headerFields: HTTPFields {
        get throws(ValidationError) {
            var fields = HTTPFields()
            for line in headers {
                guard let colon = line.firstIndex(of: ":"),
                      let name = HTTPField.Name(String(line[..<colon]).trimmingCharacters(in: .whitespaces)) else {
                    throw ValidationError("'\(line)' is not a header field; write it as 'Name: value'.")
                }
                let value = String(line[line.index(after: colon)...]).trimmingCharacters(in: .whitespaces)
                fields.append(HTTPField(name: name, value: value))
            }
            return fields
        }
    }

    // MARK: Running

    func run() async throws {
        if quiet || json { NetReachDiagnostics.handler = nil }
        var request = Request(method: try httpMethod, target: .url(try target), headerFields: try headerFields)
        request.body = try readBody()
        // A key given as a header is the caller's promise too: the service must know of it.
        if let key = request.headerFields[.init("Idempotency-Key")!] {
            request.headerFields[.init("Idempotency-Key")!] = nil
            request.idempotencyKey = key
        } else if idempotencyKey {
            request = request.withIdempotencyKey()
        }

        let monitor = PathMonitor()
        monitor.start(queue: DispatchQueue(label: "netreach.monitor"))
        defer { monitor.cancel() }

        let report = GetReport(json: json, quiet: quiet, monitor: monitor)
        let service = NetworkService(policy: policy, transport: chosenTransport, monitor: monitor,
                                     onWaiting: { report.waiting($0) })

        let started = ContinuousClock.now
        let sending = Task { [request, output, json] () async throws -> (Response, Int64) in
            // JSON lines carry the body itself (bounded by the policy's buffered limit); otherwise
            // the body goes out as it arrives, to the file or to standard output.
            if json && output == nil {
                let response = try await service.send(request) { received, expected in report.progress(received, expected) }
                return (response, Int64(response.body.count))
            }
            return try await Self.stream(request, through: service, to: output, report: report)
        }
        let signalSources = TerminationSignals.install { sending.cancel() }
        defer { signalSources.forEach { $0.cancel() } }

        let result = await sending.result
        report.finishTerminal()
        let elapsed = ContinuousClock.now - started
        switch result {
        case .success(let (response, count)):
            report.response(response, bytes: count, key: request.idempotencyKey, output: output, elapsed: elapsed)
            // A --json line that could not be written is lost output too.
            if let lost = report.lostOutput { throw CLIExitCode.outputFailed(lost) }
        case .failure(let thrown as ExitCode):
            // The body could not be written to standard output (said on standard error already).
            throw thrown
        case .failure(let thrown as StreamFailure):
            report.failure(thrown.error, key: request.idempotencyKey, output: output, elapsed: elapsed)
            throw thrown.exitCode
        case .failure(let thrown):
            // The service throws only NetworkError; Task erases the type.
            let error = thrown as? NetworkError ?? .cancelled
            // An error status's body goes to standard output, never over an --output file.
            if case .unsuccessfulStatus(_, let body) = error, output == nil, !json {
                do throws(StandardStream.WriteError) { try StandardStream.output.write(body) } catch {
                    throw CLIExitCode.outputFailed(error)
                }
            }
            report.failure(error, key: request.idempotencyKey, output: output, elapsed: elapsed)
            throw CLIExitCode.exitCode(for: error)
        }
    }

    /// Why streaming a body ended early: the network error to report and the status to exit with.
    struct StreamFailure: Error {
        var error: NetworkError
        var exitCode: ExitCode
    }

    /// Sends `request` and writes the body as it arrives: to `output` (beside it first, renamed
    /// over it when whole) or to standard output. Returns the response and how many bytes went out.
    private static func stream(
        _ request: Request, through service: NetworkService, to output: String?, report: GetReport
    ) async throws -> (Response, Int64) {
        let file: OutputFile?
        if let output {
            do throws(OutputFileError) { file = try OutputFile.open(output) } catch {
                throw StreamFailure(error: .cannotWrite(error.description), exitCode: CLIExitCode.localFile)
            }
        } else {
            file = nil
        }
        let streaming: StreamingResponse
        do throws(NetworkError) {
            streaming = try await service.bytes(request)
        } catch {
            file?.abandon()
            throw error
        }
        let expected = streaming.body.expectedLength
        var written: Int64 = 0
        report.progress(0, expected)
        do {
            for try await chunk in streaming.body {
                if let file {
                    try file.write(chunk)
                } else {
                    try StandardStream.output.write(chunk)
                }
                written += Int64(chunk.count)
                report.progress(written, expected)
            }
            try file?.commit()
        } catch let error as OutputFileError {
            file?.abandon()
            throw StreamFailure(error: .cannotWrite(error.description), exitCode: CLIExitCode.localFile)
        } catch let error as StandardStream.WriteError {
            // A body that was lost must never end in a "200 OK" summary and status 0.
            throw CLIExitCode.outputFailed(error)
        } catch {
            // Keep what arrived: `--continue` picks it up.
            file?.abandon(keepPartial: written > 0)
            let networkError = error as? NetworkError ?? .cancelled
            throw StreamFailure(error: networkError, exitCode: CLIExitCode.exitCode(for: networkError))
        }
        let response = Response(status: streaming.status, headerFields: streaming.headerFields, url: streaming.url,
                                attempts: streaming.attempts, waitedForConnectivity: streaming.waitedForConnectivity)
        return (response, written)
    }

    private var policy: RequestPolicy {
        var policy = RequestPolicy()
        policy.waitsForConnectivity = waitForConnectivity
        policy.timeoutIntervalForResource = timeout.duration
        policy.timeoutIntervalForRequest = min(timeout.duration, .seconds(30))
        var retryPolicy = DefaultRetryPolicy()
        retryPolicy.retryLimit = retries
        policy.retryPolicy = retryPolicy
        return policy
    }

    private var chosenTransport: any HTTPTransport {
        switch transport {
        case .asynchttpclient: AsyncHTTPClientTransport()
        case .urlsession: URLSessionTransport()
        }
    }

    /// The `--data` bytes: literal text, a file (`@FILE`) or standard input (`@-`).
    private func readBody() throws(ExitCode) -> HTTPBody? {
        guard let data else { return nil }
        guard data.hasPrefix("@") else { return HTTPBody(data) }
        let path = String(data.dropFirst())
        do {
            if path == "-" { return HTTPBody(FileHandle.standardInput.readDataToEndOfFile()) }
            return HTTPBody(try Data(contentsOf: URL(fileURLWithPath: path)))
        } catch {
            StandardStream.complain("cannot read --data file '\(path)': \(error.localizedDescription)")
            throw CLIExitCode.localFile
        }
    }
}
