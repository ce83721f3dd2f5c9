import Foundation
import NetReachNetwork
import Testing

@Suite("NWEndpoint, IPv4Address and IPv6Address")
struct NWEndpointTests {
    @Test("IPv4 text parses to four bytes with Apple's flags; anything else is nil")
    func ipv4() throws {
        let address = try #require(IPv4Address("192.0.2.1"))
        #expect(address.rawValue == Data([192, 0, 2, 1]))
        #expect(address.interface == nil && !address.isLoopback && !address.isLinkLocal && !address.isMulticast)
        #expect(IPv4Address("127.0.0.53")!.isLoopback)
        #expect(IPv4Address("169.254.1.1")!.isLinkLocal)
        #expect(IPv4Address("224.0.0.251") == .mdnsGroup && IPv4Address.mdnsGroup.isMulticast)
        for bad in ["", "192.0.2", "192.0.2.256", "::1", "example.com", "192.0.2.1%", "192.0.2.1%no-such-interface0"] {
            #expect(IPv4Address(bad) == nil, "\(bad)")
        }
        #expect(IPv4Address(Data([1, 2, 3])) == nil)
        #expect(IPv4Address(Data([10, 0, 0, 1]))?.debugDescription == "10.0.0.1")
    }

    @Test("A %scope names an interface of this system; the address keeps it")
    func scoped() throws {
        let address = try #require(IPv6Address("fe80::1%lo"))
        #expect(address.interface?.name == "lo")
        #expect(address.interface?.index == 1)
        #expect(address.isLinkLocal)
        #expect(address.debugDescription == "fe80::1%lo")
        #expect(address != IPv6Address("fe80::1"), "the scope is part of the address")
        #expect(IPv6Address("fe80::1%1")?.interface?.name == "lo", "an index names it too")
    }

    @Test("IPv6 text parses to sixteen bytes with Apple's flags")
    func ipv6() throws {
        #expect(IPv6Address("::1") == .loopback && IPv6Address.loopback.isLoopback)
        #expect(IPv6Address("::")!.isAny)
        let mapped = try #require(IPv6Address("::ffff:192.0.2.1"))
        #expect(mapped.isIPv4Mapped && mapped.asIPv4 == IPv4Address("192.0.2.1"))
        #expect(IPv6Address("2002:c000:201::1")!.is6to4)
        #expect(IPv6Address("ff02::1") == .linkLocalNodes && IPv6Address.linkLocalNodes.multicastScope == .linkLocal)
        #expect(IPv6Address("ff0e::1")?.multicastScope == .global)
        #expect(IPv6Address("2001:db8::1")?.multicastScope == nil)
        #expect(IPv6Address("192.0.2.1") == nil && IPv6Address("2001:db8::g") == nil)
    }

    @Test("A host from text: an IPv4 literal, an IPv6 literal (mapped ones as IPv4), else a name")
    func hosts() {
        #expect(NWEndpoint.Host("192.0.2.1") == .ipv4(IPv4Address("192.0.2.1")!))
        #expect(NWEndpoint.Host("2001:db8::1") == .ipv6(IPv6Address("2001:db8::1")!))
        #expect(NWEndpoint.Host("::ffff:192.0.2.1") == .ipv4(IPv4Address("192.0.2.1")!))
        #expect(NWEndpoint.Host("example.com") == .name("example.com", nil))
        let literal: NWEndpoint.Host = "router.local%lo"
        #expect(literal == .name("router.local", NWEndpoint.Host("x%lo").interface))
        #expect(literal.debugDescription == "router.local%lo")
    }

    @Test("Ports: numbers, integer literals, service names from the services database; nothing else")
    func ports() {
        #expect(NWEndpoint.Port("8080")?.rawValue == 8080)
        #expect(NWEndpoint.Port("65535")?.rawValue == 65535)
        #expect(NWEndpoint.Port("65536") == nil && NWEndpoint.Port("-1") == nil && NWEndpoint.Port("") == nil)
        #expect(NWEndpoint.Port("no-such-service-anywhere") == nil)
        let literal: NWEndpoint.Port = 443
        #expect(literal == .https && NWEndpoint.Port(rawValue: 22) == .ssh)
        if FileManager.default.fileExists(atPath: "/etc/services") {
            #expect(NWEndpoint.Port("http") == .http)
        }
    }

    @Test("Endpoints describe themselves as Apple's do")
    func descriptions() {
        #expect(NWEndpoint.hostPort(host: "192.0.2.1", port: 80).debugDescription == "192.0.2.1:80")
        #expect(NWEndpoint.hostPort(host: "2001:db8::1", port: 443).debugDescription == "2001:db8::1.443")
        #expect(NWEndpoint.hostPort(host: "example.com", port: 8080).debugDescription == "example.com:8080")
        #expect(NWEndpoint.unix(path: "/run/app.sock").debugDescription == "/run/app.sock")
        #expect(NWEndpoint.url(URL(string: "https://example.com/")!).debugDescription == "https://example.com/")
        #expect(
            NWEndpoint.service(name: "printer", type: "_ipp._tcp", domain: "local.", interface: nil).debugDescription
                == "printer._ipp._tcplocal.")
        #expect(NWEndpoint.hostPort(host: "fe80::1%lo", port: 0).interface?.name == "lo")
    }
}
