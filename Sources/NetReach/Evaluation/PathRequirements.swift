/// Which interfaces a monitor may consider, as in `NWPathMonitor(requiredInterfaceType:)` and
/// `NWPathMonitor(prohibitedInterfaceTypes:)`.
public struct PathRequirements: Sendable, Hashable {
    /// Only interfaces of this type count; `nil` allows every type but loopback.
    public var requiredInterfaceType: InterfaceType?
    /// Interfaces of these types never count.
    public var prohibitedInterfaceTypes: Set<InterfaceType>

    /// Creates requirements; with no arguments, every non-loopback interface counts.
    public init(requiredInterfaceType: InterfaceType? = nil, prohibitedInterfaceTypes: Set<InterfaceType> = []) {
        self.requiredInterfaceType = requiredInterfaceType
        self.prohibitedInterfaceTypes = prohibitedInterfaceTypes
    }

    /// Whether an interface of `type` may be used. Loopback counts only when it is required.
    public func allows(_ type: InterfaceType) -> Bool {
        if prohibitedInterfaceTypes.contains(type) { return false }
        if let required = requiredInterfaceType { return type == required }
        return type != .loopback
    }
}
