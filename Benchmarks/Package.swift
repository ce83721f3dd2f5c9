// swift-tools-version: 6.1
// Benchmarks for NetReach: a separate package, so the main `swift build` never builds them.
// README.md says what each part measures, against what, and how to run it; RESULTS.md has the
// current figures.
//
//   swift package benchmark                     # the suites: PathChange, ServiceRequest (no root)
//   swift package benchmark thresholds check --path "$PWD/Thresholds/6.3"   # what CI checks
//   sudo ./run-latency.sh                       # DetectionLatency: watch --json against ip -o monitor
//   ./run-http.sh                               # HTTPOverhead: NetworkService against bare transports
import PackageDescription

let package = Package(
    name: "NetReachBenchmarks",
    dependencies: [
        // `name:` keeps `package: "NetReach"` valid whatever the checkout's directory is called.
        // NETREACH_PACKAGE_PATH (set by run-latency.sh): a `git archive` of one commit, so edits in
        // progress in the working tree never reach a measured binary.
        .package(name: "NetReach", path: Context.environment["NETREACH_PACKAGE_PATH"] ?? ".."),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
        // The versions NetReach itself resolves; HTTPOverhead's server and options need them directly.
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-openapi-runtime", from: "1.13.4"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
    ],
    targets: [
        // Raw rtnetlink plumbing for the harness: the change issuer and the floor reader, in C so the
        // floor is as thin as a reader can be.
        .target(name: "CNetReachBench"),
        // The C lower bound of `netreach watch`: reads, asks the kernel NetReach's questions, prints
        // (DetectionLatency --cli-asking).
        .executableTarget(name: "AskingMonitor", dependencies: ["CNetReachBench"]),
        // Percentiles and medians, the same for every harness.
        .target(name: "BenchStatistics"),
        .executableTarget(
            name: "DetectionLatency",
            dependencies: [
                "BenchStatistics",
                "CNetReachBench",
                .product(name: "NetReach", package: "NetReach"),
            ]
        ),
        // The suites CI checks against Thresholds/ (package-benchmark): a change from the kernel's
        // bytes to its PathUpdate, on a recorded fixture; one request through NetworkService. Each
        // depends on what it measures and nothing more, so CI's release build of them stays small.
        .executableTarget(
            name: "PathChange",
            dependencies: [
                .product(name: "NetReach", package: "NetReach"),
                .product(name: "NetReachTesting", package: "NetReach"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/PathChange",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        .executableTarget(
            name: "ServiceRequest",
            dependencies: [
                .product(name: "NetReach", package: "NetReach"),
                .product(name: "NetReachHTTP", package: "NetReach"),
                .product(name: "NetReachTesting", package: "NetReach"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/ServiceRequest",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // NetworkService over each transport against the bare transport, on loopback; the server is
        // this same executable re-launched with `--serve`, so its work is not in the client's process.
        .executableTarget(
            name: "HTTPOverhead",
            dependencies: [
                "BenchStatistics",
                .product(name: "NetReach", package: "NetReach"),
                .product(name: "NetReachHTTP", package: "NetReach"),
                .product(name: "NetReachURLSession", package: "NetReach"),
                .product(name: "NetReachAsyncHTTPClient", package: "NetReach"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        // One GET with AsyncHTTPClient alone, nothing else linked: the HTTP stack's own cost from a
        // fresh process, the reference `netreach get`'s start-up is read against (run-transfer.sh
        // small).
        .executableTarget(
            name: "BareGet",
            dependencies: [.product(name: "AsyncHTTPClient", package: "async-http-client")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
