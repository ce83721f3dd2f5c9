import ArgumentParser
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
StandardDescriptors.prepare()
let capabilities = Capabilities(
    makeTransport: AsyncHTTPClientTransport.init(settings:),
    makeProber: { AsyncHTTPClientProber() },
    enterNamespace: NamespaceEntry.enter)
exit(await NetreachCommand.run(Array(CommandLine.arguments.dropFirst()), capabilities: capabilities).rawValue)
