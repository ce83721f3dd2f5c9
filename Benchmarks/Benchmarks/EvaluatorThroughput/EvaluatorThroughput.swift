// PathEvaluator throughput (no root, no kernel): run with `swift package benchmark` in Benchmarks/.
//
// What NetReach does per change once the store is updated is one PathEvaluator.evaluate per
// monitor; these suites put that cost next to a baseline that touches the same data (copying the
// snapshot and changing one link, which forces the links dictionary to be copied), so the ratio
// says how much evaluation costs beyond merely handling a snapshot of that size.
import Benchmark
import NetReach

/// A snapshot shaped like a busy host: `count` Ethernet-like links (plus lo), each up with an IPv4
/// and a global IPv6 address, one IPv4 default route per link with growing metrics, two nameservers.
func makeSnapshot(interfaces count: Int) -> SystemSnapshot {
    var links = [SystemSnapshot.Link(index: 1, name: "lo", isLoopback: true, hardwareType: SystemSnapshot.Link.loopbackHardwareType)]
    var addresses = [SystemSnapshot.Address(interfaceIndex: 1, address: IPAddress("127.0.0.1")!, prefixLength: 8, scope: 254)]
    var routes: [SystemSnapshot.DefaultRoute] = []
    for i in 0..<count {
        let index = i + 2
        links.append(.init(index: index, name: "eth\(i)", kind: i % 3 == 0 ? "veth" : nil))
        addresses.append(.init(interfaceIndex: index, address: IPAddress("10.\(i / 200).\(i % 200).2")!, prefixLength: 24))
        addresses.append(.init(interfaceIndex: index, address: IPAddress("2001:db8:\(i)::2")!, prefixLength: 64))
        routes.append(.init(interfaceIndex: index, gateway: IPAddress("10.\(i / 200).\(i % 200).1")!, metric: UInt32(100 + i)))
    }
    return SystemSnapshot(links: links, addresses: addresses, defaultRoutes: routes,
                          nameservers: [IPAddress("192.0.2.53")!, IPAddress("2001:db8::53")!])
}

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .cpuTotal, .mallocCountTotal, .throughput],
        scalingFactor: .kilo,
        maxDuration: .seconds(3),
        maxIterations: 1_000
    )

    for count in [2, 50] {
        let snapshot = makeSnapshot(interfaces: count)
        let spare = snapshot.links[2]!

        Benchmark("evaluate, \(count) interfaces") { benchmark in
            for _ in benchmark.scaledIterations {
                blackHole(PathEvaluator.evaluate(snapshot))
            }
        }

        Benchmark("baseline: copy snapshot + change one link, \(count) interfaces") { benchmark in
            for i in benchmark.scaledIterations {
                var copy = snapshot
                var link = spare
                link.isUp = i & 1 == 0
                copy.links[link.index] = link
                blackHole(copy)
            }
        }

        Benchmark("classify every link (InterfaceClassification.automatic), \(count) interfaces") { benchmark in
            // Part of evaluate: one type(of:) per link.
            let links = Array(snapshot.links.values)
            for _ in benchmark.scaledIterations {
                for link in links { blackHole(InterfaceClassification.automatic.type(of: link)) }
            }
        }

        Benchmark("evaluate + compare with previous path, \(count) interfaces") { benchmark in
            // What a monitor does per snapshot: evaluate, then emit only if the path differs.
            let previous = PathEvaluator.evaluate(snapshot)
            for _ in benchmark.scaledIterations {
                blackHole(PathEvaluator.evaluate(snapshot) != previous)
            }
        }
    }
}
