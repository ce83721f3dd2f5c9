#if os(Linux)
import CNetReachLinux
import Glibc
@testable import NetReach
import NetReachTestSupport

/// Builds rtnetlink buffers by hand, the way the kernel lays them out: each message is a
/// `nlmsghdr`, a fixed body (`ifinfomsg`, `ifaddrmsg`, `rtmsg`, ...) and `rtattr`s, every part
/// padded to 4 bytes, integers in host byte order, addresses in network order.
///
/// ```swift
/// let bytes = NetlinkBytes()
///     .message(NetlinkBytes.newLink, body: NetlinkBytes.ifinfomsg(index: 2, flags: NetlinkBytes.up),
///              attributes: [.string(NetlinkBytes.iflaIfname, "eth0")])
///     .bytes
/// ```
///
/// Constants come from the kernel headers (through CNetReachLinux), not from the parser, so the
/// tests also check the parser's own numbers.
struct NetlinkBytes {
    private(set) var bytes: [UInt8] = []

    /// One `rtattr`. `declaredLength` lets a test lie about `rta_len`.
    struct Attribute {
        var type: UInt16
        var payload: [UInt8]
        var declaredLength: UInt16?

        static func raw(_ type: UInt16, _ payload: [UInt8], declaredLength: UInt16? = nil) -> Attribute {
            Attribute(type: type, payload: payload, declaredLength: declaredLength)
        }
        /// A NUL-terminated string, as the kernel sends names and kinds.
        static func string(_ type: UInt16, _ value: String) -> Attribute {
            raw(type, Array(value.utf8) + [0])
        }
        static func u32(_ type: UInt16, _ value: UInt32) -> Attribute { raw(type, NetlinkBytes.hostOrder(value)) }
        /// An address attribute from its textual form.
        static func address(_ type: UInt16, _ text: String) -> Attribute { raw(type, IPAddress(text)!.bytes) }
        static func nested(_ type: UInt16, _ attributes: [Attribute]) -> Attribute {
            raw(type | UInt16(NLA_F_NESTED), attributes.flatMap(\.encoded))
        }
        /// `RTA_MULTIPATH`: one `rtnexthop` (len, flags, hops, ifindex) per hop, each with its
        /// `RTA_GATEWAY`.
        static func multipath(_ hops: [(interfaceIndex: Int32, gateway: String)]) -> Attribute {
            let encodedHops = hops.flatMap { hop -> [UInt8] in
                let gateway = Attribute.address(NetlinkBytes.rtaGateway, hop.gateway).encoded
                return NetlinkBytes.hostOrder(UInt16(8 + gateway.count)) + [0, 0]
                    + NetlinkBytes.hostOrder(hop.interfaceIndex) + gateway
            }
            return raw(NetlinkBytes.rtaMultipath, encodedHops)
        }

        var encoded: [UInt8] {
            let length = declaredLength ?? UInt16(4 + payload.count)
            return NetlinkBytes.padded(NetlinkBytes.hostOrder(length) + NetlinkBytes.hostOrder(type) + payload)
        }
    }

    /// Appends one message; `nlmsg_len` is computed unless `declaredLength` overrides it.
    func message(
        _ type: UInt16, flags: UInt16 = 0, sequence: UInt32 = 0, portID: UInt32 = 0, body: [UInt8],
        attributes: [Attribute] = [], declaredLength: UInt32? = nil
    ) -> NetlinkBytes {
        let payload = Self.padded(body) + attributes.flatMap(\.encoded)
        let length = declaredLength ?? UInt32(16 + payload.count)
        let header =
            Self.hostOrder(length) + Self.hostOrder(type) + Self.hostOrder(flags)
            + Self.hostOrder(sequence) + Self.hostOrder(portID)
        return appending(header + payload)
    }

    /// Appends raw bytes, for buffers no well-formed message describes.
    func appending(_ raw: [UInt8]) -> NetlinkBytes {
        var copy = self
        copy.bytes += raw
        return copy
    }

    // MARK: Fixed bodies

    /// `struct ifinfomsg { u8 family; u8 pad; u16 type; s32 index; u32 flags; u32 change; }`
    static func ifinfomsg(
        family: UInt8 = 0, hardwareType: UInt16 = ethernet, index: Int32, flags: UInt32, change: UInt32 = 0
    ) -> [UInt8] {
        [family, 0] + hostOrder(hardwareType) + hostOrder(index) + hostOrder(flags) + hostOrder(change)
    }

    /// `struct ifaddrmsg { u8 family; u8 prefixlen; u8 flags; u8 scope; u32 index; }`
    static func ifaddrmsg(
        family: UInt8, prefixLength: UInt8, flags: UInt8 = 0, scope: UInt8 = 0, index: UInt32
    ) -> [UInt8] {
        [family, prefixLength, flags, scope] + hostOrder(index)
    }

    /// `struct rtmsg { u8 family, dst_len, src_len, tos, table, protocol, scope, type; u32 flags; }`
    static func rtmsg(
        family: UInt8, destinationLength: UInt8 = 0, table: UInt8 = mainTable, type: UInt8 = unicast
    ) -> [UInt8] {
        [family, destinationLength, 0, 0, table, 3 /* RTPROT_BOOT */, 0 /* RT_SCOPE_UNIVERSE */, type]
            + hostOrder(UInt32(0))
    }

    /// The body of NLMSG_ERROR: the negative errno, then the request's header.
    static func errorBody(errno: Int32) -> [UInt8] { hostOrder(-errno) + [UInt8](repeating: 0, count: 16) }

    // MARK: Kernel constants, from the headers

    static let done = UInt16(NLMSG_DONE), error = UInt16(NLMSG_ERROR)
    static let newLink = UInt16(RTM_NEWLINK), deleteLink = UInt16(RTM_DELLINK)
    static let newAddress = UInt16(RTM_NEWADDR), deleteAddress = UInt16(RTM_DELADDR)
    static let newRoute = UInt16(RTM_NEWROUTE), deleteRoute = UInt16(RTM_DELROUTE)
    static let newNeighbour = UInt16(RTM_NEWNEIGH), deleteNeighbour = UInt16(RTM_DELNEIGH)
    static let newNetconf = UInt16(RTM_NEWNETCONF), newQdisc = UInt16(RTM_NEWQDISC)
    /// From <linux/neighbour.h>, which the C module does not include: NDA_DST, NDA_LLADDR, NUD_FAILED.
    static let ndaDst: UInt16 = 1, ndaLladdr: UInt16 = 2, nudFailed: UInt16 = 0x20
    static let multi = UInt16(NLM_F_MULTI), dumpInterrupted = UInt16(NLM_F_DUMP_INTR), replace = UInt16(NLM_F_REPLACE)

    static let up = UInt32(IFF_UP), running = UInt32(IFF_RUNNING), loopback = UInt32(IFF_LOOPBACK)
    static let lowerUp = UInt32(IFF_LOWER_UP.rawValue)
    static let ethernet = UInt16(ARPHRD_ETHER), loopbackHardware = UInt16(ARPHRD_LOOPBACK)
    static let iflaIfname = UInt16(IFLA_IFNAME), iflaLinkinfo = UInt16(IFLA_LINKINFO),
        iflaInfoKind = UInt16(IFLA_INFO_KIND)

    static let inet = UInt8(AF_INET), inet6 = UInt8(AF_INET6)
    static let ifaAddress = UInt16(IFA_ADDRESS), ifaLocal = UInt16(IFA_LOCAL), ifaFlags = UInt16(IFA_FLAGS)
    static let tentative = UInt32(IFA_F_TENTATIVE), dadFailed = UInt32(IFA_F_DADFAILED),
        permanent = UInt32(IFA_F_PERMANENT)
    static let scopeLink = UInt8(RT_SCOPE_LINK.rawValue), scopeHost = UInt8(RT_SCOPE_HOST.rawValue)

    static let rtaDst = UInt16(RTA_DST.rawValue)
    static let rtaOif = UInt16(RTA_OIF.rawValue), rtaGateway = UInt16(RTA_GATEWAY.rawValue)
    static let rtaPriority = UInt16(RTA_PRIORITY.rawValue), rtaTable = UInt16(RTA_TABLE.rawValue)
    static let rtaMultipath = UInt16(RTA_MULTIPATH.rawValue)
    static let mainTable = UInt8(RT_TABLE_MAIN.rawValue), localTable = UInt8(RT_TABLE_LOCAL.rawValue)
    static let unicast = UInt8(RTN_UNICAST), blackhole = UInt8(RTN_BLACKHOLE)

    // MARK: Encoding

    static func hostOrder<T: FixedWidthInteger>(_ value: T) -> [UInt8] { withUnsafeBytes(of: value) { Array($0) } }

    static func padded(_ bytes: [UInt8]) -> [UInt8] {
        bytes + [UInt8](repeating: 0, count: (4 - bytes.count % 4) % 4)
    }
}
#endif
