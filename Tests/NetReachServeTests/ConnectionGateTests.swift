import NIOCore
import NetReachServe
import Testing

/// The connection cap's and the timeouts' rules, apart from sockets: who is closed to admit whom,
/// and until when a connection may stay as it is.
@Suite("ConnectionTable and ConnectionTimeline")
struct ConnectionGateTests {
    @Test func aFullTableAdmitsInPlaceOfTheConnectionIdleLongest() {
        var table = ConnectionTable<String>(capacity: 3)
        var ids: [UInt64] = []
        for name in ["a", "b", "c"] {
            guard case .admitted(let id, nil) = table.admit(name) else {
                Issue.record("\(name) not admitted")
                return
            }
            ids.append(id)
        }
        // a is in a request, then b; c became idle first of the idle ones... a, once done, last.
        table.setIdle(ids[0], false)
        table.setIdle(ids[1], false)
        table.setIdle(ids[0], true)
        guard case .admitted(_, let evicted) = table.admit("d") else {
            Issue.record("d refused")
            return
        }
        #expect(evicted == "c")
        guard case .admitted(_, let next) = table.admit("e") else {
            Issue.record("e refused")
            return
        }
        #expect(next == "a")
        #expect(table.count == 3)
    }

    @Test func aTableOfBusyConnectionsRefusesUntilOneLeaves() {
        var table = ConnectionTable<Int>(capacity: 2)
        var ids: [UInt64] = []
        for value in [1, 2] {
            guard case .admitted(let id, nil) = table.admit(value) else {
                Issue.record("not admitted")
                return
            }
            table.setIdle(id, false)
            ids.append(id)
        }
        guard case .refused = table.admit(3) else {
            Issue.record("admitted beyond the cap")
            return
        }
        table.remove(ids[0])
        guard case .admitted(_, nil) = table.admit(3) else {
            Issue.record("not admitted after a leave")
            return
        }
        // Removing one already evicted or gone changes nothing.
        table.remove(ids[0])
        #expect(table.count == 2)
    }

    @Test func theDefaultCapLeavesRoomForTheRestOfTheProcess() {
        #expect(ConnectionGate.defaultCapacity(fileLimit: 1_048_576) == 1_000)
        #expect(ConnectionGate.defaultCapacity(fileLimit: 1_024) == 896)
        #expect(ConnectionGate.defaultCapacity(fileLimit: 100) == 16)
        #expect(ConnectionGate.defaultCapacity(fileLimit: nil) == 1_000)
    }

    @Test func idleUntilTheFirstByteThenTheHeaderDeadlineHoldsHoweverSlowTheRest() {
        let start = NIODeadline.uptimeNanoseconds(1_000_000_000)
        var timeline = ConnectionTimeline(idleTimeout: .seconds(75), headerTimeout: .seconds(10), now: start)
        #expect(timeline.deadline == start + .seconds(75))
        timeline.bytesArrived(now: start + .seconds(5))
        #expect(timeline.deadline == start + .seconds(15))
        // More bytes, one at a time: the deadline stays at 10 s after the first.
        timeline.bytesArrived(now: start + .seconds(9))
        #expect(timeline.deadline == start + .seconds(15))
        timeline.requestBegan()
        #expect(timeline.deadline == nil)
        #expect(!timeline.isIdle)
        timeline.responseBegan(eventStream: false)
        timeline.responseEnded(now: start + .seconds(20))
        #expect(timeline.isIdle)
        #expect(timeline.deadline == start + .seconds(95))
    }

    @Test func onlyAnEventStreamClosesWhenTheClientClosesItsSide() {
        var timeline = ConnectionTimeline(idleTimeout: .seconds(75), headerTimeout: .seconds(10), now: .now())
        timeline.requestBegan()
        timeline.responseBegan(eventStream: false)
        #expect(!timeline.closesOnInputClosed)
        timeline.responseEnded(now: .now())
        timeline.requestBegan()
        timeline.responseBegan(eventStream: true)
        #expect(timeline.closesOnInputClosed)
        #expect(timeline.deadline == nil)
        timeline.responseEnded(now: .now())
        #expect(!timeline.closesOnInputClosed)
        // An answer to a request that never parsed (400) ends no request.
        timeline.responseEnded(now: .now())
        #expect(timeline.requestsUnderWay == 0)
    }
}
