/// A network interface a path can use.
public struct NetworkInterface: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The kernel's name for the interface, such as `eth0` or `wlan0`.
    public var name: String
    /// The kernel's interface index (`if_nametoindex`).
    public var index: Int
    /// What kind of link the interface is.
    public var type: InterfaceType

    /// Creates an interface description.
    public init(name: String, index: Int, type: InterfaceType) {
        self.name = name
        self.index = index
        self.type = type
    }

    public var description: String { "\(name)(\(type))" }
}
