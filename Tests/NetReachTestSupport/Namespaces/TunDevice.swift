import Foundation

/// A tun device held open in a lab namespace, as a VPN client holds its tunnel: it has carrier
/// while this object's helper process runs (no wireguard module here; a tun is what a userspace
/// WireGuard or OpenVPN uses). Nothing reads or writes packets on it.
package final class TunDevice: Sendable {
    private let helper: ChildProcess

    /// Opens `/dev/net/tun` inside the lab's namespace (`ip netns exec`) with TUNSETIFF and keeps it
    /// open until ``close()``; then brings the device up with `address` (an `ip addr` argument).
    package static func open(_ name: String, in lab: NetnsLab, address: String? = nil) async throws -> TunDevice {
        let script = """
            import fcntl, os, struct, sys, time
            fd = os.open("/dev/net/tun", os.O_RDWR)
            fcntl.ioctl(fd, 0x400454ca, struct.pack("16sH", sys.argv[1].encode(), 0x0001 | 0x1000))
            print("ready", flush=True)
            while True: time.sleep(3600)
            """
        let helper = try ChildProcess(
            LabCommand.ipExecutable, ["netns", "exec", lab.name, "python3", "-c", script, name])
        let device = TunDevice(helper: helper)
        let line = await helper.nextLine(timeout: .seconds(30))
        guard line == "ready" else {
            device.close()
            throw LabError.systemCall(
                "open tun \(name) in \(lab.name)", "helper said: \(line ?? "nothing") \(helper.standardError)")
        }
        try await lab.ip("link", "set", name, "up")
        if let address { try await lab.ip("addr", "add", address, "dev", name) }
        return device
    }

    private init(helper: ChildProcess) {
        self.helper = helper
    }

    /// Closes the tunnel: the helper exits and the kernel deletes the device.
    package func close() {
        helper.kill()
        _ = helper.waitBlocking(timeout: .seconds(10))
    }
}
