#if os(Linux)
import CNetReachLinux
import Glibc
import NetReachSystem

/// What sysfs says about an interface that the netlink link message does not.
struct SysfsReader: Sendable {
    /// `/sys/class/net`, or a fixture directory in tests.
    var root: String

    /// `DEVTYPE` from `uevent`, and whether `wireless` or `phy80211` exists. Unreadable entries
    /// give `nil`/`false`: classification then falls back on ARPHRD, link kind and name.
    func facts(forInterface name: String) -> (deviceType: String?, isWireless: Bool) {
        guard !name.isEmpty, !name.contains("/"), name != "..", name != "." else { return (nil, false) }
        let directory = "\(root)/\(name)"
        var deviceType: String?
        if let uevent = SystemCall.readFile("\(directory)/uevent", limit: 4096) {
            for line in String(decoding: uevent, as: UTF8.self).split(separator: "\n") where line.hasPrefix("DEVTYPE=")
            {
                deviceType = String(line.dropFirst("DEVTYPE=".count))
            }
        }
        let isWireless = access("\(directory)/wireless", F_OK) == 0 || access("\(directory)/phy80211", F_OK) == 0
        return (deviceType, isWireless)
    }
}
#endif
