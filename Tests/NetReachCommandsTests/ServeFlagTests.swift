import ArgumentParser
import Foundation
import NetReach
import NetReachHTTP
import NetReachServe
import NetReachTestSupport
import Testing

@testable import NetReachCommands

/// serve's flags as ArgumentParser reads them: what it refuses as a usage error before the
/// `--config` file is read (serve's own checks of the flags with the file are in NetReachServeTests).
@Suite("serve's flags")
struct ServeFlagTests {
    @Test(arguments: [
        ["--to", "a=10.0.0.1", "--port", "0"], ["--to", "a=10.0.0.1", "--port", "70000"],
        ["--to", "a=10.0.0.1", "--protocol", "sctp"], ["--to", "a=10.0.0.1", "--port", "1", "--port", "2"],
        ["--to", "a=10.0.0.1", "--protocol", "udp", "--protocol", "tcp"], ["--port", "53"], ["--protocol", "udp"],
    ])
    func badPortAndProtocolFlagsAreUsageErrors(_ arguments: [String]) {
        let error = Self.error(["serve"] + arguments)
        #expect(!(error is CancellationError), "\(arguments) was accepted")
        #expect(NetreachCommand.exitCode(for: error) == .validationFailure, "\(arguments): \(error)")
    }

    @Test func portAndProtocolFlagsWithAConfigFileNeedNoToOfTheirOwn() throws {
        let serve = try #require(
            try NetreachCommand.parseAsRoot(["serve", "--config", "f.yaml", "--protocol", "udp", "--port", "53"])
                as? ServeCommand)
        #expect(serve.ports == [53] && serve.protocols == [.udp])
    }

    private static func error(_ arguments: [String]) -> any Error {
        do {
            _ = try NetreachCommand.parseAsRoot(arguments)
            return CancellationError()
        } catch {
            return error
        }
    }

}

/// The probes' back-off cap and proxy, as the flags, serve's file and the environment give them.
@Suite("Probe options: back-off cap and proxy")
struct ProbeSettingsTests {
    static let probe = ["--internet", "--probe", "http://192.0.2.10/generate_204"]

    @Test("watch and serve cap the back-off at 30 s, wait at 1 s; the flag, else serve's file, changes it")
    func backOffCap() throws {
        let watch = try #require(try NetreachCommand.parseAsRoot(["watch"] + Self.probe) as? WatchCommand)
        #expect(try watch.internetOptions.configuration().maximumBackOff == .seconds(30))
        let flagged = try #require(
            try NetreachCommand.parseAsRoot(["watch", "--max-probe-backoff", "2m"] + Self.probe) as? WatchCommand)
        #expect(try flagged.internetOptions.configuration().maximumBackOff == .seconds(120))
        let wait = try #require(try NetreachCommand.parseAsRoot(["wait"] + Self.probe) as? WaitCommand)
        #expect(
            try wait.internetOptions.configuration(fallbackMaximumBackOff: .seconds(1)).maximumBackOff == .seconds(1))

        let file = try ServeConfigFile.parse("max_probe_backoff: 5s\n", path: "f.yaml")
        let serve = try #require(try NetreachCommand.parseAsRoot(["serve"] + Self.probe) as? ServeCommand)
        #expect(try serve.internetConfiguration(file: file).maximumBackOff == .seconds(5))
        #expect(try serve.internetConfiguration(file: ServeConfigFile()).maximumBackOff == .seconds(30))
        let serveFlag = try #require(
            try NetreachCommand.parseAsRoot(["serve", "--max-probe-backoff", "10s"] + Self.probe) as? ServeCommand)
        #expect(try serveFlag.internetConfiguration(file: file).maximumBackOff == .seconds(10), "the flag wins")
        #expect(throws: (any Error).self) {
            _ = try NetreachCommand.parseAsRoot(["watch", "--max-probe-backoff", "500ms"] + Self.probe)
        }
        #expect(throws: (any Error).self) {
            _ = try NetreachCommand.parseAsRoot(["watch", "--max-probe-backoff", "5s"])
        }
    }

    @Test("The probes read the proxy as get does: the environment as curl reads it, --proxy over it, '' for none")
    func proxyAsGetReadsIt() throws {
        let check = try #require(
            try NetreachCommand.parseAsRoot(["check", "--probe", "http://192.0.2.10/generate_204"]) as? CheckCommand)
        let environment = [
            "http_proxy": "http://10.0.0.1:3128", "HTTP_PROXY": "http://10.9.9.9:1", "no_proxy": "10.1.0.0/16",
        ]
        let settings = check.probing.transportSettings(environment: environment).proxy
        #expect(settings.proxy(forScheme: "http", host: "192.0.2.10")?.absoluteString == "http://10.0.0.1:3128")
        #expect(settings.proxy(forScheme: "http", host: "10.1.2.3") == nil, "no_proxy's CIDR, as curl 7.88")
        #expect(
            ProbeOptionsReading.proxy(["check", "--probe", "http://h/", "--proxy", ""], environment)
                .proxy(forScheme: "http", host: "h") == nil)
        #expect(
            ProbeOptionsReading.proxy(["check", "--probe", "http://h/", "--proxy", "10.0.0.2:8080"], [:])
                .proxy(forScheme: "http", host: "h")?.absoluteString == "http://10.0.0.2:8080")
        #expect(throws: (any Error).self) {
            _ = try NetreachCommand.parseAsRoot(["check", "--probe", "http://h/", "--proxy", "socks5://10.0.0.1"])
        }
        // get reads them the same way.
        let get = try #require(try NetreachCommand.parseAsRoot(["get", "http://h/"]) as? GetCommand)
        #expect(get.connection.settings(environment: environment).proxy == settings)
    }
}

private enum ProbeOptionsReading {
    static func proxy(_ arguments: [String], _ environment: [String: String]) -> ProxySettings {
        let check = try? NetreachCommand.parseAsRoot(arguments) as? CheckCommand
        return check?.probing.transportSettings(environment: environment).proxy ?? ProxySettings(noProxy: ["never"])
    }
}
