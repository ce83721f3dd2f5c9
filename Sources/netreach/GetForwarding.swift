import ArgumentParser
import NetReachCLI
import NetReachObserverCommands
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// `netreach get …` and `netreach check …` run `netreach-http get …` (or `check …`) in this
/// process's place; so do `watch --internet …` and `wait --internet …`, which send probes.
///
/// The HTTP stack (SwiftNIO, AsyncHTTPClient, FoundationNetworking, libcurl) is ~10 MB of
/// resident memory once loaded, and the dynamic loader maps every linked library at start, used or
/// not. Keeping it in a second executable means `status`, `watch` and `wait`, which send nothing,
/// never pay for it. `exec` keeps the process: its pid, signals, standard streams and exit status
/// are `get`'s, as if `netreach` had run it.
enum GetForwarding {
    static let helperName = "netreach-http"

    /// The arguments to run `netreach-http` with, if `arguments` (as in `CommandLine.arguments`)
    /// ask for `get` or `check`, or for their help, or for `watch` or `wait` with `--internet`;
    /// `nil` otherwise.
    ///
    /// ```swift
    /// GetForwarding.helperArguments(["netreach", "get", "-X", "POST", "http://127.0.0.1/x"])  // ["get", "-X", "POST", …]
    /// GetForwarding.helperArguments(["netreach", "help", "get"])                              // ["get", "--help"]
    /// GetForwarding.helperArguments(["netreach", "watch", "--internet"])                      // ["watch", "--internet"]
    /// GetForwarding.helperArguments(["netreach", "watch"])                                    // nil
    /// ```
    static func helperArguments(_ arguments: [String]) -> [String]? {
        let rest = Array(arguments.dropFirst())
        if let command = rest.first, forwarded.contains(command) { return rest }
        if InternetProbing.isForwarded(rest) { return rest }
        if rest.count == 2, rest[0] == "help", forwarded.contains(rest[1]) { return [rest[1], "--help"] }
        return nil
    }

    /// The commands `netreach-http` runs: those that send traffic.
    static let forwarded: Set<String> = ["get", "check", "condition"]

    /// Where to look for `netreach-http`: next to this executable (symlinks resolved), then `PATH`.
    static func candidates(executable: String?, path: String?) -> [String] {
        HelperExecutable(name: helperName).candidates(executable: executable, path: path)
    }

    /// Replaces this process with `netreach-http arguments…`; exits 69 if it cannot.
    static func exec(_ arguments: [String]) -> Never {
        let command = arguments.first ?? "get"
        let purpose = InternetProbing.isForwarded(arguments) ? "`\(command) --internet`" : "`\(command)`"
        HelperExecutable(name: helperName).exec(arguments, purpose: purpose)
    }
}

/// `get` as `netreach --help` lists it; running it forwards to `netreach-http` (see ``GetForwarding``).
struct GetCommandForwarder: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Send an HTTP request that can wait for the network and is retried only when safe.",
        discussion: "Runs the netreach-http executable; `netreach get --help` shows its options."
    )

    @Argument(parsing: .allUnrecognized)
    var arguments: [String] = []

    func run() throws {
        GetForwarding.exec(["get"] + arguments)
    }
}

/// `check` as `netreach --help` lists it; running it forwards to `netreach-http` (see ``GetForwarding``).
struct CheckCommandForwarder: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Probe whether the internet really answers: full, portal, limited, local or none.",
        discussion: "Runs the netreach-http executable; `netreach check --help` shows its options."
    )

    @Argument(parsing: .allUnrecognized)
    var arguments: [String] = []

    func run() throws {
        GetForwarding.exec(["check"] + arguments)
    }
}

/// `condition` as `netreach --help` lists it; running it forwards to `netreach-http` (see ``GetForwarding``),
/// which links SwiftNIO.
struct ConditionCommandForwarder: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "condition",
        abstract: "Relay TCP through a bad link on purpose: Apple's link profiles, delay, loss and faults, no root needed.",
        discussion: "Runs the netreach-http executable; `netreach condition --help` shows its options."
    )

    @Argument(parsing: .allUnrecognized)
    var arguments: [String] = []

    func run() throws {
        GetForwarding.exec(["condition"] + arguments)
    }
}
