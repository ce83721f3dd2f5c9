import ArgumentParser
import NIOCore
import NetReachAsyncHTTPClient
import NetReachCommands
import NetReachHTTP

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// `netreach`: every command in one executable. What the commands may use from outside themselves
// is decided here and handed to them: AsyncHTTPClient for `get` and the probes, and entering a
// namespace by running again inside it (NamespaceEntry).
// First, before anything opens a file. SIGPIPE is ignored, so writing to a pipe whose reader has
// gone (`netreach watch | head -1`) fails with EPIPE, which the commands report as
// `outputFailed`, instead of killing the process with status 141 before it can say anything. A
// closed standard descriptor (`netreach status >&-`) is taken by /dev/null opened read-only:
// writing to it still fails (EBADF), but the next file opened cannot become descriptor 1 and
// receive the output (the monitor's netlink socket did, and `status >&-` exited 0).
signal(SIGPIPE, SIG_IGN)
for descriptor: Int32 in 0...2 where fcntl(descriptor, F_GETFD) == -1 && errno == EBADF {
    let opened = open("/dev/null", O_RDONLY)
    // open returns the lowest free descriptor, which is this one (lower ones are open or were
    // taken on earlier turns); anything else is closed again.
    if opened >= 0, opened != descriptor { close(opened) }
}
/// `get`'s transport (``Capabilities/makeTransport``): AsyncHTTPClient, whose clients run on NIO's
/// shared event loop group. `get` sends one request at a time, on one connection, which lives on
/// one loop, so the group gets one: it would otherwise start a thread per core (64 on a 64-core
/// server) before anything is sent. NIO takes the suggestion once per process and only before the
/// group is first used; the first transport made sets it (a static's initialiser runs once), and
/// its clients are the group's first users (nothing `get` does before, the parse included, uses
/// NIO). The commands that probe (`check`, `serve`, `--internet`) make no transport and keep a
/// loop per core.
enum GetTransport {
    private static let oneEventLoop: Void = { NIOSingletons.groupLoopCountSuggestion = 1 }()

    static func make(_ settings: TransportSettings) throws(TransportSettingsError) -> any HTTPTransport {
        _ = oneEventLoop
        return try AsyncHTTPClientTransport(settings: settings)
    }
}
let capabilities = Capabilities(
    makeTransport: GetTransport.make,
    makeProber: AsyncHTTPClientProber.init(settings:),
    enterNamespace: NamespaceEntry.enter)
/// Runs the command and exits where it ended, on the concurrency pool. Top-level code is the main
/// actor's: awaiting the command there and exiting after would hop back to the main queue, which on
/// Linux no thread drains (the main thread is parked in `dispatch_main`), so libdispatch started a
/// thread for it, and its pool two more, only to call `exit` (Benchmarks/RESULTS.md, section 29).
func runAndExit(_ arguments: [String], capabilities: Capabilities) async -> Never {
    exit(await NetreachCommand.run(arguments, capabilities: capabilities).rawValue)
}
await runAndExit(Array(CommandLine.arguments.dropFirst()), capabilities: capabilities)
