import Foundation
import NetReach

/// A network you drive by hand, for your own unit tests: a ``NetReach/PathSource`` that needs no
/// root and no kernel. Every change reaches subscribed monitors synchronously, before the call
/// that made it returns, so tests are deterministic: after `network.setLinkUp("eth0", false)`,
/// `monitor.currentPath` already shows it.
///
/// ```swift
/// let network = SimulatedNetwork()
/// network.addInterface("wlan0", type: .wifi)
/// let monitor = PathMonitor(source: network)
/// monitor.start(queue: .main)
/// #expect(monitor.currentPath.usesInterfaceType(.wifi))
///
/// network.removeDefaultRoutes("wlan0")
/// #expect(monitor.currentPath.unsatisfiedReason == .noDefaultRoute)
/// ```
///
/// Addresses are made up from documentation ranges (192.0.2.0/24, 2001:db8::/32): nothing is ever
/// sent anywhere.
public final class SimulatedNetwork: PathSource, @unchecked Sendable {
    // @unchecked: every stored property is read and written only while `lock` is held.
    private let lock = NSRecursiveLock()
    private var current: SystemSnapshot
    private var subscribers: [UInt64: @Sendable (SystemSnapshot) -> Void] = [:]
    private var nextID: UInt64 = 0
    private var failure: PathMonitorError?

    /// Creates a network in the given state (by default: nothing but no interfaces).
    public init(_ snapshot: SystemSnapshot = SystemSnapshot()) {
        current = snapshot
    }

    /// A network with `lo` and one connected interface of the given type, IPv4 and DNS.
    public static func connected(_ type: InterfaceType = .wiredEthernet, name: String? = nil) -> SimulatedNetwork {
        let network = SimulatedNetwork()
        network.addLoopback()
        network.addInterface(name ?? defaultName(for: type), type: type)
        network.setNameservers([IPAddress("192.0.2.53")!])
        return network
    }

    /// Makes the next ``subscribe(_:)`` fail with `error`, as a system source does when it cannot
    /// observe the system; `nil` clears it.
    public func failSubscriptions(with error: PathMonitorError?) {
        lock.withLock { failure = error }
    }

    /// The current state.
    public var snapshot: SystemSnapshot { lock.withLock { current } }

    /// Number of live subscriptions (monitors started and not cancelled).
    public var subscriberCount: Int { lock.withLock { subscribers.count } }

    public func subscribe(
        _ receiver: @escaping @Sendable (SystemSnapshot) -> Void
    ) throws(PathMonitorError) -> PathSubscription {
        lock.lock()
        defer { lock.unlock() }
        if let failure { throw failure }
        let id = nextID
        nextID += 1
        subscribers[id] = receiver
        receiver(current)
        return PathSubscription { [weak self] in
            self?.lock.withLock { _ = self?.subscribers.removeValue(forKey: id) }
        }
    }

    /// Changes the state any way you like and delivers the result to every monitor.
    public func update(_ change: (inout SystemSnapshot) -> Void) {
        lock.lock()
        defer { lock.unlock() }
        change(&current)
        for receiver in subscribers.values { receiver(current) }
    }

    /// Adds an interface that is up, with carrier, addresses and default routes.
    /// - Returns: its interface index.
    @discardableResult
    public func addInterface(
        _ name: String, type: InterfaceType = .wiredEthernet, ipv4: Bool = true, ipv6: Bool = false,
        metric: UInt32 = 100
    ) -> Int {
        var index = 0
        update { snapshot in
            index = (snapshot.links.keys.max() ?? 1) + 1
            snapshot.links[index] = Self.link(index: index, name: name, type: type)
            let octet = UInt8(truncatingIfNeeded: index)
            if ipv4 {
                snapshot.upsertAddress(
                    .init(interfaceIndex: index, address: IPAddress(bytes: [192, 0, 2, octet])!, prefixLength: 24))
                snapshot.defaultRoutes.insert(
                    .init(interfaceIndex: index, gateway: IPAddress("192.0.2.1")!, metric: metric))
            }
            if ipv6 && type != .loopback {
                let address = IPAddress(bytes: [0x20, 0x01, 0x0d, 0xb8] + [UInt8](repeating: 0, count: 11) + [octet])!
                snapshot.upsertAddress(.init(interfaceIndex: index, address: address, prefixLength: 64))
                snapshot.defaultRoutes.insert(
                    .init(family: .ipv6, interfaceIndex: index, gateway: IPAddress("2001:db8::1")!, metric: metric))
            }
        }
        return index
    }

    /// Adds `lo` as the kernel has it: index 1, up, 127.0.0.1/8 and ::1/128 (host scope), no
    /// routes. Per-destination monitors of loopback addresses are satisfied through it.
    public func addLoopback() {
        update { snapshot in
            snapshot.links[1] = Self.link(index: 1, name: "lo", type: .loopback)
            snapshot.upsertAddress(
                .init(interfaceIndex: 1, address: IPAddress("127.0.0.1")!, prefixLength: 8, scope: 254))
            snapshot.upsertAddress(.init(interfaceIndex: 1, address: IPAddress("::1")!, prefixLength: 128, scope: 254))
        }
    }

    /// Removes an interface with its addresses and routes.
    public func removeInterface(_ name: String) {
        update { snapshot in
            if let index = Self.index(of: name, in: snapshot) { snapshot.removeLink(index: index) }
        }
    }

    /// Sets an interface administratively up or down. Going down also drops its default routes,
    /// as the kernel does.
    public func setLinkUp(_ name: String, _ isUp: Bool) {
        update { snapshot in
            guard let index = Self.index(of: name, in: snapshot) else { return }
            snapshot.links[index]?.isUp = isUp
            if !isUp { snapshot.removeRoutes(throughInterface: index) }
        }
    }

    /// Plugs or unplugs the cable: carrier changes, routes stay.
    public func setCarrier(_ name: String, _ hasCarrier: Bool) {
        update { snapshot in
            guard let index = Self.index(of: name, in: snapshot) else { return }
            snapshot.links[index]?.hasCarrier = hasCarrier
        }
    }

    /// Removes the interface's default routes (of one family, or both).
    public func removeDefaultRoutes(_ name: String, family: IPAddress.Family? = nil) {
        update { snapshot in
            guard let index = Self.index(of: name, in: snapshot) else { return }
            snapshot.removeRoutes(throughInterface: index, family: family)
        }
    }

    /// Adds a default route through the interface.
    public func addDefaultRoute(_ name: String, gateway: IPAddress, metric: UInt32 = 100) {
        update { snapshot in
            guard let index = Self.index(of: name, in: snapshot) else { return }
            snapshot.defaultRoutes.insert(.init(interfaceIndex: index, gateway: gateway, metric: metric))
        }
    }

    /// Removes every address of the interface.
    public func removeAddresses(_ name: String) {
        update { snapshot in
            guard let index = Self.index(of: name, in: snapshot) else { return }
            for address in snapshot.addresses where address.interfaceIndex == index { snapshot.removeAddress(address) }
        }
    }

    /// Replaces the resolv.conf nameservers.
    public func setNameservers(_ nameservers: [IPAddress]) {
        update { $0.nameservers = nameservers }
    }

    private static func index(of name: String, in snapshot: SystemSnapshot) -> Int? {
        snapshot.links.values.first { $0.name == name }?.index
    }

    private static func defaultName(for type: InterfaceType) -> String {
        switch type {
        case .wifi: "wlan0"
        case .cellular: "wwan0"
        case .wiredEthernet: "eth0"
        case .loopback: "lo"
        case .other: "tun0"
        }
    }

    /// A link whose kernel and sysfs facts make the automatic classification give `type`.
    private static func link(index: Int, name: String, type: InterfaceType) -> SystemSnapshot.Link {
        switch type {
        case .wifi: .init(index: index, name: name, deviceType: "wlan", isWireless: true)
        case .cellular: .init(index: index, name: name, hardwareType: 0xFFFE, deviceType: "wwan")
        case .wiredEthernet: .init(index: index, name: name)
        case .loopback:
            .init(index: index, name: name, isLoopback: true, hardwareType: SystemSnapshot.Link.loopbackHardwareType)
        case .other: .init(index: index, name: name, hardwareType: 0xFFFE, kind: "tun")
        }
    }
}
