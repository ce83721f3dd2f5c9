/// What one watched path is: a destination (by the name `--to NAME=DEST` gave it, or the
/// internet) in a namespace (as `--namespace` named it, or the server's own).
///
/// Both become label values, so both are operator-chosen names; the empty string stands for the
/// server's own namespace and for the internet.
///
/// ```swift
/// PathKey(namespace: "", destination: "")          // this namespace's path to the internet
/// PathKey(namespace: "lab1", destination: "db")    // --namespace lab1 --to db=10.0.0.5
/// ```
package struct PathKey: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The namespace's name as given to `--namespace`; empty for the server's own.
    package var namespace: String
    /// The destination's name from `--to NAME=DEST`; empty for the internet.
    package var destination: String

    package init(namespace: String, destination: String) {
        self.namespace = namespace
        self.destination = destination
    }

    /// The event-log topic and metric group of this path.
    package var topic: String { "path/\(namespace)/\(destination)" }

    /// `namespace` and `destination`, the labels every path series starts with.
    package var labels: [(String, String)] { [("namespace", namespace), ("destination", destination)] }

    package static func < (lhs: PathKey, rhs: PathKey) -> Bool {
        (lhs.namespace, lhs.destination) < (rhs.namespace, rhs.destination)
    }

    package var description: String {
        "\(destination.isEmpty ? "internet" : destination) in \(namespace.isEmpty ? "this namespace" : namespace)"
    }
}
