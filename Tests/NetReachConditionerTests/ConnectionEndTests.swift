import Testing

@testable import NetReachConditioner

/// When a direction's end (a FIN, a close, a data limit) is passed on: a table, as the decision is
/// a pure function of the direction's state.
@Suite("ConditionedConnection: a side's end follows its last byte")
struct ConnectionEndTests {
    typealias End = ConditionedConnection.SourceEnd

    struct Row: Sendable, CustomTestStringConvertible {
        var isEmpty = true
        var carriesNothing = false
        var limitReached = false
        var sourceEnd: End?
        var passedEnd: End?
        var expected: ConditionedConnection.EndAction
        var testDescription: String

        init(
            _ description: String, isEmpty: Bool = true, carriesNothing: Bool = false, limitReached: Bool = false,
            sourceEnd: End? = nil, passedEnd: End? = nil, _ expected: ConditionedConnection.EndAction
        ) {
            testDescription = description
            self.isEmpty = isEmpty
            self.carriesNothing = carriesNothing
            self.limitReached = limitReached
            self.sourceEnd = sourceEnd
            self.passedEnd = passedEnd
            self.expected = expected
        }
    }

    static let rows: [Row] = [
        Row("an open source passes nothing", .none),
        Row("a FIN with every byte delivered is passed on as a FIN", sourceEnd: .finished, .finish),
        Row("a FIN never overtakes bytes still queued", isEmpty: false, sourceEnd: .finished, .none),
        Row("a FIN is passed once", sourceEnd: .finished, passedEnd: .finished, .none),
        Row("a dead link carries no FIN", carriesNothing: true, sourceEnd: .finished, .none),
        Row("a source gone closes the destination", sourceEnd: .gone, .close),
        Row("a source gone after its FIN was passed closes it too", sourceEnd: .gone, passedEnd: .finished, .close),
        Row("a source gone waits for its bytes", isEmpty: false, sourceEnd: .gone, .none),
        Row("a data limit closes both once its bytes are delivered", limitReached: true, .closeBoth),
        Row("a data limit waits for its bytes", isEmpty: false, limitReached: true, .none),
        Row("a data limit closes once", limitReached: true, passedEnd: .gone, .none),
    ]

    @Test("The end passed on", arguments: rows)
    func endAction(_ row: Row) {
        #expect(
            ConditionedConnection.endAction(
                isEmpty: row.isEmpty, carriesNothing: row.carriesNothing, limitReached: row.limitReached,
                sourceEnd: row.sourceEnd, passedEnd: row.passedEnd) == row.expected)
    }
}
