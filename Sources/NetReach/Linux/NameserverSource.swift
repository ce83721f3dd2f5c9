#if os(Linux)
import CNetReachLinux
import Glibc

/// Where a monitor's nameservers come from: candidate resolv.conf files, the first that exists
/// winning (`ip netns exec` uses `/etc/netns/NAME/resolv.conf` when there is one, else
/// `/etc/resolv.conf`), and systemd-resolved's list of upstream servers, which decides when the
/// chosen file names only resolved's local stub.
struct NameserverSource: Sendable, Hashable {
    var candidates: [String]
    /// `/run/systemd/resolve/resolv.conf`; `nil` to take the stub at its word.
    var resolvedUpstreamPath: String?

    /// The file in use now: the first candidate that exists (the last one if none does).
    var currentPath: String {
        candidates.first { access($0, F_OK) == 0 } ?? candidates.last ?? "/etc/resolv.conf"
    }

    /// The nameservers a program would use now. When the file names only systemd-resolved's stub
    /// (127.0.0.53, 127.0.0.54) and resolved's upstream list exists, those upstream servers
    /// decide (as `systemd-networkd-wait-online --dns` judges): the stub always answers, even
    /// with no server behind it.
    func nameservers() -> [IPAddress] {
        let servers = ResolvConf.nameservers(atPath: currentPath)
        guard !servers.isEmpty, servers.allSatisfy(ResolvConf.stubAddresses.contains),
            let upstream = resolvedUpstreamPath, access(upstream, F_OK) == 0
        else { return servers }
        return ResolvConf.nameservers(atPath: upstream)
    }

    /// Every file whose change can change ``nameservers()``.
    var watchedPaths: [String] { candidates + (resolvedUpstreamPath.map { [$0] } ?? []) }
}
#endif
