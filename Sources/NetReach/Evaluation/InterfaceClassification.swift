/// How interfaces are classified and which ones are expensive or constrained.
///
/// The defaults follow the kernel and sysfs (see ``InterfaceType``). Servers have odd setups,
/// so every rule can be overridden by interface name. A name ending in `*` matches by prefix.
///
/// ```swift
/// var classification = InterfaceClassification()
/// classification.typeOverrides = ["usb0": .cellular, "wg*": .other]
/// classification.expensiveInterfaces = ["usb0"]     // metered tethering
/// let monitor = PathMonitor(classification: classification)
/// ```
public struct InterfaceClassification: Sendable, Hashable {
    /// Interface name (or `prefix*`) to type; wins over every automatic rule.
    public var typeOverrides: [String: InterfaceType]
    /// Names (or `prefix*`) whose paths are expensive, in addition to every cellular interface.
    public var expensiveInterfaces: Set<String>
    /// Names (or `prefix*`) whose paths are constrained. Linux has no Low Data Mode, so this is
    /// the only way a path becomes constrained.
    public var constrainedInterfaces: Set<String>

    /// Creates a classification; with no arguments, the automatic rules alone.
    public init(
        typeOverrides: [String: InterfaceType] = [:], expensiveInterfaces: Set<String> = [],
        constrainedInterfaces: Set<String> = []
    ) {
        self.typeOverrides = typeOverrides
        self.expensiveInterfaces = expensiveInterfaces
        self.constrainedInterfaces = constrainedInterfaces
    }

    /// The automatic rules alone.
    public static let automatic = InterfaceClassification()

    /// The type of a link: an override if one matches, else the kernel's and sysfs' facts
    /// (``SystemSnapshot/Link/automaticType``, worked out when the link was made).
    public func type(of link: SystemSnapshot.Link) -> InterfaceType {
        Self.lookup(link.name, in: typeOverrides) ?? link.automaticType
    }

    /// The type the kernel's and sysfs' facts give `link`, without overrides.
    static func automaticType(of link: SystemSnapshot.Link) -> InterfaceType {
        if link.isLoopback || link.hardwareType == SystemSnapshot.Link.loopbackHardwareType { return .loopback }
        if link.isWireless || link.deviceType == "wlan" { return .wifi }
        if link.deviceType == "wwan" || Self.bytes(of: link.kind, areOneOf: Self.cellularKinds) { return .cellular }
        if Self.bytes(of: link.kind, areOneOf: Self.virtualKinds) { return .other }
        if link.hardwareType == SystemSnapshot.Link.ethernetHardwareType {
            // Without sysfs (another namespace's links are not in ours) fall back on the names
            // every distribution gives wireless and cellular devices.
            if link.deviceType == nil && !link.isWireless {
                if Self.bytes(of: link.name, startWithOneOf: Self.wirelessPrefixes) { return .wifi }
                if Self.bytes(of: link.name, startWithOneOf: Self.cellularPrefixes) { return .cellular }
            }
            return .wiredEthernet
        }
        // ARPHRD_NONE (raw IP: wwan modems' net devices, tun) : a raw-IP wwan is cellular.
        if Self.bytes(of: link.name, startWithOneOf: Self.cellularPrefixes) { return .cellular }
        return .other
    }

    private static let cellularKinds: [StaticString] = ["wwan", "qmi_wwan", "cdc_mbim", "mhi_net"]
    private static let virtualKinds: [StaticString] = [
        "tun", "tap", "wireguard", "ipip", "gre", "sit", "ip6tnl", "vti", "vxlan", "ppp", "ifb", "dummy", "geneve",
        "gretap",
    ]
    private static let wirelessPrefixes: [StaticString] = ["wlan", "wlp", "wlx"]
    private static let cellularPrefixes: [StaticString] = ["wwan"]

    // Kinds and names are the kernel's bytes, compared as bytes, without hashing the kind for a
    // set or `hasPrefix`'s Unicode rules.
    private static func bytes(of text: String?, areOneOf words: [StaticString]) -> Bool {
        guard var text else { return false }
        return text.withUTF8 { bytes in
            words.contains { word in word.utf8CodeUnitCount == bytes.count && word.withUTF8Buffer(bytes.elementsEqual) }
        }
    }

    private static func bytes(of text: String, startWithOneOf prefixes: [StaticString]) -> Bool {
        var text = text
        return text.withUTF8 { bytes in
            prefixes.contains { prefix in prefix.withUTF8Buffer { bytes.starts(with: $0) } }
        }
    }

    /// Whether traffic over the named interface counts as expensive, cellular aside.
    public func isMarkedExpensive(_ name: String) -> Bool { Self.matches(name, expensiveInterfaces) }

    /// Whether traffic over the named interface counts as constrained.
    public func isMarkedConstrained(_ name: String) -> Bool { Self.matches(name, constrainedInterfaces) }

    private static func matches(_ name: String, _ patterns: Set<String>) -> Bool {
        !patterns.isEmpty && patterns.contains { pattern($0, matches: name) }
    }

    private static func lookup(_ name: String, in table: [String: InterfaceType]) -> InterfaceType? {
        guard !table.isEmpty else { return nil }
        if let exact = table[name] { return exact }
        // Longest matching prefix wins, so "wg-office*" beats "wg*".
        return table.filter { pattern($0.key, matches: name) }.max { $0.key.count < $1.key.count }?.value
    }

    private static func pattern(_ pattern: String, matches name: String) -> Bool {
        pattern.hasSuffix("*") ? name.hasPrefix(pattern.dropLast()) : pattern == name
    }
}
