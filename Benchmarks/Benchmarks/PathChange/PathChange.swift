// What one kernel change costs NetReach's own code, the way a change goes in a live monitor: the
// kernel's datagrams parsed (RtnetlinkParser), absorbed into the snapshot (SnapshotStore), the
// snapshot evaluated by a PathMonitor and handed to its observer as a PathUpdate, as `watch` gets
// it. The bytes are real (Tests/NetReachTests/Linux/Fixtures/path-changes.hex, recorded from the
// kernel by record_path_changes.sh there) and replayed by NetReachTesting's RecordedNetwork: no
// socket, no root, the same work on every run.
//
// Not in it: the questions a live engine then asks the kernel (its route choice per family: system
// calls, DetectionLatency and watch-stages.py measure them against the kernel), and sysfs.
//
// One benchmark per kind of change; an iteration is that change alone (measured), then the rest
// of the recording (not measured), which brings the state back to where the change applies.
import Benchmark
import Dispatch
import NetReach
import NetReachTesting

/// The changes measured, by their place in the recording (the others only bring the state back).
/// Names without spaces: package-benchmark 1.38.1 writes a threshold file's name with `_` for each
/// space but looks for it with the space, so such a benchmark would never be checked.
private let measured: [(name: String, index: Int)] = [
    ("RouteDelete", 0), ("RouteAdd", 1), ("LinkDown", 2), ("LinkUp", 3), ("AddressDelete", 7),
    ("AddressAdd", 8), ("RuleAdd", 10),
]

/// What is measured per change, and how far a run may be from Thresholds/ before the check fails
/// (Benchmarks/README.md says which metrics are checked, and why these tolerances).
private func suiteConfiguration() -> Benchmark.Configuration {
    .init(
        metrics: [.mallocCountTotal, .wallClock],
        maxDuration: .seconds(2), maxIterations: 5_000,
        thresholds: [.mallocCountTotal: .init(absolute: [.p90: 0])])
}

let benchmarks: @Sendable () -> Void = {
    let fixture: PathChangeFixture
    switch PathChangeFixture.load() {
    case .success(let loaded): fixture = loaded
    case .failure(let error): fatalError("PathChange: \(error)")
    }
    for (name, index) in measured {
        precondition(
            fixture.changes[index].name.split(separator: "-").map(\.capitalized).joined() == name,
            "path-changes.hex changed: change \(index) is \(fixture.changes[index].name), not \(name)")
        let network = RecordedNetwork(dump: fixture.dump)
        let monitor = PathMonitor(source: network)
        monitor.updateObserver = { blackHole($0) }
        // The rest of the recording, after the measured change and round to it.
        let rest = Array(fixture.changes[(index + 1)...] + fixture.changes[..<index])
        Benchmark(
            name,
            configuration: suiteConfiguration(),
            closure: { benchmark in
                benchmark.startMeasurement()
                network.receive(fixture.changes[index].datagrams)
                benchmark.stopMeasurement()
                for change in rest { network.receive(change.datagrams) }
            },
            setup: {
                monitor.start(queue: DispatchQueue(label: "PathChange"))
                for change in fixture.changes[..<index] { network.receive(change.datagrams) }
            },
            teardown: { monitor.cancel() }
        )
    }

    // The reference in the same run: a wake-up that reads nothing, through the same calls and the
    // same measurement, so what each change adds to it is the change's own.
    let network = RecordedNetwork(dump: fixture.dump)
    let monitor = PathMonitor(source: network)
    monitor.updateObserver = { blackHole($0) }
    Benchmark(
        "BaselineEmptyWakeUp",
        configuration: suiteConfiguration(),
        closure: { benchmark in
            benchmark.startMeasurement()
            network.receive([])
            benchmark.stopMeasurement()
        },
        setup: { monitor.start(queue: DispatchQueue(label: "PathChange")) },
        teardown: { monitor.cancel() }
    )
}
