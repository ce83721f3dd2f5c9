import ArgumentParser

extension GetCommand {
    /// `get`'s words parsed without ArgumentParser, when they are plainly written: the URL once,
    /// and options by their names, each at most once (`--header`, `--resolve` and `--connect-to` as
    /// often as needed), with their values after them (`-o FILE`, `--output FILE`,
    /// `--output=FILE`), every value valid, and the whole passing `validate()`. Anything else (help,
    /// a misspelt or unknown option, a value that starts with `-`, bundled short flags, `--`, a
    /// second URL, a value ArgumentParser would refuse, a check that fails) gives `nil`, and
    /// ArgumentParser parses the words as before and says what it says: this path only ever gives
    /// the command ArgumentParser would give (`GetPlainParseTests` holds it to that, option by
    /// option and in combinations).
    ///
    /// Why: ArgumentParser reflects over `get`'s 39 options on every start, and its first use of
    /// each option's type walks the Swift runtime's ~10,000 conformance records: ~2 ms of a
    /// small GET from a fresh process (Benchmarks/RESULTS.md, section 29).
    ///
    /// ```swift
    /// GetCommand.plainParse(["-q", "-o", "page.html", "https://example.com/"])  // a GetCommand
    /// GetCommand.plainParse(["-qo", "page.html", "https://example.com/"])       // nil: bundled
    /// ```
    static func plainParse(_ words: ArraySlice<String>) -> GetCommand? {
        var command = GetCommand()
        var connection = ConnectionOptions()
        // Every property is set, to ArgumentParser's defaults first: one left unset would stop
        // the process when read (the test checks that none is).
        command.method = nil
        command.head = false
        command.headers = []
        command.userAgent = nil
        command.data = nil
        command.user = nil
        command.waitForConnectivity = false
        command.maxTime = nil
        command.timeout = nil
        command.stallTimeout = .seconds(30)
        command.retries = 2
        command.retryConnrefused = false
        command.maxRedirs = 10
        command.noLocation = false
        command.idempotencyKey = false
        command.output = nil
        command.continueDownload = false
        command.writeErrorBody = false
        command.createDirs = false
        command.maxFilesize = nil
        command.json = false
        command.quiet = false
        command.transport = nil
        connection.caCertificateFile = nil
        connection.caCertificateDirectory = nil
        connection.clientCertificate = nil
        connection.clientKey = nil
        connection.insecure = false
        connection.proxy = nil
        connection.noProxy = nil
        connection.connectTimeout = nil
        connection.compressed = false
        connection.tlsMinimum = nil
        connection.allowWeakCertificates = false
        connection.resolve = []
        connection.connectTo = []

        var url: String?
        var given: [PlainOption] = []
        var index = words.startIndex
        while index < words.endIndex {
            let word = words[index]
            index += 1
            guard word.hasPrefix("-") else {
                guard url == nil, !word.isEmpty else { return nil }
                url = word
                continue
            }
            var name = Substring(word)
            var attached: Substring?
            if word.hasPrefix("--"), let equals = word.firstIndex(of: "=") {
                name = word[..<equals]
                attached = word[word.index(after: equals)...]
            }
            guard let option = PlainOption(spelling: name) else { return nil }
            if !option.isRepeatable {
                guard !given.contains(option) else { return nil }
                given.append(option)
            }
            if option.isFlag {
                guard attached == nil else { return nil }
                option.setFlag(spelling: name, in: &command, connection: &connection)
                continue
            }
            let value: String
            if let attached {
                value = String(attached)
            } else {
                guard index < words.endIndex else { return nil }
                value = words[index]
                index += 1
            }
            // ArgumentParser takes a value that looks like an option for some options only, and
            // an empty one differently by form: both are left to it.
            guard !value.isEmpty, !value.hasPrefix("-") else { return nil }
            guard option.set(value, in: &command, connection: &connection) else { return nil }
        }
        guard let url else { return nil }
        command.url = url
        command.connection = connection
        do {
            try connection.validate()
            try command.validate()
        } catch {
            return nil
        }
        return command
    }
}

/// The options ``GetCommand/plainParse(_:)`` knows, by each of their spellings.
enum PlainOption: CaseIterable, Equatable {
    case method, head, header, userAgent, data, user, waitForConnectivity, maxTime, timeout, stallTimeout
    case retries, retryConnrefused, maxRedirs, noLocation, idempotencyKey, output, continueDownload
    case writeErrorBody, createDirs, maxFilesize, json, quiet
    case cacert, capath, cert, key, insecure, proxy, noproxy, connectTimeout, compressed, resolve, connectTo
    /// `--tlsv1.0` ... `--tlsv1.3`: one option, given at most once (two are ArgumentParser's to refuse).
    case tlsMinimum, allowWeakCertificates

    /// How it is written on the command line: its long name first, then its short one if any.
    var spellings: [String] {
        switch self {
        case .method: ["--request", "-X"]
        case .head: ["--head", "-I"]
        case .header: ["--header", "-H"]
        case .userAgent: ["--user-agent", "-A"]
        case .data: ["--data", "-d"]
        case .user: ["--user", "-u"]
        case .waitForConnectivity: ["--wait-for-connectivity"]
        case .maxTime: ["--max-time"]
        case .timeout: ["--timeout"]
        case .stallTimeout: ["--stall-timeout"]
        case .retries: ["--retries"]
        case .retryConnrefused: ["--retry-connrefused"]
        case .maxRedirs: ["--max-redirs"]
        case .noLocation: ["--no-location"]
        case .idempotencyKey: ["--idempotency-key"]
        case .output: ["--output", "-o"]
        case .continueDownload: ["--continue", "-C"]
        case .writeErrorBody: ["--write-error-body"]
        case .createDirs: ["--create-dirs"]
        case .maxFilesize: ["--max-filesize"]
        case .json: ["--json"]
        case .quiet: ["--quiet", "-q"]
        case .cacert: ["--cacert"]
        case .capath: ["--capath"]
        case .cert: ["--cert"]
        case .key: ["--key"]
        case .insecure: ["--insecure", "-k"]
        case .proxy: ["--proxy"]
        case .noproxy: ["--noproxy"]
        case .connectTimeout: ["--connect-timeout"]
        case .compressed: ["--compressed"]
        case .resolve: ["--resolve"]
        case .connectTo: ["--connect-to"]
        case .tlsMinimum: TLSMinimumOption.allCases.map { "--" + $0.rawValue }
        case .allowWeakCertificates: ["--allow-weak-certificates"]
        }
    }

    init?(spelling: Substring) {
        // Short names stand alone (`-o`), never with a value or another flag attached: `-qo`,
        // `-ofile` and `-o=file` are ArgumentParser's to read.
        guard let found = Self.allCases.first(where: { $0.spellings.contains { $0 == spelling } }) else { return nil }
        self = found
    }

    var isFlag: Bool {
        switch self {
        case .head, .waitForConnectivity, .retryConnrefused, .noLocation, .idempotencyKey, .continueDownload,
            .writeErrorBody, .createDirs, .json, .quiet, .insecure, .compressed, .tlsMinimum, .allowWeakCertificates:
            true
        default: false
        }
    }

    /// Given as often as needed, each value added to the others.
    var isRepeatable: Bool { self == .header || self == .resolve || self == .connectTo }

    func setFlag(spelling: Substring, in command: inout GetCommand, connection: inout ConnectionOptions) {
        switch self {
        case .head: command.head = true
        case .waitForConnectivity: command.waitForConnectivity = true
        case .retryConnrefused: command.retryConnrefused = true
        case .noLocation: command.noLocation = true
        case .idempotencyKey: command.idempotencyKey = true
        case .continueDownload: command.continueDownload = true
        case .writeErrorBody: command.writeErrorBody = true
        case .createDirs: command.createDirs = true
        case .json: command.json = true
        case .quiet: command.quiet = true
        case .insecure: connection.insecure = true
        case .compressed: connection.compressed = true
        case .tlsMinimum: connection.tlsMinimum = TLSMinimumOption(rawValue: String(spelling.dropFirst(2)))
        case .allowWeakCertificates: connection.allowWeakCertificates = true
        default: break
        }
    }

    /// Sets the option to `value`; false if ArgumentParser would refuse the value.
    func set(_ value: String, in command: inout GetCommand, connection: inout ConnectionOptions) -> Bool {
        func duration() -> WaitDuration? { try? WaitDuration(parsing: value) }
        switch self {
        case .method: command.method = value
        case .header: command.headers.append(value)
        case .userAgent: command.userAgent = value
        case .data: command.data = value
        case .user: command.user = value
        case .maxTime:
            guard let parsed = duration() else { return false }
            command.maxTime = parsed
        case .timeout:
            guard let parsed = duration() else { return false }
            command.timeout = parsed
        case .stallTimeout:
            guard let parsed = duration() else { return false }
            command.stallTimeout = parsed
        case .retries:
            guard let parsed = Int(value) else { return false }
            command.retries = parsed
        case .maxRedirs:
            guard let parsed = Int(value) else { return false }
            command.maxRedirs = parsed
        case .output: command.output = value
        case .maxFilesize:
            guard let parsed = GetCommand.byteCount(value) else { return false }
            command.maxFilesize = parsed
        case .cacert: connection.caCertificateFile = value
        case .capath: connection.caCertificateDirectory = value
        case .cert: connection.clientCertificate = value
        case .key: connection.clientKey = value
        case .proxy: connection.proxy = value
        case .noproxy: connection.noProxy = value
        case .resolve: connection.resolve.append(value)
        case .connectTo: connection.connectTo.append(value)
        case .connectTimeout:
            guard let parsed = duration() else { return false }
            connection.connectTimeout = parsed
        default: return false
        }
        return true
    }
}
