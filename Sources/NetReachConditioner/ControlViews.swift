import NIOCore
import NIOHTTP1
import NIOPosix

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A listener as the control API shows it.
struct ListenerView: Encodable {
    var name: String
    var listen: String
    var upstream: String
    var listening: Bool
    var profile: String?
    var conditions: LinkConditions
    var faults: [NamedFault]
}

/// The statistics of one listener's connections.
struct ListenerStatistics: Encodable {
    var name: String
    var connections: [ConnectionStatistics]
}
