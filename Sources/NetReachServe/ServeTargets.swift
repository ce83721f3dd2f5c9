import NetReach

/// What `serve` watches: the part of its configuration a reload (SIGHUP, `POST /-/reload`) can
/// change. The address it listens on and the `--internet` settings need a restart.
///
/// ```swift
/// var targets = ServeTargets()                    // the internet, in this namespace
/// targets.destinations = [.init(name: "db", destination: PathDestination("10.0.0.5"))]
/// targets.followsNamespaceDirectory = true        // and in every `ip netns` namespace
/// ```
package struct ServeTargets: Sendable, Hashable {
    /// The namespaces named (`--namespace`, the file's `namespaces`), in order; the server's own
    /// when none is named. The first is the one endpoints answer for when none is asked for.
    package var namespaces: [NetworkNamespaceLabel] = [.own]
    /// Also every namespace `ip netns` names, as they come and go (`--all-namespaces`).
    package var followsNamespaceDirectory = false
    /// The destinations watched besides the internet, in every namespace.
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

/// A destination with the name it is exported under (`--to NAME=DEST`).
package struct NamedDestination: Sendable, Hashable {
    package var name: String
    package var destination: PathDestination

    package init(name: String, destination: PathDestination) {
        self.name = name
        self.destination = destination
    }
}
