import NetReach
import NetReachConnectivity

/// `/readyz`'s condition (`serve --ready-when`) and the checks `/readyz` and `/health` make,
/// as pure functions of what the server has read.
///
/// ```swift
/// let checks = Health.readiness(paths: state.paths, keys: state.keys, condition: .satisfied)
/// checks.allSatisfy(\.passed)   // ready
/// ```
package enum Health {
    /// When the server is ready.
    package enum ReadyCondition: Sendable, Hashable, CustomStringConvertible {
        /// Once every watched path has been read (the default).
        case started
        /// Once, besides, the path to the internet is satisfied in every watched namespace.
        case satisfied
        /// Once, besides, the path to the named destination is satisfied in every namespace.
        case destination(String)
        /// Once, besides, the internet answers the probes (`--internet`): connectivity is full.
        case internet

        /// Parses `started`, `satisfied` or `to=NAME`.
        package init?(argument: String) {
            switch argument {
            case "started": self = .started
            case "satisfied": self = .satisfied
            case "internet": self = .internet
            case _ where argument.hasPrefix("to=") && argument.count > 3:
                self = .destination(String(argument.dropFirst(3)))
            default: return nil
            }
        }

        package var description: String {
            switch self {
            case .started: "started"
            case .satisfied: "satisfied"
            case .destination(let name): "to=\(name)"
            case .internet: "internet"
            }
        }
    }

    /// One named check and its outcome, as `/readyz?verbose` lists them.
    package struct Check: Sendable, Hashable {
        package var name: String
        package var passed: Bool
        /// Why it failed; empty when it passed.
        package var reason: String
    }

    /// The checks of `/readyz`: every path read, each namespace that cannot be entered (by label:
    /// why, from ``ServeState/namespaceProblems``), then the condition for each path it names.
    package static func readiness(
        paths: [PathKey: ServeState.Watched], keys: [PathKey], condition: ReadyCondition,
        verdict: Connectivity? = nil, namespaceProblems: [String: String] = [:]
    ) -> [Check] {
        let unread = keys.filter { paths[$0] == nil }
        var checks = [
            Check(
                name: "started", passed: unread.isEmpty,
                reason: unread.isEmpty ? "" : "not read yet: \(unread.map(\.description).joined(separator: ", "))")
        ]
        // A namespace serve may not enter is read as nothing at all, whatever the condition: its
        // paths count as read (unsatisfied), so only this check says the watch is blind there.
        for (label, problem) in namespaceProblems.sorted(by: { $0.key < $1.key }) {
            checks.append(Check(name: "namespace \(label)", passed: false, reason: problem))
        }
        let wanted: String
        switch condition {
        case .started: return checks
        case .internet:
            let level = verdict?.level ?? .unknown
            checks.append(
                Check(
                    name: "internet", passed: level == .full, reason: level == .full ? "" : "connectivity is \(level)"))
            return checks
        case .satisfied: wanted = ""
        case .destination(let name): wanted = name
        }
        for key in keys where key.destination == wanted {
            let path = paths[key]?.path
            let name = "path \(key)"
            if let path, path.status == .satisfied {
                checks.append(Check(name: name, passed: true, reason: ""))
            } else {
                checks.append(
                    Check(
                        name: name, passed: false,
                        reason: path.map { "\($0.unsatisfiedReason.map { "\($0)" } ?? "\($0.status)")" }
                            ?? "not read yet"))
            }
        }
        return checks
    }

    /// `/readyz`'s body: `ok`, or with `verbose` every check as Kubernetes lists them
    /// (`[+]started ok`, `[-]path … failed: reason`), then the verdict.
    package static func readinessText(_ checks: [Check], verbose: Bool) -> String {
        let ready = checks.allSatisfy(\.passed)
        guard verbose || !ready else { return "ok\n" }
        var lines = checks.filter { verbose || !$0.passed }.map { check in
            check.passed ? "[+]\(check.name) ok" : "[-]\(check.name) failed: \(check.reason)"
        }
        lines.append(ready ? "readyz check passed" : "readyz check failed")
        return lines.joined(separator: "\n") + "\n"
    }

    /// `/health` in Consul's terms: passing (200) when the path to the internet is satisfied in
    /// every namespace, critical (503) when one is not or has not been read.
    package enum Verdict: Sendable, Hashable {
        case passing
        case warning(String)
        case critical(String)

        /// Consul's HTTP check statuses: 2xx passing, 429 warning, anything else critical.
        package var statusCode: Int {
            switch self {
            case .passing: 200
            case .warning: 429
            case .critical: 503
            }
        }
    }

    /// The `/health` verdict: with probes (`verdict` given), the connectivity level: full is
    /// passing, portal, limited and local a warning, none or not judged yet critical. Without,
    /// the internet paths of every namespace.
    package static func health(
        paths: [PathKey: ServeState.Watched], keys: [PathKey], verdict: Connectivity? = nil, judges: Bool = false
    ) -> Verdict {
        if judges {
            switch verdict?.level ?? .unknown {
            case .full: return .passing
            case .portal(let login):
                return .warning("captive portal" + (login.map { " (sign in at \($0.absoluteString))" } ?? ""))
            case .limited: return .warning("limited: a route to the internet, but no answer through it")
            case .local: return .warning("local: no route beyond the local network")
            case .none: return .critical("none: no usable path")
            case .unknown: return .critical("connectivity not judged yet")
            }
        }
        for key in keys where key.destination.isEmpty {
            guard let path = paths[key]?.path else { return .critical("\(key): not read yet") }
            if path.status != .satisfied {
                return .critical("\(key): \(path.unsatisfiedReason.map { "\($0)" } ?? "\(path.status)")")
            }
        }
        return .passing
    }
}
