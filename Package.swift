// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "NetReach",
    products: [
        .library(name: "NetReach", targets: ["NetReach"]),
        .library(name: "NetReachTesting", targets: ["NetReachTesting"]),
        .executable(name: "netreach", targets: ["netreach"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
    ],
    targets: [
        // Kernel headers and macro shims Glibc does not import (NETLINK_ROUTE, RTM_*, IFLA_*, setns).
        .target(name: "CNetReachLinux"),
        .target(
            name: "NetReach",
            dependencies: [.target(name: "CNetReachLinux", condition: .when(platforms: [.linux]))]
        ),
        .target(name: "NetReachTesting", dependencies: ["NetReach"]),
        .executableTarget(
            name: "netreach",
            dependencies: [
                "NetReach",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .testTarget(name: "NetReachTests", dependencies: ["NetReach", "NetReachTesting"]),
        .testTarget(
            name: "NetReachLinuxTests",
            dependencies: [
                "NetReach",
                "netreach",
                .target(name: "CNetReachLinux", condition: .when(platforms: [.linux])),
            ],
            // Captured kernel dumps (hex) and the script that captured them; tests read them by path.
            exclude: ["Fixtures"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
