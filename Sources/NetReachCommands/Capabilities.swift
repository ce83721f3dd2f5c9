import ArgumentParser
import NetReachConnectivity
import NetReachHTTP

/// What the commands need from outside themselves, handed to them by the executable's `main`:
/// how to send HTTP, how to send a connectivity probe, and how to enter another network namespace.
///
/// Nothing is registered in a global: a command gets this value as the argument of
/// ``NetreachSubcommand/run(_:)``, so a test can run a command with a transport or a prober of its
/// own, and reading a command tells what it may touch.
///
/// ```swift
/// let capabilities = Capabilities(
///     makeTransport: AsyncHTTPClientTransport.init(settings:),
///     makeProber: AsyncHTTPClientProber.init(settings:),
///     enterNamespace: NamespaceEntry.enter)
/// exit(await NetreachCommand.run(Array(CommandLine.arguments.dropFirst()), capabilities: capabilities).rawValue)
/// ```
package struct Capabilities: Sendable {
    /// Makes the transport `get` sends with, configured by its TLS, proxy and timeout options.
    package var makeTransport: @Sendable (TransportSettings) throws(TransportSettingsError) -> any HTTPTransport
    /// Makes the prober `check`, `watch --internet`, `wait --internet` and `serve --internet` send
    /// probes with, connecting as the settings say (the proxy of `--proxy` or the environment).
    package var makeProber: @Sendable (TransportSettings) -> any ConnectivityProber
    /// Moves the rest of the command into the named network namespace (`--namespace` of the
    /// commands that send probes), or throws the status to exit with after saying why.
    package var enterNamespace: @Sendable (String) throws(ExitCode) -> Void

    package init(
        makeTransport: @escaping @Sendable (TransportSettings) throws(TransportSettingsError) -> any HTTPTransport,
        makeProber: @escaping @Sendable (TransportSettings) -> any ConnectivityProber,
        enterNamespace: @escaping @Sendable (String) throws(ExitCode) -> Void
    ) {
        self.makeTransport = makeTransport
        self.makeProber = makeProber
        self.enterNamespace = enterNamespace
    }
}

/// A command of `netreach`: parsed by swift-argument-parser, run with the executable's
/// ``Capabilities``. Commands that need none ignore the argument.
package protocol NetreachSubcommand: ParsableCommand {
    /// Runs the command; throws an `ExitCode` to end with a status other than 0 (never a bare
    /// error: see ``CLIExitCode``).
    func run(_ capabilities: Capabilities) async throws
}
