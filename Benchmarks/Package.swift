// swift-tools-version: 6.1
// Benchmarks for NetReach: a separate package, so the main `swift build` never builds them.
//
//   swift build -c release --product DetectionLatency   # latency / storm / CPU / idle harness (root)
//   ./run-latency.sh                                     # the same, with namespace clean-up
//   swift package benchmark                              # ordo-one/benchmark suites (no root)
import PackageDescription

let package = Package(
    name: "NetReachBenchmarks",
    dependencies: [
        // `name:` keeps `package: "NetReach"` valid whatever the checkout's directory is called.
        .package(name: "NetReach", path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        // Raw rtnetlink plumbing for the harness: the change issuer and the floor reader, in C so the
        // floor is as thin as a reader can be.
        .target(name: "CNetReachBench"),
        .executableTarget(
            name: "DetectionLatency",
            dependencies: [
                "CNetReachBench",
                .product(name: "NetReach", package: "NetReach"),
            ]
        ),
        .executableTarget(
            name: "EvaluatorThroughput",
            dependencies: [
                .product(name: "NetReach", package: "NetReach"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/EvaluatorThroughput",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
