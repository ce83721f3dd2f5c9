// swift-tools-version:5.4
// libFuzzer targets for NetReach's parsers: a separate package, so the main `swift build` never builds
// them. Docs/Fuzzing.md says what each covers; scripts/fuzz.sh builds and runs them:
//
//   swift build -c debug -Xswiftc -sanitize=fuzzer,address -Xswiftc -parse-as-library -Xswiftc -enable-testing
//
// Tools version 5.4 on purpose: from 5.5 on, SwiftPM links every executable with its own `main`
// renamed for testing (`--defsym main=<Target>_main`), which a `-parse-as-library` target does not
// have; libFuzzer's runtime supplies `main` here (as in swift-protobuf's FuzzTesting package).
// `-enable-testing`: the parsers are internal, reached with `@testable import`.
import PackageDescription

let package = Package(
    name: "NetReachFuzz",
    dependencies: [
        // `name:` keeps `package: "NetReach"` valid whatever the checkout's directory is called.
        .package(name: "NetReach", path: ".."),
        // The version NetReach resolves; the Retry-After target reads the header through HTTPFields.
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
    ],
    targets: [
        // What every target shares: a failed property aborts, which libFuzzer reports as a crash.
        .target(name: "FuzzSupport"),
        // strptime(3), which Glibc's module leaves out: FuzzRetryAfter compares HTTP-dates with glibc's reading.
        .target(name: "CFuzzSupport"),
        .executableTarget(
            name: "FuzzRtnetlink",
            dependencies: ["FuzzSupport", .product(name: "NetReach", package: "NetReach")]
        ),
        .executableTarget(
            name: "FuzzResolvConf",
            dependencies: ["FuzzSupport", .product(name: "NetReach", package: "NetReach")]
        ),
        .executableTarget(
            name: "FuzzRetryAfter",
            dependencies: [
                "FuzzSupport", "CFuzzSupport", .product(name: "NetReachHTTP", package: "NetReach"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ]
        ),
        .executableTarget(
            name: "FuzzURLBuilding",
            dependencies: [
                "FuzzSupport", .product(name: "NetReachHTTP", package: "NetReach"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ]
        ),
    ]
)
