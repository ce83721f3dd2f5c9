import Foundation
import NetReach
import NetReachServe

/// Updates as a monitor hands them to serve, built from what a test says: a path, the kernel's
/// route per family through an interface, the namespace's links.
extension PathUpdate {
    /// `path` at `date`, judged from an IPv4 route through each of `routes` (its interface and
    /// gateway, empty on-link), with those interfaces and `links` as the namespace's.
    static func of(
        _ path: NetworkPath, at date: Date = Date(), routes: [(NetworkInterface, String)] = [],
        links: [SystemSnapshot.Link] = []
    ) -> PathUpdate {
        var all: [Int: SystemSnapshot.Link] = [:]
        for link in links { all[link.index] = link }
        var lookups: [IPAddress.Family: RouteLookup] = [:]
        for (interface, gateway) in routes {
            all[interface.index] = all[interface.index] ?? link(interface)
            lookups[.ipv4] = .route(.init(interfaceIndex: interface.index, gateway: IPAddress(gateway)))
        }
        return PathUpdate(path: path, routes: lookups, links: all, time: date)
    }

    /// A link the automatic classification types as `interface.type` (Ethernet or Wi-Fi).
    static func link(_ interface: NetworkInterface, isUp: Bool = true) -> SystemSnapshot.Link {
        SystemSnapshot.Link(
            index: interface.index, name: interface.name, isUp: isUp,
            deviceType: interface.type == .wifi ? "wlan" : nil, isWireless: interface.type == .wifi)
    }
}

extension ServeState {
    /// `/metrics`'s series lines (no comments), as a scrape would read them now.
    var seriesLines: [String] {
        exposition().split(separator: "\n").map(String.init).filter { !$0.hasPrefix("#") }
    }
}
