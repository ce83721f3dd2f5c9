import NetReach
import NetReachConnectivity

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension ServeState {
    /// What `serve` knows, as a value: each input (a monitor's update, a verdict, a reload, a
    /// withdrawal) is a `mutating` method that returns the ``Action`` it calls for (events to
    /// publish, waiters to resume, probe results to count), and `/metrics` is a pure function of
    /// it (``exposition(eventClients:droppedClients:)``). It does no I/O: ``ServeState`` holds it
    /// under a lock and performs the actions.
    ///
    /// ```swift
    /// var machine = ServeState.StateMachine(keys: [key], version: "1.0")
    /// let token = machine.beginRecording(key, traffic: .web)
    /// let action = machine.record(update, for: key, recorder: token)
    /// // action.events == [.path(key, update.path, .web, at: update.time), .namespace("", available: true, watched: true)]
    /// ```
    package struct StateMachine: Sendable {
        /// An event for the stream, in the order the state changed.
        package enum Event: Sendable, Hashable {
            /// `key`'s path, first read or changed at `at`.
            case path(PathKey, NetworkPath, PathTraffic, at: Date)
            /// `key`'s path is no longer watched (an event whose path is `null`).
            case withdrawn(PathKey, PathTraffic)
            /// A namespace became (un)available, or is no longer watched.
            case namespace(String, available: Bool, watched: Bool)
            /// A namespace's connectivity levels changed.
            case connectivity(String, Connectivity)
            /// Nothing of `topic` is replayed to clients that join from now on.
            case forget(topic: String)
        }

        /// What the owner does after an input, in this order: the events (under its lock, so that
        /// they leave in the order the state changed), then the rest.
        package struct Action: Sendable {
            package var events: [Event] = []
            /// Tasks waiting until every watched path has been read.
            package var resume: [CheckedContinuation<Void, Never>] = []
            /// Probe results not counted before (`netreach_probe_duration_seconds`,
            /// `netreach_probe_results_total`).
            package var probeResults: [ProbeResult] = []
            /// Whether the input was taken: `false` for a path from a recorder that was replaced.
            package var isRecorded = true

            static let ignored = Action(isRecorded: false)
        }

        /// Who records a path, and the traffic it is the path of.
        private struct Recorder: Sendable {
            var token: UInt64
            var traffic: PathTraffic
        }

        package private(set) var keys: [PathKey]
        package private(set) var defaultNamespace: String
        package private(set) var readyWhen: Health.ReadyCondition
        package private(set) var paths: [PathKey: Watched] = [:]
        /// The latest update of each path: the kernel's routes it was judged from, and for the
        /// internet's its namespace's interfaces.
        package private(set) var updates: [PathKey: PathUpdate] = [:]
        /// Whether each namespace observed so far can be observed now.
        package private(set) var availability: [String: Bool] = [:]
        /// Why a namespace cannot be entered, by label.
        package private(set) var namespaceProblems: [String: String] = [:]
        package private(set) var verdicts: [String: Connectivity] = [:]
        package let version: String
        /// The families the connectivity monitor judges (`netreach_connectivity_level`).
        package let judgedFamilies: Set<IPAddress.Family>
        /// Whether a change of levels is an event.
        package let judgesConnectivity: Bool
        private var recorders: [PathKey: Recorder] = [:]
        private var nextRecorder: UInt64 = 0
        private var lastReloadSucceeded = true
        /// Seconds since the Unix epoch: the start, then each reload that succeeded.
        private var lastReloadSuccess: Double
        /// The levels an event was last sent for, per namespace.
        private var announcedLevels: [String: [ConnectivityLevel]] = [:]
        /// The evidence already counted, per namespace and family (a verdict repeats a round's
        /// evidence when only the path changed).
        private var countedEvidence: [String: [IPAddress.Family: [ProbeResult]]] = [:]
        /// Tasks waiting until every watched path has been read.
        var readWaiters = ConditionWaiters()

        package init(
            keys: [PathKey], version: String, readyWhen: Health.ReadyCondition = .started,
            judgesConnectivity: Bool = false, judgedFamilies: Set<IPAddress.Family> = [.ipv4, .ipv6],
            startedAt start: Date = Date()
        ) {
            self.keys = keys.sorted()
            defaultNamespace = keys.first?.namespace ?? ""
            self.readyWhen = readyWhen
            self.version = version
            self.judgesConnectivity = judgesConnectivity
            self.judgedFamilies = judgedFamilies
            lastReloadSuccess = start.timeIntervalSince1970
        }

        /// Whether every watched path has been read once.
        package var hasReadAll: Bool { keys.allSatisfy { paths[$0] != nil } }

        /// Every namespace observed so far, with its interfaces (the internet monitor's latest
        /// update's links, typed as that monitor types them) while it can be observed.
        package var namespaces: [String: Namespace] {
            availability.reduce(into: [:]) { namespaces, entry in
                namespaces[entry.key] = Namespace(
                    isAvailable: entry.value, interfaces: entry.value ? interfaces(of: entry.key) : [:])
            }
        }

        private func interfaces(of namespace: String) -> [String: Interface] {
            guard let update = updates[PathKey(namespace: namespace, destination: "")] else { return [:] }
            return update.links.values.reduce(into: [:]) { interfaces, link in
                interfaces[link.name] = Interface(type: update.classification.type(of: link), isUp: link.isOperational)
            }
        }

        // MARK: Inputs

        /// From now on `keys` are watched; the paths no longer among them are withdrawn.
        package mutating func watch(
            keys: [PathKey], defaultNamespace: String, readyWhen: Health.ReadyCondition
        ) -> Action {
            let kept = Set(keys)
            self.keys = keys.sorted()
            self.defaultNamespace = defaultNamespace
            self.readyWhen = readyWhen
            var action = Action()
            for key in paths.keys.filter({ !kept.contains($0) }).sorted() { action.append(unwatch(key)) }
            action.resume += readWaitersToResume()
            return action
        }

        /// Withdraws `key`'s path: a `path` event whose path is `nil` if it was read, and no more
        /// paths from its recorder. It stays among ``keys`` if still watched.
        package mutating func unwatch(_ key: PathKey) -> Action {
            let traffic = recorders.removeValue(forKey: key)?.traffic ?? .web
            updates[key] = nil
            guard paths.removeValue(forKey: key) != nil else { return Action() }
            return Action(events: [.withdrawn(key, traffic), .forget(topic: key.topic)])
        }

        /// Withdraws the namespace `namespace` and every path in it.
        package mutating func unwatch(namespace: String) -> Action {
            verdicts[namespace] = nil
            namespaceProblems[namespace] = nil
            announcedLevels[namespace] = nil
            countedEvidence[namespace] = nil
            let known = availability.removeValue(forKey: namespace) != nil
            var action = Action()
            for key in paths.keys.filter({ $0.namespace == namespace }).sorted() { action.append(unwatch(key)) }
            for key in recorders.keys where key.namespace == namespace { recorders[key] = nil }
            guard known else { return action }
            action.events += [
                .namespace(namespace, available: false, watched: false), .forget(topic: "namespace/\(namespace)"),
                .forget(topic: "connectivity/\(namespace)"),
            ]
            return action
        }

        /// Makes the caller the one recorder of `key`'s paths, the paths of `traffic`: only
        /// ``record(_:for:recorder:)`` calls with the returned token (or none) count from now on.
        package mutating func beginRecording(_ key: PathKey, traffic: PathTraffic) -> UInt64 {
            nextRecorder += 1
            recorders[key] = Recorder(token: nextRecorder, traffic: traffic)
            return nextRecorder
        }

        /// Records a monitor's update for `key`: its path (an event when it is the first or a
        /// change), the routes and links it was judged from, and for the internet's monitor (or
        /// any monitor that cannot observe) its namespace's availability (an event when it moves).
        package mutating func record(_ update: PathUpdate, for key: PathKey, recorder: UInt64? = nil) -> Action {
            if let recorder, recorders[key]?.token != recorder { return .ignored }
            var action = Action()
            updates[key] = update
            let now = update.time.timeIntervalSince1970
            if paths[key]?.path != update.path || paths[key] == nil {
                let changes = (paths[key]?.changes ?? -1) + 1
                paths[key] = Watched(path: update.path, changes: changes, lastChange: now)
                action.events.append(.path(key, update.path, recorders[key]?.traffic ?? .web, at: update.time))
            }
            let available = update.path.unsatisfiedReason != .monitorUnavailable
            // The internet's monitor speaks for its namespace: every monitor there reads the same
            // interfaces, and each goes unavailable with it.
            if key.destination.isEmpty || !available {
                let old = availability.updateValue(available, forKey: key.namespace)
                if old != available {
                    action.events.append(.namespace(key.namespace, available: available, watched: true))
                }
            }
            action.resume = readWaitersToResume()
            return action
        }

        /// Records a connectivity verdict of `namespace`: the probe results not counted yet, and an
        /// event when its levels changed.
        package mutating func record(_ verdict: Connectivity, namespace: String) -> Action {
            verdicts[namespace] = verdict
            var action = Action()
            for family in IPAddress.Family.allCases {
                let evidence = verdict[family].evidence
                guard !evidence.isEmpty, countedEvidence[namespace]?[family] != evidence else { continue }
                countedEvidence[namespace, default: [:]][family] = evidence
                action.probeResults += evidence
            }
            if announcedLevels[namespace] != verdict.levels {
                announcedLevels[namespace] = verdict.levels
                if judgesConnectivity { action.events.append(.connectivity(namespace, verdict)) }
            }
            return action
        }

        /// Records a reload's outcome.
        package mutating func recordReload(succeeded: Bool, at date: Date) {
            lastReloadSucceeded = succeeded
            if succeeded { lastReloadSuccess = date.timeIntervalSince1970 }
        }

        /// Records why `namespace` cannot be entered, until it is no longer watched.
        package mutating func recordProblem(_ problem: String, namespace: String) {
            namespaceProblems[namespace] = problem
        }

        private mutating func readWaitersToResume() -> [CheckedContinuation<Void, Never>] {
            hasReadAll ? readWaiters.takeAll() : []
        }

        // MARK: The scrape

        /// Serve's families as they stand: the build, the last reload, every path read (its
        /// gauges, its kernel routes, its changes), every namespace's interfaces and
        /// availability, the latest verdicts, and the event stream's clients.
        package func exposition(eventClients: Int, droppedClients: Int) -> MetricsExposition {
            var exposition = MetricsExposition()
            exposition.add(MetricSample(name: "netreach_build_info", labels: [("version", version)], value: 1))
            exposition.add(
                MetricSample(name: "netreach_config_last_reload_successful", value: lastReloadSucceeded ? 1 : 0))
            exposition.add(
                MetricSample(name: "netreach_config_last_reload_success_timestamp_seconds", value: lastReloadSuccess))
            for key in paths.keys.sorted() {
                guard let watched = paths[key] else { continue }
                exposition.add(
                    contentsOf: PathSamples.samples(
                        of: watched.path, key: key, routes: updates[key].map(PathSamples.routes(of:)) ?? [],
                        lastChange: watched.lastChange, traffic: recorders[key]?.traffic ?? .web))
                exposition.add(
                    MetricSample(
                        name: "netreach_path_changes_total", labels: key.labels, value: Double(watched.changes)))
            }
            for (namespace, available) in availability.sorted(by: { $0.key < $1.key }) {
                if available {
                    for (name, interface) in interfaces(of: namespace).sorted(by: { $0.key < $1.key }) {
                        exposition.add(
                            MetricSample(
                                name: "netreach_interface_up",
                                labels: [
                                    ("namespace", namespace), ("interface", name), ("type", interface.type.rawValue),
                                ],
                                value: interface.isUp ? 1 : 0))
                    }
                }
                exposition.add(
                    MetricSample(
                        name: "netreach_namespace_available", labels: [("namespace", namespace)],
                        value: available ? 1 : 0))
            }
            for (namespace, verdict) in verdicts.sorted(by: { $0.key < $1.key }) {
                exposition.add(
                    contentsOf: ConnectivitySamples.samples(of: verdict, namespace: namespace, families: judgedFamilies)
                )
            }
            exposition.add(MetricSample(name: "netreach_event_clients", value: Double(eventClients)))
            exposition.add(MetricSample(name: "netreach_event_clients_dropped_total", value: Double(droppedClients)))
            return exposition
        }
    }
}

extension ServeState.StateMachine.Action {
    mutating func append(_ other: Self) {
        events += other.events
        resume += other.resume
        probeResults += other.probeResults
    }
}
