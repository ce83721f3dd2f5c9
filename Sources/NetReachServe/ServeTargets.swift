import NetReach

/// What `serve` watches: the part of its configuration a reload (SIGHUP, `POST /-/reload`) can
/// change. The address it listens on and the `--internet` settings need a restart.
///
/// ```swift
/// var targets = ServeTargets()                    // the internet, in this namespace
/// targets.destinations = [.init(name: "db", destination: PathDestination("10.0.0.5"))]
/// targets.destinations.append(
///     .init(name: "dns", destination: "10.0.0.53", traffic: PathTraffic(transportProtocol: .udp, port: 53)))
/// targets.followsNamespaceDirectory = true        // and in every `ip netns` namespace
/// ```
package struct ServeTargets: Sendable, Hashable {
    /// The namespaces named (`--namespace`, the file's `namespaces`), in order; the server's own
    /// when none is named. The first is the one endpoints answer for when none is asked for.
    package var namespaces: [NetworkNamespaceLabel] = [.own]
    /// Also every namespace `ip netns` names, as they come and go (`--all-namespaces`).
    package var followsNamespaceDirectory = false
    /// The destinations watched besides the internet, in every namespace, each with its traffic
    /// (the internet's is always ``PathTraffic/web``: `/health`, `--ready-when` and the probes read it).
    package var destinations: [NamedDestination] = []
    /// When `/readyz` says ready.
    package var readyWhen = Health.ReadyCondition.started

    package init() {}
}

/// A namespace to watch: its label value and where it is.
package struct NetworkNamespaceLabel: Sendable, Hashable {
    /// `namespace` label value: the argument as given (the name, for `ip netns` namespaces
    /// followed); empty for the server's own namespace.
    package var label: String
    /// `nil` for the server's own.
    package var namespace: NetworkNamespace?

    package init(label: String, namespace: NetworkNamespace?) {
        self.label = label
        self.namespace = namespace
    }

    /// The server's own namespace.
    package static let own = NetworkNamespaceLabel(label: "", namespace: nil)

    /// A namespace from `--namespace`: a process id (its `/proc/PID/ns/net`), a path, or an
    /// `ip netns` name.
    package init(argument: String) {
        if let pid = Int32(argument), pid > 0 {
            self.init(label: argument, namespace: .process(pid))
        } else {
            self.init(label: argument, namespace: NetworkNamespace(argument: argument))
        }
    }
}

/// A destination with the name it is exported under (`--to NAME=DEST`), and the traffic whose
/// path to it is watched.
package struct NamedDestination: Sendable, Hashable {
    package var name: String
    package var destination: PathDestination
    /// `--port`/`--protocol`, or the file's `port:`/`protocol:` for this destination.
    package var traffic: PathTraffic

    package init(name: String, destination: PathDestination, traffic: PathTraffic = .web) {
        self.name = name
        self.destination = destination
        self.traffic = traffic
    }

    /// Whether `name` may name a destination: 1 to 64 ASCII letters, digits, `.`, `_` and `-`
    /// (a label value and a `?to=` query both carry it unescaped).
    package static func isValidName(_ name: String) -> Bool {
        (1...64).contains(name.utf8.count)
            && name.utf8.allSatisfy { byte in
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                    || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                    || [UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-")].contains(byte)
            }
    }
}

/// The packet a watched path is the path of: policy rules can send traffic apart by protocol and
/// port (`ip rule ... ipproto udp dport 53`), so the kernel is asked about this one.
///
/// ```swift
/// let dns = PathTraffic(transportProtocol: .udp, port: 53)
/// PathMonitor(destination: "10.0.0.53", port: dns.port, protocol: dns.transportProtocol)
/// ```
package struct PathTraffic: Sendable, Hashable, CustomStringConvertible {
    package var transportProtocol: TransportProtocol
    package var port: UInt16

    package init(transportProtocol: TransportProtocol, port: UInt16) {
        self.transportProtocol = transportProtocol
        self.port = port
    }

    /// A web client's, TCP to port 443: the internet path's, and every destination's by default.
    package static let web = PathTraffic(transportProtocol: .tcp, port: 443)

    /// `udp/53`.
    package var description: String { "\(transportProtocol)/\(port)" }
}
