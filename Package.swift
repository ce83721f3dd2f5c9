// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "NetReach",
    products: [
        .library(name: "NetReach", targets: ["NetReach"]),
        .library(name: "NetReachTesting", targets: ["NetReachTesting"]),
        .library(name: "NetReachHTTP", targets: ["NetReachHTTP"]),
        // Separate product: FoundationNetworking brings libcurl and some thirty libraries with it,
        // which code on AsyncHTTPClient need not load.
        .library(name: "NetReachURLSession", targets: ["NetReachURLSession"]),
        // Separate product: AsyncHTTPClient brings SwiftNIO, which URLSession users need not build.
        .library(name: "NetReachAsyncHTTPClient", targets: ["NetReachAsyncHTTPClient"]),
        // Is the internet really there: connectivity levels, and the offline indicator.
        .library(name: "NetReachConnectivity", targets: ["NetReachConnectivity"]),
        // Network.framework's path API (NWPathMonitor, NWPath, ...) on Linux, backed by NetReach:
        // Apple-platform code ports by changing its import.
        .library(name: "NetReachNetwork", targets: ["NetReachNetwork"]),
        // PathMonitor's changes as NotificationCenter notifications: full Foundation's, which the
        // core does not link (Docs/DesignNotes.md, "No full Foundation in the core").
        .library(name: "NetReachNotifications", targets: ["NetReachNotifications"]),
        // A userspace link conditioner: a SwiftNIO TCP proxy with Apple's profiles and toxiproxy's faults.
        .library(name: "NetReachConditioner", targets: ["NetReachConditioner"]),
        // Every command in one executable (Docs/DesignNotes.md, "One executable").
        .executable(name: "netreach", targets: ["netreach"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        // Already in the graph through async-http-client; named for NIOSSL (TLS settings) and
        // NIOHTTPCompression (its decompression limit error).
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        // Already resolved through swift-nio-extras; pure Swift. Named for DER: the key sizes and
        // signature digests of a server's certificates (CertificateStrength), which NIOSSL hides.
        .package(url: "https://github.com/apple/swift-asn1", from: "1.7.4"),
        // Already in the graph through async-http-client; named for its HTTP/2 stream codec.
        .package(url: "https://github.com/apple/swift-nio-http2", from: "1.46.0"),
        // No FullFoundation trait: HTTPBody needs only FoundationEssentials, and full Foundation
        // would bring ICU into every executable that sends a request.
        .package(url: "https://github.com/apple/swift-openapi-runtime", from: "1.13.4", traits: []),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        // `serve`: the HTTP server (no configuration or full-Foundation traits: neither is used),
        // its lifecycle (SIGTERM drains), and metrics in Prometheus's text format.
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1", traits: []),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        // HummingbirdBcrypt alone (OpenBSD's bcrypt in C): serve's basic_auth_users.
        .package(url: "https://github.com/hummingbird-project/hummingbird-auth", from: "2.5.0"),
        // Tests only: a clock the tests move by hand (OfflineIndicator's grace periods).
        .package(url: "https://github.com/pointfreeco/swift-clocks", from: "1.1.1"),
    ],
    targets: [
        // Kernel headers and macro shims Glibc does not import (NETLINK_ROUTE, RTM_*, IFLA_*, setns).
        .target(name: "CNetReachLinux"),
        // zlib, to decode gzip and deflate bodies in bounded pieces (NetReachAsyncHTTPClient).
        .systemLibrary(name: "CNetReachZlib"),
        // `--namespace` of the commands that probe: `netreach` enters it before the Swift runtime starts.
        .target(
            name: "CNetReachNamespaceEntry",
            dependencies: [.target(name: "CNetReachLinux", condition: .when(platforms: [.linux]))]),
        // The one layer over system calls (EINTR and EAGAIN handled once), the one lock type and
        // the one executor for blocking work; every target above uses these. Also the text grammars
        // (durations, HOST:PORT) the command line and serve's --config file share. Not a product.
        .target(
            name: "NetReachSystem",
            dependencies: [.target(name: "CNetReachLinux", condition: .when(platforms: [.linux]))]
        ),
        .target(
            name: "NetReach",
            dependencies: [
                "NetReachSystem", .target(name: "CNetReachLinux", condition: .when(platforms: [.linux])),
                // The server ecosystem's logging and metrics APIs: no dependencies of their own, silent
                // and no-op until the program bootstraps a backend (Docs/DesignNotes.md, issue 23).
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ]
        ),
        .target(name: "NetReachTesting", dependencies: ["NetReach", "NetReachSystem"]),
        .target(
            name: "NetReachConnectivity",
            dependencies: [
                "NetReach", "NetReachSystem",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"), // Timer.record(duration:)
            ]
        ),
        .target(name: "NetReachNetwork", dependencies: ["NetReach", "NetReachSystem"]),
        .target(name: "NetReachNotifications", dependencies: ["NetReach"]),
        .target(
            name: "NetReachConditioner",
            dependencies: [
                "NetReachSystem",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"), // the control API
            ]
        ),
        .target(
            name: "NetReachHTTP",
            dependencies: [
                "NetReach", "NetReachSystem",
                // sync_file_range(2), which Glibc's module leaves out: OutputFile starts writeback early.
                .target(name: "CNetReachLinux", condition: .when(platforms: [.linux])),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                // HTTPBody: the streaming body type of swift-openapi's transports (depends on HTTPTypes only).
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                // The server ecosystem's logging API: attempts at debug, retries and waits at info.
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"), // Timer.record(duration:)
            ]
        ),
        .target(
            name: "NetReachURLSession",
            dependencies: [
                "NetReachHTTP", "NetReachSystem",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
            ]
        ),
        .target(
            name: "NetReachAsyncHTTPClient",
            dependencies: [
                "NetReachHTTP", "NetReachSystem", "CNetReachZlib",
                // AsyncHTTPClientProber: connectivity probes over one family, on this client.
                "NetReachConnectivity",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPCompression", package: "swift-nio-extras"),
                // HTTP2FramePayloadToHTTP1ClientCodec: where BodyCoalescer goes in an HTTP/2 stream.
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                // NIOConnectionError: what connecting to a host name fails with (lookup, every address).
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "SwiftASN1", package: "swift-asn1"), // CertificateStrength reads DER
            ]
        ),
        // `netreach serve`: the paths of chosen destinations and namespaces as Prometheus metrics,
        // Server-Sent Events, health endpoints and a status page, on Hummingbird.
        .target(
            name: "NetReachServe",
            dependencies: [
                "NetReach", "NetReachSystem", "NetReachConnectivity",
                // eventfd and statfs: following /run/netns (--all-namespaces).
                .target(name: "CNetReachLinux", condition: .when(platforms: [.linux])),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"), // HTTPParserError: oversized headers are 431
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"), // the parts after Hummingbird's codec
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"), // SIGHUP reloads
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Logging", package: "swift-log"),
                // --web.config.file: TLS (NIOSSL), basic_auth_users (bcrypt). Its YAML, and --config's,
                // are read by YAMLReader, our own: a YAML library brought full Foundation and ICU.
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "HummingbirdCore", package: "hummingbird"), // HTTP1Channel, under WebChannel
                .product(name: "HummingbirdBcrypt", package: "hummingbird-auth"),
            ]
        ),
        // Every command of `netreach` (status, watch, wait, get, check, condition), what they share
        // (output, signals, durations, the exit-status table), and the Capabilities `main` hands them.
        .target(
            name: "NetReachCommands",
            dependencies: [
                "NetReach", "NetReachSystem", "NetReachHTTP", "NetReachConnectivity", "NetReachConditioner",
                "NetReachServe",
                // `--namespace` of the commands that probe: entered before the Swift runtime starts.
                .target(name: "CNetReachNamespaceEntry", condition: .when(platforms: [.linux])),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"), // condition's event loop
            ]
        ),
        // `main` alone: decides the Capabilities (AsyncHTTPClient for HTTP and probes) and runs.
        .executableTarget(
            name: "netreach",
            dependencies: [
                "NetReachCommands", "NetReachHTTP", "NetReachAsyncHTTPClient",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOCore", package: "swift-nio"),
            ]
        ),
        // What the test targets share: running programs (ChildProcess), blocking work off the
        // concurrency pool (BlockingWorkExecutor, the .offPool trait) and the network-namespace lab
        // (NetnsLab, the .needsNamespaceRoot gate, a server inside a namespace, tun devices), and the servers
        // HTTP suites talk to (a fault-injecting one, nginx, tinyproxy, test certificates). Not a product.
        .target(name: "CNetReachTestSupport", path: "Tests/CNetReachTestSupport"),
        .target(
            name: "NetReachTestSupport",
            dependencies: [
                "CNetReachTestSupport", "NetReach", "NetReachSystem",
                .target(name: "CNetReachLinux", condition: .when(platforms: [.linux])),
                // FaultInjectingServer: an HTTP server that misbehaves on purpose, on SwiftNIO.
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Tests/NetReachTestSupport"
        ),
        // One test target per library target, named after it.
        .testTarget(
            name: "NetReachSystemTests",
            dependencies: [
                "NetReachSystem", "NetReachTestSupport",
                .target(name: "CNetReachLinux", condition: .when(platforms: [.linux])),
            ]
        ),
        // The path engine: pure evaluation, the netlink parser on captured and handmade bytes
        // (Linux/), and the monitor against the kernel in namespace labs (Integration/).
        .testTarget(
            name: "NetReachTests",
            dependencies: [
                "NetReach", "NetReachSystem", "NetReachTesting", "NetReachTestSupport", "NetReachNotifications",
                .target(name: "CNetReachLinux", condition: .when(platforms: [.linux])),
                // Library metrics through an injected TestMetrics factory, never the global system.
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "InMemoryLogging", package: "swift-log"),
            ],
            // Captured kernel dumps (hex) and the script that captured them; tests read them by path.
            exclude: ["Linux/Fixtures"]
        ),
        .testTarget(
            name: "NetReachConditionerTests",
            dependencies: ["NetReachConditioner", "NetReachSystem", "NetReachTestSupport"]),
        // PortedPatterns/ is compiled by both: here in the Swift 6 mode, and through a symbolic link
        // by the Swift 5 target below (ported code comes in both modes).
        .testTarget(
            name: "NetReachNetworkTests",
            dependencies: ["NetReachNetwork", "NetReach", "NetReachSystem", "NetReachTesting", "NetReachTestSupport"]
        ),
        .testTarget(
            name: "NetReachNetworkSwift5Tests",
            dependencies: ["NetReachNetwork", "NetReach", "NetReachTesting"],
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
        .testTarget(
            name: "NetReachConnectivityTests",
            dependencies: [
                "NetReachConnectivity", "NetReach", "NetReachSystem", "NetReachTesting",
                .product(name: "Clocks", package: "swift-clocks"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
            ]
        ),
        // The HTTP service, output files, and the transport conformance suite, which runs the same
        // cases on both transports (NetReachURLSession, NetReachAsyncHTTPClient).
        .testTarget(
            name: "NetReachHTTPTests",
            dependencies: [
                "NetReachHTTP", "NetReachURLSession", "NetReachAsyncHTTPClient", "NetReachTesting",
                "NetReachConnectivity",
                "NetReachSystem", "NetReachTestSupport",
                .product(name: "Clocks", package: "swift-clocks"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        // The exporter's parts on their own (metrics, events, health, every endpoint through its
        // router), then `serve` run against namespace labs in NetReachCommandsTests.
        .testTarget(
            name: "NetReachServeTests",
            dependencies: [
                "NetReachServe", "NetReach", "NetReachConnectivity", "NetReachSystem", "NetReachTesting",
                "NetReachTestSupport",
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                // ServeRoutesTests: every endpoint through the router in process, no socket.
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "HummingbirdBcrypt", package: "hummingbird-auth"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ]
        ),
        // What only AsyncHTTPClient does: its prober, decoding limits (its conformance is in NetReachHTTPTests).
        .testTarget(
            name: "NetReachAsyncHTTPClientTests",
            dependencies: [
                "NetReachAsyncHTTPClient", "NetReachHTTP", "NetReachConnectivity", "NetReach", "NetReachTestSupport",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                // RequestChunksTests: an event loop held busy, to see the body wait for it.
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                // BodyCoalescerTests: the handler in an EmbeddedChannel.
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPCompression", package: "swift-nio-extras"),
            ]
        ),
        // Every command: parsing and help in process, and the built `netreach` run against namespace
        // labs, nginx and curl (Integration/).
        .testTarget(
            name: "NetReachCommandsTests",
            dependencies: [
                "NetReachCommands", "NetReach", "NetReachSystem", "NetReachConnectivity", "NetReachTestSupport",
                "NetReachServe", // YAMLReader: Deploy/'s DaemonSet, read for its container's args
                "netreach", // built before the tests run: the command tests execute it
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            // The status page's Chromium driver (Python), run by StatusPageTests.
            exclude: ["Integration/Scripts"]
        ),
        // README and DocC snippets, extracted by scripts/extract-snippets.py: building them is the check.
        .testTarget(
            name: "SnippetChecks",
            dependencies: [
                "NetReach", "NetReachTesting", "NetReachHTTP", "NetReachURLSession", "NetReachAsyncHTTPClient",
                "NetReachConnectivity", "NetReachNetwork", "NetReachConditioner", "NetReachNotifications",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"), // ChoosingATransport imports it
                // MetricsAndLogging bootstraps a Prometheus backend.
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
