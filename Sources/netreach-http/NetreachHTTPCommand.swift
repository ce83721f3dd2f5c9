import ArgumentParser

/// `netreach-http`: the commands of `netreach` that send HTTP, in an executable of their own.
///
/// `netreach get …` runs `netreach-http get …` in its place (exec), so `status`, `watch` and `wait`
/// never load SwiftNIO, AsyncHTTPClient, FoundationNetworking or libcurl: a `netreach watch` daemon
/// stays about 10 MB smaller (Benchmarks/RESULTS.md, section 8). It is named `netreach` in help
/// and usage, since that is how people call it.
@main
struct NetreachHTTPCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "netreach",
        abstract: "The HTTP commands of netreach (run by `netreach get`).",
        subcommands: [GetCommand.self]
    )
}
