import NetReach
import NetReachHTTP
import NetReachSystem

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

#if canImport(Glibc)
import Glibc
#endif

/// What `get` tells the person or program that ran it: waiting events, progress, and the outcome,
/// as human lines on standard error or as JSON lines on standard output.
///
/// Terminal decorations (the waiting spinner and the download bar) are drawn on one status line of
/// standard error, only when it is a terminal, and erased before anything else is printed.
final class GetReport: Sendable {
    private let json: Bool
    private let quiet: Bool
    private let monitor: PathMonitor
    private let decorates: Bool
    private let state = Locked(State())

    private struct State {
        /// The spinner's task while a wait is shown.
        var spinner: Task<Void, Never>?
        /// Whether the status line holds something to erase.
        var statusLineDrawn = false
        /// When the progress bar was last drawn (it is redrawn at most every 100 ms).
        var lastBarDrawn: ContinuousClock.Instant?
        /// Why a JSON line could not be written to standard output, if one could not.
        var lostOutput: StandardStream.WriteError?
    }

    /// Why a JSON line could not be written, if one could not (the command then exits 74).
    var lostOutput: StandardStream.WriteError? { state.withLock { $0.lostOutput } }

    init(json: Bool, quiet: Bool, monitor: PathMonitor) {
        self.json = json
        self.quiet = quiet
        self.monitor = monitor
        decorates = !json && !quiet && StandardStream.error.isTerminal
    }

    // MARK: Events

    /// A request started waiting for connectivity.
    func waiting(_ event: WaitingEvent) {
        if json {
            emit(
                WaitingLine(
                    method: event.method.rawValue, url: event.url.absoluteString,
                    reason: event.reason.description, path: event.path))
        } else if decorates {
            startSpinner(reason: event.reason)
        } else if !quiet {
            StandardStream.complain("waiting for connectivity (\(event.reason))")
        }
    }

    /// Body bytes arrived.
    func progress(_ received: Int64, _ expected: Int64?) {
        guard decorates else { return }
        let now = ContinuousClock.now
        let draw = state.withLock { state -> Bool in
            state.spinner?.cancel()
            state.spinner = nil
            let complete = expected.map { received >= $0 } ?? false
            if let last = state.lastBarDrawn, now - last < .milliseconds(100), !complete { return false }
            state.lastBarDrawn = now
            state.statusLineDrawn = true
            return true
        }
        if draw { drawStatusLine(Self.bar(received, expected)) }
    }

    /// Stops the spinner and erases the status line, before the outcome is printed.
    func finishTerminal() {
        let erase = state.withLock { state -> Bool in
            state.spinner?.cancel()
            state.spinner = nil
            defer { state.statusLineDrawn = false }
            return state.statusLineDrawn
        }
        if erase { try? StandardStream.error.write("\r\u{1B}[2K") }
    }

    /// The request succeeded.
    func response(_ response: Response, bytes: Int64, key: String?, output: String?, elapsed: Duration) {
        if json {
            emit(ResponseLine(response, bytes: bytes, key: key, output: output, elapsed: elapsed))
        } else if !quiet {
            let attempts = response.attempts == 1 ? "1 attempt" : "\(response.attempts) attempts"
            let status = [String(response.status.code), response.status.reasonPhrase].filter { !$0.isEmpty }
            StandardStream.complain(
                status.joined(separator: " ") + ", \(attempts), "
                    + "waited \(Self.seconds(response.waitedForConnectivity)) for connectivity, "
                    + "\(bytes) bytes in \(Self.seconds(elapsed))"
                    + (output.map { ", saved to \($0)" } ?? ""))
        }
    }

    /// A download continued with range requests, or started over.
    func resumed(_ result: DownloadResponse) {
        guard !json, !quiet else { return }
        var parts: [String] = []
        if !result.resumedAt.isEmpty {
            parts.append("resumed at byte " + result.resumedAt.map(String.init).joined(separator: ", "))
        }
        if result.restarts > 0 {
            parts.append(
                "started over \(result.restarts == 1 ? "once" : "\(result.restarts) times") (the server sent the whole body again)"
            )
        }
        StandardStream.complain(parts.joined(separator: "; "))
    }

    /// The request failed. Errors are printed even with `--quiet`.
    func failure(_ error: NetworkError, key: String?, output: String?, elapsed: Duration) {
        if json {
            emit(ErrorLine(error, key: key, output: output, elapsed: elapsed))
        } else {
            let attempts = error.attempts
            let tries = attempts == 0 ? "nothing sent" : attempts == 1 ? "1 attempt" : "\(attempts) attempts"
            StandardStream.complain("\(error.reason) (\(tries), after \(Self.seconds(elapsed)))")
        }
    }

    // MARK: Terminal decorations

    private static let spinnerFrames = Array("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")

    private func startSpinner(reason: NotConnectedReason) {
        let monitor = self.monitor
        let task = Task { [weak self] in
            let start = ContinuousClock.now
            var frame = 0
            // The wait ends when the path is satisfied; the first body bytes or the outcome stop
            // the spinner too.
            while !Task.isCancelled, monitor.currentPath.status != .satisfied {
                let waited = Self.seconds(ContinuousClock.now - start)
                self?.drawStatusLine(
                    "\(Self.spinnerFrames[frame % Self.spinnerFrames.count]) waiting for the network: \(reason) (\(waited))"
                )
                frame += 1
                try? await Task.sleep(for: .milliseconds(100))
            }
        }
        state.withLock { state in
            state.spinner?.cancel()
            state.spinner = task
            state.statusLineDrawn = true
        }
    }

    private func drawStatusLine(_ text: String) {
        try? StandardStream.error.write("\r\u{1B}[2K" + text)
    }

    /// `[=========>          ]  45%  1.2 MB / 2.6 MB`, or just the count when the size is unknown.
    static func bar(_ received: Int64, _ expected: Int64?) -> String {
        guard let expected, expected > 0 else { return "downloaded \(bytes(received))" }
        let width = 30
        let fraction = min(1, Double(received) / Double(expected))
        let filled = Int(fraction * Double(width))
        let arrow = filled < width ? ">" : ""
        let bar =
            String(repeating: "=", count: max(0, filled - arrow.count)) + arrow
            + String(repeating: " ", count: width - filled)
        return "[\(bar)] \(Self.padded(Int(fraction * 100), width: 3))%  \(bytes(received)) / \(bytes(expected))"
    }

    /// `512 B`, `1.2 kB`, `3.4 MB`, `1.0 GB` (decimal units, as download tools print).
    static func bytes(_ count: Int64) -> String {
        if count < 1000 { return "\(count) B" }
        let units = ["kB", "MB", "GB", "TB"]
        var value = Double(count) / 1000
        var unit = 0
        while value >= 1000, unit < units.count - 1 {
            value /= 1000
            unit += 1
        }
        return "\(Self.fixed(value, digits: 1)) \(units[unit])"
    }

    /// `2.41s`, for a person.
    static func seconds(_ duration: Duration) -> String {
        "\(fixed(secondsValue(duration), digits: 2))s"
    }

    /// `value` with `digits` decimals, exactly as C's `printf("%.Nf")` writes it (the C library's
    /// own `vsnprintf`, so rounding is the same to the last digit).
    static func fixed(_ value: Double, digits: Int) -> String {
        // 309 digits is the largest finite Double; room for its sign, point and decimals.
        var buffer = [CChar](repeating: 0, count: 330 + max(0, digits))
        let count = buffer.count
        _ = withVaList([value]) { arguments in vsnprintf(&buffer, count, "%.\(max(0, digits))f", arguments) }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// `number` right-aligned in `width` columns (`printf`'s `%Nd`).
    static func padded(_ number: Int, width: Int) -> String {
        let text = String(number)
        return String(repeating: " ", count: max(0, width - text.count)) + text
    }

    static func secondsValue(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) * 1e-18
    }

    // MARK: JSON lines

    private func emit(_ line: some Encodable) {
        guard let text = JSONLine.text(line) else { return }
        do throws(StandardStream.WriteError) {
            try StandardStream.output.writeLine(text)
        } catch {
            state.withLock { $0.lostOutput = $0.lostOutput ?? error }
        }
    }
}

/// `{"event":"waiting", ...}`: a request started waiting for connectivity.
private struct WaitingLine: Encodable {
    let event = "waiting"
    let method: String
    let url: String
    let reason: String
    let path: NetworkPath
}

/// `{"event":"response", ...}`: the final response, with its body when it is not saved to a file.
private struct ResponseLine: Encodable {
    let event = "response"
    let status: Int
    let reasonPhrase: String
    let url: String
    let headers: [String: String]
    let attempts: Int
    let waitedSeconds: Double
    let elapsedSeconds: Double
    let bodyBytes: Int64
    /// The body as text, when it is valid UTF-8 and not saved to `--output`.
    let body: String?
    /// The body in Base64, when it is not valid UTF-8 and not saved to `--output`.
    let bodyBase64: String?
    let output: String?
    let idempotencyKey: String?

    init(_ response: Response, bytes: Int64, key: String?, output: String?, elapsed: Duration) {
        status = response.status.code
        reasonPhrase = response.status.reasonPhrase
        url = response.url.absoluteString
        var headers: [String: String] = [:]
        for field in response.headerFields {
            let name = field.name.canonicalName
            headers[name] = headers[name].map { $0 + ", " + field.value } ?? field.value
        }
        self.headers = headers
        attempts = response.attempts
        waitedSeconds = GetReport.secondsValue(response.waitedForConnectivity)
        elapsedSeconds = GetReport.secondsValue(elapsed)
        bodyBytes = bytes
        // Without --output the body was buffered for this line (a streamed body is never reported
        // in JSON).
        let text = output == nil ? String(validating: response.body, as: UTF8.self) : nil
        body = text
        bodyBase64 = output == nil && text == nil ? response.body.base64EncodedString() : nil
        self.output = output
        idempotencyKey = key
    }
}

/// `{"event":"error", ...}`: why the request failed, with the path when the network is involved.
private struct ErrorLine: Encodable {
    let event = "error"
    let kind: String
    let message: String
    /// Attempts that reached the transport (0 when the request never left: a bad URL, a policy
    /// denial, a wait that timed out).
    let attempts: Int
    let status: Int?
    let reason: String?
    /// For `kind` `transport`: the transport's failure kind (`hostNotFound`, `tlsFailure`, ...).
    let transportKind: String?
    /// The status `get` exits with (curl's numbers; `get --help`).
    let exitStatus: Int32
    let path: NetworkPath?
    let elapsedSeconds: Double
    let output: String?
    let idempotencyKey: String?

    init(_ error: NetworkError, key: String?, output: String?, elapsed: Duration) {
        message = error.reason.description
        exitStatus = CLIExitCode.exitCode(for: error).rawValue
        if case .transport(let failure, _) = error.reason {
            transportKind = failure.kind.rawValue
        } else {
            transportKind = nil
        }
        attempts = error.attempts
        elapsedSeconds = GetReport.secondsValue(elapsed)
        self.output = output
        idempotencyKey = key
        var status: Int?
        var reason: String?
        var path: NetworkPath?
        switch error.reason {
        case .invalidURL: kind = "invalidURL"
        case .unsuccessfulStatus(let value, _):
            kind = "unsuccessfulStatus"
            status = value.code
        case .invalidResponse: kind = "invalidResponse"
        case .notConnected(let why, let at):
            kind = "notConnected"
            reason = why.description
            path = at
        case .connectionLost(_, let at):
            kind = "connectionLost"
            path = at
        case .timedOut(let at):
            kind = "timedOut"
            path = at
        case .waitingForConnectivityTimedOut(let why, let at):
            kind = "waitingForConnectivityTimedOut"
            reason = why.description
            path = at
        case .bodyTooLarge: kind = "bodyTooLarge"
        case .cannotWrite: kind = "cannotWrite"
        case .cannotRead: kind = "cannotRead"
        case .redirectRefused: kind = "redirectRefused"
        case .cancelled: kind = "cancelled"
        case .transport(_, let at):
            kind = "transport"
            path = at
        }
        self.status = status
        self.reason = reason
        self.path = path
    }
}
