import Dispatch
import Foundation
import NetReach
import NetReachNetwork
import NetReachSystem
import NetReachTestSupport
import Testing

/// `NWPathMonitor` (the porting kit) on the kernel, in a lab namespace: what Apple-platform code
/// reads through it agrees with `ip route get`, from any thread, while routes change.
@Suite("NWPathMonitor on the kernel (integration)", .offPool, .needsNamespaceRoot, .serialized, .timeLimit(.minutes(2)))
struct PortingKitIntegrationTests {
    /// The lab's monitor through Network.framework's API, `veth0` classified as Wi-Fi.
    static func wifiMonitor(in lab: NetnsLab) -> NWPathMonitor {
        let monitor = NWPathMonitor(
            pathMonitor: PathMonitor(
                classification: InterfaceClassification(typeOverrides: ["veth0": .wifi]), namespace: lab.namespace))
        monitor.start(queue: DispatchQueue(label: "PortingKitIntegrationTests"))
        return monitor
    }

    @Test(
        "Threads reading currentPath.usesInterfaceType(.wifi) while the default route flaps 200 times see only whole paths; the last agrees with ip route get"
    )
    func readersWhileTheRouteFlaps() async throws {
        try await NetnsLab.withLab { lab in
            let monitor = Self.wifiMonitor(in: lab)
            defer { monitor.cancel() }
            #expect(
                monitor.currentPath.usesInterfaceType(.wifi), "exact as soon as start returns: \(monitor.currentPath)")
            let stop = Locked(false)
            let tallies = Locked([(reads: Int, inconsistent: Int)]())
            let readers = DispatchGroup()
            // Each reader has read once before the flaps begin: on a busy machine a thread started
            // now may not run before a fast batch ends, and would then have read nothing.
            let reading = DispatchSemaphore(value: 0)
            for _ in 0..<4 {
                readers.enter()
                Thread {
                    var reads = 0
                    var inconsistent = 0
                    while reads == 0 || !stop.withLock({ $0 }) {
                        if reads == 1 { reading.signal() }
                        let path = monitor.currentPath
                        // A whole path: on Wi-Fi exactly when satisfied, a gateway exactly then too.
                        if path.usesInterfaceType(.wifi) != (path.status == .satisfied)
                            || path.gateways.isEmpty == (path.status == .satisfied)
                        {
                            inconsistent += 1
                        }
                        reads += 1
                    }
                    tallies.withLock { $0.append((reads, inconsistent)) }
                    readers.leave()
                }.start()
            }
            for _ in 0..<4 where reading.wait(timeout: .now() + 30) == .timedOut {
                Issue.record("a reader thread did not run within 30 s")
            }
            // Ends with the route moved to another gateway, a state the flaps never rest in, so the
            // wait below holds only once the monitor has read every flap (ending where it began,
            // it held before the first was read, and the checks raced the engine catching up).
            try await lab.batch(
                (0..<100).flatMap { _ in
                    [
                        "route del default via \(NetnsLab.ipv4Gateway) dev veth0",
                        "route add default via \(NetnsLab.ipv4Gateway) dev veth0",
                    ]
                } + ["route replace default via \(NetnsLab.otherIPv4Gateway) dev veth0"])
            stop.withLock { $0 = true }
            readers.wait()
            let counts = tallies.withLock { $0 }
            #expect(counts.count == 4 && counts.allSatisfy { $0.reads > 0 })
            #expect(counts.map(\.inconsistent) == [0, 0, 0, 0])

            guard case .route(let device, let gateway, _, _) = try await lab.routeGet(.ipv4) else {
                Issue.record("ip route get found no route")
                return
            }
            #expect(gateway?.description == NetnsLab.otherIPv4Gateway)
            await LabPoll.until("the monitor agrees with the kernel") {
                monitor.currentPath.gateways.map { "\($0)" } == ["\(NetnsLab.otherIPv4Gateway):0"]
            }
            let path = monitor.currentPath
            #expect(path.status == .satisfied)
            #expect(path.availableInterfaces.first?.name == device)
            #expect(path.gateways == [.hostPort(host: .ipv4(IPv4Address(gateway!.description)!), port: 0)])
        }
    }

    @Test(
        "A full tunnel (wg-quick's rules): the path uses the tunnel (.other) and the link under it, as a VPN over Wi-Fi does on Apple platforms"
    )
    func fullTunnel() async throws {
        try await NetnsLab.withLab { lab in
            let tunnel = try await TunDevice.open("wg0", in: lab, address: "10.9.0.2/32")
            defer { tunnel.close() }
            let monitor = Self.wifiMonitor(in: lab)
            defer { monitor.cancel() }
            #expect(monitor.currentPath.usesInterfaceType(.wifi))
            #expect(!monitor.currentPath.usesInterfaceType(.other), "the tunnel is up but carries nothing yet")

            try await lab.ip("-4", "route", "add", "default", "dev", "wg0", "table", "51820")
            try await lab.ip("-4", "rule", "add", "not", "fwmark", "51820", "table", "51820")
            try await lab.ip("-4", "rule", "add", "table", "main", "suppress_prefixlength", "0")
            guard case .route(let device, _, _, _) = try await lab.routeGet(.ipv4) else {
                Issue.record("ip route get found no route")
                return
            }
            #expect(device == "wg0")
            await LabPoll.until("the path moves to the tunnel") {
                monitor.currentPath.availableInterfaces.first?.name == "wg0"
            }
            let path = monitor.currentPath
            #expect(path.usesInterfaceType(.other) && path.usesInterfaceType(.wifi), "\(path)")
            #expect(!path.usesInterfaceType(.cellular))
        }
    }

    @Test(
        "Requirements: a cellular-only monitor on a wired lab is unsatisfied with notAvailable, and the Linux reason says why"
    )
    func requirements() async throws {
        try await NetnsLab.withLab { lab in
            let cellular = NWPathMonitor(
                pathMonitor: PathMonitor(requiredInterfaceType: .cellular, namespace: lab.namespace))
            cellular.start(queue: DispatchQueue(label: "cellular"))
            defer { cellular.cancel() }
            #expect(cellular.currentPath.status == .unsatisfied)
            #expect(cellular.currentPath.unsatisfiedReason == .notAvailable)
            #expect(cellular.currentPath.linuxUnsatisfiedReason == .excludedByRequirements)
            let anyButWired = NWPathMonitor(
                pathMonitor: PathMonitor(prohibitedInterfaceTypes: [.wiredEthernet], namespace: lab.namespace))
            anyButWired.start(queue: DispatchQueue(label: "prohibited"))
            defer { anyButWired.cancel() }
            #expect(anyButWired.currentPath.status == .unsatisfied)
        }
    }
}
