import Foundation
import Testing

@testable import NetReachConditioner

@Suite("Link profiles and the JSON of conditions and faults")
struct LinkProfileTests {
    @Test("Apple's figures: bandwidth in bytes/s from kbit/Mbit, delay per direction")
    func figures() {
        #expect(
            LinkProfile.threeG.conditions.downstream
                == DirectionConditions(bandwidth: 97_500, delay: .milliseconds(100)))
        #expect(
            LinkProfile.threeG.conditions.upstream == DirectionConditions(bandwidth: 41_250, delay: .milliseconds(100)))
        #expect(LinkProfile.edge.conditions.upstream.delay == .milliseconds(440))
        #expect(LinkProfile.dsl.conditions.upstream.bandwidth == 32_000)
        #expect(LinkProfile.lte.conditions.downstream.bandwidth == 6_250_000)
        #expect(
            LinkProfile.veryBad.conditions.downstream.loss == 0.1 && LinkProfile.veryBad.conditions.upstream.loss == 0.1
        )
        #expect(
            LinkProfile.loss100.conditions.upstream.loss == 1 && LinkProfile.loss100.conditions.downstream.loss == 1)
        #expect(LinkProfile.highLatencyDNS.conditions.connectDelay == .seconds(3))
        #expect(LinkProfile.highLatencyDNS.conditions.upstream.isNone)
        for profile in LinkProfile.allCases {
            #expect(LinkProfile(name: profile.name) == profile)
            #expect(throws: Never.self) { try profile.conditions.validate() }
        }
        #expect(LinkProfile(name: "3G") == .threeG)
        #expect(LinkProfile(name: "gprs") == nil)
    }

    @Test("The table lists every profile with its figures")
    func table() {
        let lines = LinkProfile.table.split(separator: "\n")
        #expect(lines.count == LinkProfile.allCases.count + 2)
        #expect(lines.contains { $0 == "| `3g` | 3G | 780 kbit/s | 100 ms | 330 kbit/s | 100 ms | 0 |  |" })
        #expect(
            lines.contains {
                $0.hasPrefix("| `high-latency-dns` |") && $0.hasSuffix("| 3000 ms before each connection |")
            })
        #expect(
            lines.contains {
                $0 == "| `very-bad` | Very Bad Network | 1 Mbit/s | 500 ms | 1 Mbit/s | 500 ms | 10% |  |"
            })
    }

    @Test("The documentation's table is the one the code makes")
    func documentedTable() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        for document in ["README.md", "Sources/NetReachConditioner/NetReachConditioner.docc/LinkConditioner.md"] {
            let text = try String(contentsOf: root.appendingPathComponent(document), encoding: .utf8)
            #expect(text.contains(LinkProfile.table), "\(document) has the table of LinkProfile.table")
        }
    }

    @Test("Conditions and faults go to JSON and back; absent keys are zero")
    func json() throws {
        let conditions = LinkConditions(
            upstream: .init(bandwidth: 1000, delay: .milliseconds(12.5), jitter: .milliseconds(2), loss: 0.25),
            downstream: .init(delay: .seconds(1)), connectDelay: .milliseconds(300), seed: 9)
        let data = try JSONEncoder().encode(conditions)
        #expect(try JSONDecoder().decode(LinkConditions.self, from: data) == conditions)
        let sparse = try JSONDecoder().decode(
            LinkConditions.self, from: Data(#"{"downstream":{"delayMilliseconds":5}}"#.utf8))
        #expect(sparse == LinkConditions(downstream: .init(delay: .milliseconds(5))))

        let faults: [NamedFault] = [
            NamedFault(name: "a", fault: .resetPeer(after: .milliseconds(500))),
            NamedFault(name: "b", fault: .timeout(after: nil), directions: [.upstream]),
            NamedFault(name: "c", fault: .timeout(after: .seconds(2)), directions: [.downstream]),
            NamedFault(name: "d", fault: .slowClose(delay: .seconds(1))),
            NamedFault(name: "e", fault: .limitData(bytes: 1000)),
            NamedFault(name: "f", fault: .slicer(averageSize: 64, sizeVariation: 16, delay: .milliseconds(10))),
        ]
        #expect(try JSONDecoder().decode([NamedFault].self, from: JSONEncoder().encode(faults)) == faults)
        let decoded = try JSONDecoder().decode(
            NamedFault.self, from: Data(#"{"name":"cut","type":"limit_data","bytes":7}"#.utf8))
        #expect(decoded == NamedFault(name: "cut", fault: .limitData(bytes: 7)))
    }

    @Test(
        "Values out of range are refused with the reason",
        arguments: [
            (LinkConditions(upstream: .init(bandwidth: 0)), "upstream bandwidth must be at least 1 byte/s"),
            (LinkConditions(downstream: .init(delay: .milliseconds(-1))), "downstream delay must not be negative"),
            (LinkConditions(downstream: .init(jitter: .milliseconds(-1))), "downstream jitter must not be negative"),
            (LinkConditions(upstream: .init(loss: 1.5)), "upstream loss must be between 0 and 1"),
            (LinkConditions(connectDelay: .seconds(-1)), "connect delay must not be negative"),
        ])
    func invalidConditions(conditions: LinkConditions, reason: String) {
        #expect { try conditions.validate() } throws: { error in
            guard case .invalidConditions(let why) = error as? ConditionerError else { return false }
            return why.hasPrefix(reason)
        }
    }

    @Test(
        "Faults out of range are refused",
        arguments: [
            LinkFault.slicer(averageSize: 0, sizeVariation: 0, delay: .zero),
            .slicer(averageSize: 10, sizeVariation: 10, delay: .zero),
            .slicer(averageSize: 10, sizeVariation: -1, delay: .zero),
            .limitData(bytes: -1),
            .timeout(after: .milliseconds(-5)),
            .resetPeer(after: .milliseconds(-5)),
            .slowClose(delay: .milliseconds(-5)),
        ])
    func invalidFaults(fault: LinkFault) {
        #expect(throws: ConditionerError.self) { try fault.validate() }
    }

    @Test("A fault needs a name and a direction")
    func namedFaults() {
        #expect(throws: ConditionerError.invalidFault("a fault needs a name")) {
            try NamedFault(name: "", fault: .limitData(bytes: 1)).validate()
        }
        #expect(throws: ConditionerError.self) {
            try NamedFault(name: "x", fault: .limitData(bytes: 1), directions: []).validate()
        }
    }
}
