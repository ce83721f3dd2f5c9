import ArgumentParser
import NetReachAsyncHTTPClient
import NetReachConditionCommand
import NetReachHTTP
import NetReachObserverCommands
import Synchronization

/// `netreach-http`: the commands of `netreach` that send HTTP, in an executable of their own.
///
/// `netreach get …` runs `netreach-http get …` in its place (exec), so `status`, `watch` and `wait`
/// never load SwiftNIO, AsyncHTTPClient, FoundationNetworking or libcurl: a `netreach watch` daemon
/// stays about 10 MB smaller (Benchmarks/RESULTS.md, section 8). It is named `netreach` in help
/// and usage, since that is how people call it.
package struct NetreachHTTPCommand: AsyncParsableCommand {
    package static let configuration = CommandConfiguration(
        commandName: "netreach",
        abstract: "The HTTP commands of netreach (run by `netreach get`).",
        // watch and wait are netreach's own, run here when given --internet (they need a prober).
        subcommands: [GetCommand.self, CheckCommand.self, ConditionCommand.self, WatchCommand.self, WaitCommand.self]
    )

    package init() {}

    /// Parses the process's arguments and runs the command (the executables' whole `main`).
    package static func run() async {
        InternetProbing.register(.init(makeProber: { AsyncHTTPClientProber() },
                                       enterNamespace: { namespace in try NamespaceEntry.enter(namespace) }))
        await main()
    }
}

/// The transports this executable can make itself. `netreach-http` links AsyncHTTPClient only;
/// `netreach-http-urlsession`, which `get --transport urlsession` runs in its place, registers
/// URLSession here before parsing, so FoundationNetworking and libcurl (about thirty libraries,
/// ~6.5 ms of start-up measured here) are loaded only when asked for.
package enum LinkedTransports {
    private static let urlSessionFactory = Mutex<(@Sendable (TransportSettings) throws(TransportSettingsError) -> any HTTPTransport)?>(nil)

    /// Registers the URLSession transport's factory (`netreach-http-urlsession` does, first thing).
    package static func registerURLSession(_ make: @escaping @Sendable (TransportSettings) throws(TransportSettingsError) -> any HTTPTransport) {
        urlSessionFactory.withLock { $0 = make }
    }

    /// The URLSession factory, when this executable links it.
    static var urlSession: (@Sendable (TransportSettings) throws(TransportSettingsError) -> any HTTPTransport)? {
        urlSessionFactory.withLock { $0 }
    }
}
