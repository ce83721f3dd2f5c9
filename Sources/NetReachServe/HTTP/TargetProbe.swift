import Dispatch
import NetReach
import NetReachSystem
import Prometheus

/// `GET /probe?target=DEST[&namespace=NS]`: blackbox_exporter's multi-target pattern for the
/// kernel's path. Prometheus names the target in the URL (relabelling, as for blackbox_exporter);
/// the answer is that destination's path as metrics, `probe_success` 1 when it is satisfied.
///
/// Nothing is sent to the target: the kernel is asked its route (a host name is resolved first,
/// within the scrape's `X-Prometheus-Scrape-Timeout-Seconds`). Only namespaces the server watches
/// can be named, and at most ``limit`` probes run at once: a flood of scrapes cannot make the
/// server enter arbitrary namespaces or hold unbounded monitors.
///
/// ```swift
/// let probe = TargetProbe(namespaces: ["": nil, "blue": .named("blue")])
/// let update = try await probe.update(to: "10.0.0.5", namespace: "blue", timeout: .seconds(5))
/// ```
package final class TargetProbe: Sendable {
    /// Why a probe was not made.
    package enum Refusal: Error, Hashable {
        case unknownNamespace(String)
        case busy
    }

    /// Label value → namespace, for the namespaces the server watches now.
    private let namespaces: Locked<[String: NetworkNamespace?]>
    /// Probes that may run at once.
    package let limit: Int
    private let running = Locked(0)
    /// Where host names are resolved: a stuck resolver holds these threads and no more, and a
    /// lookup that finds none free within the scrape's timeout is given up (DesignNotes, issue 47).
    private let lookups: BlockingWork.Pool
    /// Where a probe's monitor reads its route (a blocking netlink round trip, milliseconds):
    /// apart from the lookups, so a stuck resolver never holds up a probe of an address.
    private let routes: BlockingWork.Pool

    package init(namespaces: [String: NetworkNamespace?], limit: Int = 16, lookupThreads: Int = 4) {
        self.namespaces = Locked(namespaces)
        self.limit = limit
        lookups = BlockingWork.Pool(named: "netreach-lookup", width: lookupThreads)
        routes = BlockingWork.Pool(named: "netreach-probe", width: 4)
    }

    /// Threads started for lookups and route reads so far (bounded by the pools' widths).
    package var threadCount: Int { lookups.threadCount + routes.threadCount }

    /// The namespaces a probe may name from now on (the watch's, after a reload or as `ip netns`
    /// namespaces come and go).
    package func allow(_ namespaces: [String: NetworkNamespace?]) {
        self.namespaces.withLock { $0 = namespaces }
    }

    /// The kernel's path to `target` in the namespace labelled `namespace`, and the routes it was
    /// judged from, within `timeout`.
    package func update(
        to target: String, namespace: String, timeout: Duration
    ) async throws(Refusal) -> PathUpdate {
        guard let entry = namespaces.withLock({ $0[namespace] }) else { throw .unknownNamespace(namespace) }
        let admitted = running.withLock { running in
            guard running < limit else { return false }
            running += 1
            return true
        }
        guard admitted else { throw .busy }
        defer { running.withLock { $0 -= 1 } }
        let deadline = ContinuousClock.now + timeout
        let destination = PathDestination(target)
        // Resolved before the monitor starts: its start would otherwise block a thread on the
        // resolver, one per probe, each left behind when the lookup outlives the scrape. In
        // another namespace the lookup runs inside it on a thread of its own, which the pool's
        // thread waits for: still at most two threads a lookup slot.
        var resolved: Result<[IPAddress], HostResolutionError> = .success([])
        if case .host(let host) = destination {
            let seconds = Int(max(1, timeout.components.seconds))
            resolved =
                await lookups.run(until: deadline) { HostResolver.lookUp(host, in: entry) }
                ?? .failure(.timedOut(host: host, seconds: seconds))
        }
        let answer = resolved
        let unread = PathUpdate(path: .unsatisfied(.monitorUnavailable))
        return await routes.run(until: deadline) {
            let monitor = PathMonitor(destination: destination, namespace: entry, resolve: { _, _ in answer })
            let first = Locked<PathUpdate?>(nil)
            monitor.updateObserver = { update in first.withLock { $0 = $0 ?? update } }
            // Returns once the state has been read: the first update is in.
            monitor.start(queue: DispatchQueue(label: "netreach.serve.probe.monitor"))
            monitor.cancel()
            return first.withLock { $0 } ?? unread
        } ?? unread
    }

    /// The answer's text: `probe_success`, `probe_duration_seconds`, then the path's series as
    /// `/metrics` has them, labelled with the target as `destination`.
    package static func exposition(
        of update: PathUpdate, target: String, namespace: String, duration: Duration
    ) -> String {
        let key = PathKey(namespace: namespace, destination: target)
        let path = update.path
        var exposition = MetricsExposition()
        exposition.add(
            contentsOf: PathSamples.samples(
                of: path, key: key, routes: PathSamples.routes(of: update), lastChange: 0
            ).filter { $0.name != "netreach_path_last_change_timestamp_seconds" })
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        return """
            # HELP probe_success 1 when the kernel's path to the target is satisfied (nothing is sent to it).
            # TYPE probe_success gauge
            probe_success \(path.status == .satisfied ? 1 : 0)
            # HELP probe_duration_seconds How long reading the path took, name resolution included.
            # TYPE probe_duration_seconds gauge
            probe_duration_seconds \(seconds)

            """ + exposition.text()
    }

    /// The scrape's own time limit, from Prometheus's header, less half a second for the answer to
    /// travel (as blackbox_exporter does); 5 s without the header; between 0.1 s and 30 s.
    package static func timeout(header: String?) -> Duration {
        guard let header, let seconds = Double(header), seconds.isFinite else { return .seconds(5) }
        return .milliseconds(Int64((min(max(seconds - 0.5, 0.1), 30) * 1000).rounded()))
    }
}
