import Foundation
import NetReach
import Testing

@testable import NetReachConnectivity

@Suite("A probe round with a quorum")
struct ProbeRoundTests {
    static func result(_ verdict: ProbeVerdict) -> ProbeResult {
        ProbeResult(
            probe: ConnectivityProbe(URL(string: "http://probe.test/")!), family: .ipv4, latency: .milliseconds(3),
            verdict: verdict)
    }
    static let pass = result(.passed)
    static let fail = result(.failed("connection refused"))
    static let portal = result(.portal(loginURL: URL(string: "http://login.test/"), evidence: "HTTP 302 redirect"))
    static let intercepted = result(.intercepted("certificate not trusted"))

    @Test func fullNeedsTheQuorum() {
        #expect(ProbeRound.level(of: [Self.pass, Self.pass, Self.fail], quorum: 2) == .full)
        #expect(ProbeRound.level(of: [Self.pass, Self.fail, Self.fail], quorum: 2) == .limited)
        #expect(ProbeRound.level(of: [Self.pass], quorum: 1) == .full)
    }

    @Test func aPortalAnswerOutranksSilence() {
        #expect(
            ProbeRound.level(of: [Self.fail, Self.portal], quorum: 1)
                == .portal(loginURL: URL(string: "http://login.test/")))
        #expect(ProbeRound.level(of: [Self.fail, Self.intercepted], quorum: 1) == .portal(loginURL: nil))
        // The login URL comes from whichever probe gave one.
        #expect(
            ProbeRound.level(of: [Self.intercepted, Self.portal], quorum: 2)
                == .portal(loginURL: URL(string: "http://login.test/")))
    }

    @Test func latenciesReadInMilliseconds() {
        #expect(Duration.milliseconds(1_500).milliseconds == 1_500)
        #expect(Duration.microseconds(4_236).milliseconds == 4.236)
        var slow = Self.pass
        slow.latency = .milliseconds(1_250)
        #expect(slow.description.contains("in 1250 ms"), "\(slow)")
    }

    @Test func noAnswerIsLimited() {
        #expect(ProbeRound.level(of: [Self.fail, Self.fail], quorum: 1) == .limited)
        #expect(ProbeRound.level(of: [], quorum: 1) == .limited)
    }
}

@Suite("Hysteresis: one failed probe never flips full")
struct ConnectivityHysteresisTests {
    @Test func leavingFullTakesTwoFailedRoundsAndTheDwell() {
        var h = ConnectivityHysteresis(failedRoundsToLeaveFull: 2, dwell: .seconds(10))
        #expect(h.round(.full, at: .seconds(0)) == .full)
        #expect(h.round(.limited, at: .seconds(1)) == .full) // one failed round: doubt only
        #expect(h.isDoubtingFull)
        #expect(h.round(.limited, at: .seconds(3)) == .full) // two, but within the dwell
        #expect(h.round(.limited, at: .seconds(11)) == .limited) // two or more, and 10 s since the first
        #expect(!h.isDoubtingFull)
    }

    @Test func onePassingRoundReturnsToFullAndForgetsTheDoubt() {
        var h = ConnectivityHysteresis(failedRoundsToLeaveFull: 2, dwell: .zero)
        _ = h.round(.full, at: .seconds(0))
        #expect(h.round(.limited, at: .seconds(1)) == .full)
        #expect(h.round(.full, at: .seconds(2)) == .full) // the doubt is gone …
        #expect(h.round(.limited, at: .seconds(3)) == .full) // … so this is a first failure again
        #expect(h.round(.portal(loginURL: nil), at: .seconds(4)) == .portal(loginURL: nil))
        #expect(h.round(.full, at: .seconds(5)) == .full) // back in one round
    }

    @Test func aFirstVerdictAndChangesBelowFullTakeOneRound() {
        var h = ConnectivityHysteresis()
        #expect(h.level == .unknown)
        #expect(h.round(.portal(loginURL: nil), at: .seconds(0)) == .portal(loginURL: nil))
        #expect(h.round(.limited, at: .seconds(1)) == .limited)
        #expect(h.round(.full, at: .seconds(2)) == .full)
    }

    @Test func pathFactsCountAtOnce() {
        var h = ConnectivityHysteresis()
        _ = h.round(.full, at: .seconds(0))
        #expect(h.path(.none) == .none)
        #expect(h.path(.local) == .local)
        #expect(h.path(.unknown) == .unknown)
        #expect(h.round(.limited, at: .seconds(1)) == .limited)
    }
}

@Suite("When to probe")
struct ProbeScheduleTests {
    @Test func backOffDoublesFromOneSecondToTheInterval() {
        var s = ProbeSchedule(interval: .seconds(10), initialBackOff: .seconds(1))
        var now = s.pathChanged(at: .seconds(100))
        #expect(now == .seconds(100))
        var waits: [Duration] = []
        for _ in 0..<6 {
            let next = s.roundEnded(showing: .limited, doubting: false, at: now)!
            waits.append(next - now)
            now = next
        }
        #expect(waits == [.seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(10), .seconds(10)])
        // A path change starts again from one second.
        now = s.pathChanged(at: now)
        #expect(s.roundEnded(showing: .portal(loginURL: nil), doubting: false, at: now)! - now == .seconds(1))
    }

    @Test func noTrafficWhileFullUnlessAnIntervalIsAsked() {
        var quiet = ProbeSchedule()
        #expect(quiet.roundEnded(showing: .full, doubting: false, at: .seconds(5)) == nil)
        #expect(quiet.evidenceOfFull(at: .seconds(6)) == nil)
        var periodic = ProbeSchedule(interval: .seconds(60), periodicWhileFull: true)
        #expect(periodic.roundEnded(showing: .full, doubting: false, at: .seconds(5)) == .seconds(65))
        // A successful request postpones the next round.
        #expect(periodic.evidenceOfFull(at: .seconds(30)) == .seconds(90))
    }

    @Test func theBackOffStopsGrowingAtItsCapWellBelowTheInterval() {
        // watch and serve: 30 s at most while not full, whatever the 5-minute interval.
        var s = ProbeSchedule(interval: .seconds(300), initialBackOff: .seconds(1), maximumBackOff: .seconds(30))
        var now = s.pathChanged(at: .zero)
        var waits: [Duration] = []
        for _ in 0..<8 {
            let next = s.roundEnded(showing: .limited, doubting: false, at: now)!
            waits.append(next - now)
            now = next
        }
        #expect(waits == [1, 2, 4, 8, 16, 30, 30, 30].map { Duration.seconds($0) })
        // wait --internet: every second, however long the outage.
        var eachSecond = ProbeSchedule(
            interval: .seconds(300), initialBackOff: .seconds(1), maximumBackOff: .seconds(1))
        now = eachSecond.pathChanged(at: .zero)
        for _ in 0..<400 {
            let next = eachSecond.roundEnded(showing: .limited, doubting: false, at: now)!
            #expect(next - now == .seconds(1))
            now = next
        }
        // A cap above the interval is the interval.
        var above = ProbeSchedule(interval: .seconds(10), maximumBackOff: .seconds(60))
        #expect(above.maximumBackOff == .seconds(10))
        _ = above.pathChanged(at: .zero)
    }

    @Test func aDoubtedFullIsCheckedSoon() {
        var s = ProbeSchedule()
        #expect(s.roundEnded(showing: .full, doubting: true, at: .seconds(5)) == .seconds(6))
    }
}
