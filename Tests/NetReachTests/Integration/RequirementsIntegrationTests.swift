import NetReach
import NetReachTestSupport
import Testing

/// `requiredInterfaceType` / `prohibitedInterfaceTypes` against a namespace whose only interface is
/// a veth, which is wired Ethernet (InterfaceType: a container's eth0 is its wire).
@Suite("Interface requirements in a network namespace (integration)", .offPool, .needsNamespaceRoot)
struct RequirementsIntegrationTests {
    @Test func requiringWiFiOnAVethOnlyNamespaceIsExcludedByRequirements() async throws {
        try await NetnsLab.withLab { lab in
            let monitor = PathMonitor.started(in: lab, requiredInterfaceType: .wifi)
            defer { monitor.cancel() }
            #expect(PathStep(monitor.currentPath) == .unsatisfied(.excludedByRequirements))
            #expect(monitor.currentPath.availableInterfaces.isEmpty)
        }
    }

    @Test func prohibitingWiredEthernetOnAVethOnlyNamespaceIsExcludedByRequirements() async throws {
        try await NetnsLab.withLab { lab in
            let monitor = PathMonitor.started(in: lab, prohibitedInterfaceTypes: [.wiredEthernet])
            defer { monitor.cancel() }
            #expect(PathStep(monitor.currentPath) == .unsatisfied(.excludedByRequirements))
        }
    }

    @Test func requiringWiredEthernetIsSatisfiedThroughTheVeth() async throws {
        try await NetnsLab.withLab { lab in
            let monitor = PathMonitor.started(in: lab, requiredInterfaceType: .wiredEthernet)
            defer { monitor.cancel() }
            #expect(monitor.currentPath.isLabIPv4Satisfied, "\(monitor.currentPath)")
            #expect(monitor.currentPath.usesInterfaceType(.wiredEthernet))
            #expect(monitor.currentPath.primaryInterfaceType == .wiredEthernet)
        }
    }
}
