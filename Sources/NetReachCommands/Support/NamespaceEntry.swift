import ArgumentParser
import NetReach

#if os(Linux)
import CNetReachNamespaceEntry
import Glibc
#endif

/// `--namespace` for the commands that send probes (`check`, `watch --internet`,
/// `wait --internet`): probes must leave from inside the namespace, so the command runs again
/// inside it, as `ip netns exec` would run it.
package enum NamespaceEntry {
    /// Runs this command again inside `argument`'s namespace (see CNetReachNamespaceEntry, which
    /// enters it before the Swift runtime starts), or, in that second run, makes sure it got
    /// there. Throws ``CLIExitCode/monitorUnavailable`` after saying why when it cannot.
    package static func enter(_ argument: String) throws(ExitCode) {
        #if os(Linux)
        let tried = "NETREACH_ENTER_NETNS_TRIED"
        if getenv(tried) != nil {
            unsetenv(tried)
            if cnr_netns_entered() == 1 { return }
            let why =
                cnr_netns_entry_error().map { String(cString: $0) } ?? "the start-up code that enters it did not run"
            StandardStream.complain("cannot enter the network namespace \(argument): \(why)")
            throw CLIExitCode.monitorUnavailable
        }
        let namespace = NetworkNamespace(argument: argument)
        guard access(namespace.path, F_OK) == 0 else {
            StandardStream.complain("cannot enter the network namespace \(argument): \(namespace.path) does not exist")
            throw CLIExitCode.monitorUnavailable
        }
        setenv(CNR_NETNS_PATH_VARIABLE, namespace.path, 1)
        if let name = namespace.ipNetnsName { setenv(CNR_NETNS_NAME_VARIABLE, name, 1) }
        setenv(tried, "1", 1)
        var argv: [UnsafeMutablePointer<CChar>?] = CommandLine.arguments.map { strdup($0) }
        argv.append(nil)
        execv("/proc/self/exe", argv)
        StandardStream.complain(
            "cannot enter the network namespace \(argument): re-running netreach failed: \(String(cString: strerror(errno)))"
        )
        throw CLIExitCode.monitorUnavailable
        #else
        StandardStream.complain("--namespace needs Linux")
        throw CLIExitCode.monitorUnavailable
        #endif
    }
}
