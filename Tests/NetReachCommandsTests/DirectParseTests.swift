import ArgumentParser
import Testing

@testable import NetReachCommands

/// `netreach` parses a subcommand's arguments with that subcommand alone when it can (a faster
/// start); whatever that parse does not give cleanly goes to the whole tree. These tests hold the
/// short path to the tree's answers.
@Suite("netreach parses a subcommand directly")
struct DirectParseTests {
    @Test func everySubcommandIsFoundByItsNameAndNamesNetreachAsItsSuperCommand() {
        let listed = NetreachCommand.configuration.subcommands
        for command in listed {
            let name = command.configuration.commandName ?? ""
            let found = NetreachCommand.subcommand(named: name)
            #expect(found.map { $0 == command } == true, "subcommand(named: \"\(name)\") is not \(command)")
            #expect(command.configuration._superCommandName == NetreachCommand.commandName)
        }
        for name in ["", "help", "netreach", "Get", "get ", "nosuchcommand"] {
            #expect(NetreachCommand.subcommand(named: name) == nil)
        }
    }

    /// What a parse produced, property by property (the values ArgumentParser decoded).
    static func contents(_ command: any ParsableCommand) -> String {
        var text = ""
        dump(command, to: &text)
        return text
    }

    @Test(arguments: [
        ["status"], ["status", "--json"], ["watch", "--json", "--to", "example.com"],
        ["wait", "--timeout", "1m30s", "--ipv4", "--dns"],
        ["get", "https://example.com/"], ["get", "-q", "-o", "/dev/null", "http://127.0.0.1:8080/a"],
        ["get", "-X", "POST", "-d", "x=1", "-H", "A: b", "-H", "C: d", "--retries", "3", "https://example.com/"],
        ["get", "--", "https://example.com/"],
        ["get", "https://example.com/", "--max-time", "2m", "--wait-for-connectivity"],
        ["check", "--probe", "http://127.0.0.1:9/generate_204"],
        ["condition", "--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:9"],
        ["serve", "--listen", "127.0.0.1:0"],
    ])
    func aDirectParseGivesWhatTheTreeGives(_ arguments: [String]) throws {
        let tree = try NetreachCommand.parseAsRoot(arguments)
        let direct = try #require(NetreachCommand.parseDirectly(arguments), "\(arguments) was not parsed directly")
        #expect(type(of: direct) == type(of: tree))
        #expect(Self.contents(direct) == Self.contents(tree))
    }

    @Test(arguments: [
        // Help, the version, a completion script, the tree's own words: the tree answers.
        ["get", "--help"], ["get", "-h"], ["status", "--help"], ["get", "--version"], ["--version"], [],
        ["help", "get"], ["get", "--generate-completion-script", "bash"], ["--generate-completion-script", "bash"],
        ["get", "--experimental-dump-help"],
        // Errors: the tree says them, with its usage lines.
        ["get"], ["get", "ftp://example.com/"], ["get", "--bogus", "https://example.com/"],
        ["get", "--retries", "99", "https://example.com/"], ["status", "extra"], ["nosuchcommand"],
        ["Get", "https://example.com/"],
    ])
    func anythingButACleanParseGoesToTheTree(_ arguments: [String]) {
        #expect(NetreachCommand.parseDirectly(arguments) == nil)
    }

    @Test func underTheTreeTheSuperCommandNameChangesNothing() {
        let usage = NetreachCommand.usageString(for: GetCommand.self)
        #expect(usage.hasPrefix("netreach get "))
        let help = NetreachCommand.helpMessage(for: GetCommand.self, columns: 100)
        #expect(help.contains("USAGE: netreach get "))
        #expect(!help.contains("netreach netreach"))
    }
}
