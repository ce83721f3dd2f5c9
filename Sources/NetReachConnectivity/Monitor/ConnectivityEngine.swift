import Logging
import NetReach

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The monitor's decisions over time: paths in, rounds of probes out, verdicts published. The
/// judging itself is in the value types (`ProbeRound`, `ConnectivityHysteresis`, `ProbeSchedule`);
/// this actor only owns the round in flight and the timer.
actor ConnectivityEngine {
    private let configuration: ConnectivityMonitor.Configuration
    private let prober: any ConnectivityProber
    private let elapsed: @Sendable () -> Duration
    private let sleepUntil: @Sendable (Duration) async throws -> Void
    private let publish: @Sendable (Connectivity) -> Void
    /// When a request over this path last got an answer (see ``ConnectivityMonitor``), if ever.
    private let lastEvidence: @Sendable () -> Duration?
    private let metrics: ConnectivityMetrics
    private let logger: Logger

    private var hysteresis: [IPAddress.Family: ConnectivityHysteresis]
    private var schedule: ProbeSchedule
    private var verdict = Connectivity.unknown
    /// What makes a path another network: a new one starts from `unknown`.
    private var network: NetworkIdentity?
    /// Bumped by every path change: a round or timer of an older path is ignored.
    private var generation = 0
    private var round: Task<Void, Never>?
    private var timer: Task<Void, Never>?
    /// When the last round ended (or the evidence that stood in for one arrived).
    private var lastRoundEnded: Duration?
    /// A link that lost its carrier (`linkDown`) while the verdict was better than `none`: the
    /// verdict waits ``ConnectivityMonitor/Configuration/carrierLossDelay`` before acting on it,
    /// as NetworkManager defers a carrier loss, so a flapping link changes it at most once.
    private var pendingLoss: Task<Void, Never>?
    /// When ``timer`` and ``pendingLoss`` are due, while they are armed: what ``isQuiet`` reads.
    private var timerDeadline: Duration?
    private var lossDeadline: Duration?

    init(
        configuration: ConnectivityMonitor.Configuration, prober: any ConnectivityProber,
        elapsed: @escaping @Sendable () -> Duration, sleepUntil: @escaping @Sendable (Duration) async throws -> Void,
        lastEvidence: @escaping @Sendable () -> Duration? = { nil },
        metrics: ConnectivityMetrics, logger: Logger,
        publish: @escaping @Sendable (Connectivity) -> Void
    ) {
        self.lastEvidence = lastEvidence
        self.metrics = metrics
        self.logger = logger
        self.configuration = configuration
        self.prober = prober
        self.elapsed = elapsed
        self.sleepUntil = sleepUntil
        self.publish = publish
        let one = ConnectivityHysteresis(
            failedRoundsToLeaveFull: configuration.failedRoundsToLeaveFull, dwell: configuration.dwell)
        hysteresis = [.ipv4: one, .ipv6: one]
        schedule = ProbeSchedule(
            interval: configuration.probeInterval, initialBackOff: configuration.initialBackOff,
            periodicWhileFull: configuration.probesWhileFull, maximumBackOff: configuration.maximumBackOff)
    }

    /// Stops the round in flight and the timer for good.
    func stop() {
        generation += 1
        round?.cancel()
        timer?.cancel()
        pendingLoss?.cancel()
        (timerDeadline, lossDeadline) = (nil, nil)
    }

    /// Whether nothing can happen without a new path or the clock moving on: no round in flight,
    /// and every armed wait due later than now. Tests wait for this instead of sleeping before they
    /// look for something that must not have happened.
    var isQuiet: Bool {
        let now = elapsed()
        let roundInFlight = round.map { !$0.isCancelled } ?? false
        return !roundInFlight && [timerDeadline, lossDeadline].allSatisfy { $0.map { $0 > now } ?? true }
    }

    /// A new path: judged at once from the path where it decides (no path, no route beyond the
    /// link), else by a round of probes now. `familyReasons` says why each family the path does
    /// not support cannot be used (``PathMonitor/familyReasons()``).
    func pathChanged(_ path: NetworkPath, familyReasons: [IPAddress.Family: UnsatisfiedReason] = [:]) {
        if deferLoss(path, familyReasons: familyReasons) { return }
        pendingLoss?.cancel()
        pendingLoss = nil
        generation += 1
        round?.cancel()
        timer?.cancel()
        (timerDeadline, lossDeadline) = (nil, nil)
        let identity = NetworkIdentity(path)
        let isAnotherNetwork = identity != network
        network = identity

        guard path.status == .satisfied else {
            let fact = ConnectivityLevel.withoutRoute(path.unsatisfiedReason)
            for family in IPAddress.Family.allCases { setLevel(hysteresis[family]!.path(fact), family, evidence: []) }
            verdict.path = path
            verdict.probesSuspended = nil
            publish(verdict)
            return
        }
        for family in IPAddress.Family.allCases {
            if !configuration.families.contains(family) {
                setLevel(hysteresis[family]!.path(.unknown), family, evidence: [])
            } else if !path.supports(family) {
                // local only where the family has a local network (no default route); with no
                // address of the family at all (an IPv6-only host's IPv4) there is none.
                setLevel(
                    hysteresis[family]!.path(.withoutRoute(familyReasons[family] ?? .noDefaultRoute)), family,
                    evidence: [])
            } else if isAnotherNetwork {
                setLevel(hysteresis[family]!.path(.unknown), family, evidence: [])
            }
        }
        verdict.path = path
        verdict.probesSuspended = suspension(on: path)
        publish(verdict)
        guard verdict.probesSuspended == nil else { return }
        _ = schedule.pathChanged(at: elapsed())
        startRound()
    }

    /// Whether `path` is a carrier loss to wait out rather than act on: the path changes at once
    /// (the verdict carries it), the levels only once the loss has lasted
    /// ``ConnectivityMonitor/Configuration/carrierLossDelay``. A loss already waited on keeps its
    /// deadline (NetworkManager does not restart its timer either); a return cancels it.
    private func deferLoss(_ path: NetworkPath, familyReasons: [IPAddress.Family: UnsatisfiedReason]) -> Bool {
        guard path.status != .satisfied, path.unsatisfiedReason == .linkDown,
            configuration.carrierLossDelay > .zero, verdict.path.status == .satisfied || pendingLoss != nil,
            verdict.level.rank > ConnectivityLevel.none.rank
        else { return false }
        verdict.path = path
        publish(verdict)
        guard pendingLoss == nil else { return true }
        // The round in flight would judge a link that is gone; the one after the return judges anew.
        round?.cancel()
        round = nil
        timer?.cancel()
        timer = nil
        timerDeadline = nil
        generation += 1
        let generation = self.generation
        let deadline = elapsed() + configuration.carrierLossDelay
        lossDeadline = deadline
        let sleepUntil = self.sleepUntil
        pendingLoss = Task {
            do { try await sleepUntil(deadline) } catch { return }
            self.lossLasted(familyReasons: familyReasons, generation: generation)
        }
        return true
    }

    /// The carrier stayed away for the whole delay: the path's fact counts now. (A return or
    /// another path since then bumped the generation.)
    private func lossLasted(familyReasons: [IPAddress.Family: UnsatisfiedReason], generation: Int) {
        guard generation == self.generation, pendingLoss != nil else { return }
        pendingLoss = nil
        lossDeadline = nil
        // verdict.path is the lost path already, and no loss is pending: it is not deferred again.
        pathChanged(verdict.path, familyReasons: familyReasons)
    }

    private func setLevel(_ level: ConnectivityLevel, _ family: IPAddress.Family, evidence: [ProbeResult]) {
        verdict[family] = Connectivity.Family(level: level, evidence: evidence)
        // A family no probe can be sent over stays unknown and is not waited for.
        let judged = configuration.families.filter { family in
            !verdict.path.supports(family) || hasProbe(for: family)
        }
        verdict.settleLevel(judging: judged)
    }

    /// The families probed now: judged, supported by the path, with a probe that can go over them.
    private var probedFamilies: [IPAddress.Family] {
        IPAddress.Family.allCases.filter { family in
            configuration.families.contains(family) && verdict.path.supports(family) && hasProbe(for: family)
        }
    }

    /// Whether some probe can be sent over `family`.
    private func hasProbe(for family: IPAddress.Family) -> Bool {
        configuration.probes.contains { $0.canBeSent(over: family) }
    }

    private func suspension(on path: NetworkPath) -> String? {
        if path.isExpensive && !configuration.allowsExpensiveProbes { return "the path is expensive" }
        if path.isConstrained && !configuration.allowsConstrainedProbes { return "the path is constrained" }
        let families = IPAddress.Family.allCases.filter { configuration.families.contains($0) && path.supports($0) }
        if !families.contains(where: hasProbe(for:)) {
            return configuration.probes.isEmpty
                ? "no probe is configured" : "no probe can be sent over this path's families"
        }
        return nil
    }

    private func startRound() {
        let generation = self.generation
        let families = probedFamilies
        let probes = configuration.probes
        let prober = self.prober
        let timeout = configuration.probeTimeout
        let api = captivePortalAPI
        round = Task {
            // The network's own word first (RFC 8908): captive is a portal, and no probe is sent.
            if let api,
                case .answered(let status, let latency) = await prober.captivePortalStatus(at: api, timeout: timeout),
                status.isCaptive
            {
                let evidence = "the network's captive-portal API (RFC 8908) says captive"
                let results = families.map { family in
                    ProbeResult(
                        probe: ConnectivityProbe(api, expecting: .bodyPrefix("{")), family: family, status: 200,
                        latency: latency, verdict: .portal(loginURL: status.userPortalURL, evidence: evidence))
                }
                self.roundEnded(results, families: families, generation: generation)
                return
            }
            let results = await withTaskGroup(of: ProbeResult.self) { group in
                for family in families {
                    for probe in probes where probe.canBeSent(over: family) {
                        group.addTask { await prober.probe(probe, over: family, timeout: timeout) }
                    }
                }
                var results: [ProbeResult] = []
                for await result in group { results.append(result) }
                return results
            }
            self.roundEnded(results, families: families, generation: generation)
        }
    }

    /// The RFC 8908 API URL announced for the path's preferred interface, if one is and it is asked.
    private var captivePortalAPI: URL? {
        guard configuration.usesCaptivePortalAPI, let interface = verdict.path.primaryInterface else { return nil }
        return CaptivePortalAPI.announcedURL(
            interfaceIndex: interface.index, stateDirectory: configuration.linkStateDirectory)
    }

    private func roundEnded(_ results: [ProbeResult], families: [IPAddress.Family], generation: Int) {
        guard generation == self.generation, !Task.isCancelled else { return }
        round = nil
        let now = elapsed()
        lastRoundEnded = now
        metrics.rounds.increment()
        metrics.record(results)
        logger.debug(
            "probe round ended",
            metadata: [
                "passed": "\(results.filter { $0.verdict == .passed }.count)", "probes": "\(results.count)",
            ])
        for result in results { logger.trace("probe result", metadata: ["result": "\(result)"]) }
        for family in families {
            let own = results.filter { $0.family == family }
            // Results in the probes' order, whatever order they finished in.
            let ordered =
                configuration.probes.flatMap { probe in own.filter { $0.probe == probe } }
                + own.filter { !configuration.probes.contains($0.probe) } // the captive-portal API's answer
            let applicable = ordered.count
            let level = ProbeRound.level(of: ordered, quorum: min(configuration.quorum, max(1, applicable)))
            setLevel(hysteresis[family]!.round(level, at: now), family, evidence: ordered)
        }
        publish(verdict)
        let doubting = families.contains { hysteresis[$0]!.isDoubtingFull }
        arm(schedule.roundEnded(showing: verdict.level, doubting: doubting, at: now))
    }

    /// Starts a round at `deadline` (none when `nil`).
    private func arm(_ deadline: Duration?) {
        timer?.cancel()
        timer = nil
        timerDeadline = deadline
        guard let deadline else { return }
        let generation = self.generation
        let sleepUntil = self.sleepUntil
        timer = Task {
            do { try await sleepUntil(deadline) } catch { return }
            self.timerFired(generation: generation)
        }
    }

    private func timerFired(generation: Int) {
        guard generation == self.generation, round == nil else { return }
        timer = nil
        timerDeadline = nil
        // A request answered over this path since the last round, while all was well: it counts
        // as that round, and the next one is due an interval after it.
        if let evidence = lastEvidence(), let last = lastRoundEnded, evidence > last, verdict.level == .full,
            !hysteresis.values.contains(where: \.isDoubtingFull)
        {
            lastRoundEnded = evidence
            arm(schedule.evidenceOfFull(at: evidence))
            return
        }
        startRound()
    }
}

/// What makes two paths the same network for the hysteresis: the preferred interface and the
/// gateways. Another Wi-Fi, a VPN coming up or a new router starts from `unknown`.
struct NetworkIdentity: Hashable {
    var interface: String?
    var gateways: [IPAddress]

    init(_ path: NetworkPath) {
        interface = path.primaryInterface?.name
        gateways = path.gateways
    }
}

extension NetworkPath {
    func supports(_ family: IPAddress.Family) -> Bool {
        family == .ipv4 ? supportsIPv4 : supportsIPv6
    }
}
