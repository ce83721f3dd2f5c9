#if os(Linux)
/// Netlink's wire format, read: message alignment, attributes (type-length-value), the legs of a
/// multipath route, and host-order loads at any alignment. Shared by the parser (notifications and
/// dumps) and by ``RouteQuery`` (lookup answers); every read is bounds-checked by its caller or here.
extension RtnetlinkParser {
    /// Netlink aligns messages and attributes to 4 bytes (`NLMSG_ALIGN`, `RTA_ALIGN`).
    static func align(_ length: Int) -> Int { (length + 3) & ~3 }

    // struct rtnexthop { u16 len; u8 flags; u8 hops; s32 ifindex; } followed by attributes.
    /// The legs of a multipath route (`RTA_MULTIPATH`), with the kernel's dead and linkdown flags.
    static func nextHops(
        _ value: UnsafeRawBufferPointer, family: UInt8
    ) throws(NetlinkParseError) -> [RouteLookup.NextHop] {
        var hops: [RouteLookup.NextHop] = []
        var offset = 0
        while offset + 8 <= value.count {
            let length = Int(value.loadU16(at: offset))
            guard length >= 8, offset + length <= value.count else { throw .badAttribute(type: 9, offset: offset) }
            let hop = UnsafeRawBufferPointer(rebasing: value[offset..<(offset + length)])
            var gateway: IPAddress?
            try forEachAttribute(in: hop, from: 8) { (attribute, attributeValue) throws(NetlinkParseError) in
                // RTA_GATEWAY
                if attribute == 5 { gateway = try ipAddress(attributeValue, family: family, attribute: attribute) }
                if attribute == 18, attributeValue.count >= 2 {
                    gateway = IPAddress(networkOrder: UnsafeRawBufferPointer(rebasing: attributeValue[2...]))
                } // RTA_VIA
            }
            // RTNH_F_DEAD (1) and RTNH_F_LINKDOWN (16): the kernel sends nothing through this leg.
            let flags = hop[2]
            hops.append(
                RouteLookup.NextHop(
                    interfaceIndex: Int(Int32(bitPattern: hop.loadU32(at: 4))), gateway: gateway,
                    isDead: flags & 0x11 != 0))
            offset += align(length)
        }
        return hops
    }

    /// Calls `body` with each attribute (type without the nested/byte-order bits, value) from `start`.
    static func forEachAttribute(
        in buffer: UnsafeRawBufferPointer, from start: Int,
        _ body: (UInt16, UnsafeRawBufferPointer) throws(NetlinkParseError) -> Void
    ) throws(NetlinkParseError) {
        var offset = start
        while offset + 4 <= buffer.count {
            let length = Int(buffer.loadU16(at: offset))
            let type = buffer.loadU16(at: offset + 2) & 0x3fff
            guard length >= 4, offset + length <= buffer.count else { throw .badAttribute(type: type, offset: offset) }
            try body(type, UnsafeRawBufferPointer(rebasing: buffer[(offset + 4)..<(offset + length)]))
            offset += align(length)
        }
    }

    static func ipAddress(
        _ value: UnsafeRawBufferPointer, family: UInt8, attribute: UInt16
    ) throws(NetlinkParseError) -> IPAddress {
        let expected = family == 2 ? 4 : 16
        guard value.count == expected, let address = IPAddress(networkOrder: value) else {
            throw .badAddress(type: attribute, length: value.count)
        }
        return address
    }
}

extension UnsafeRawBufferPointer {
    /// Host-order loads that tolerate any alignment; callers check bounds first.
    func loadU16(at offset: Int) -> UInt16 { loadUnaligned(fromByteOffset: offset, as: UInt16.self) }
    func loadU32(at offset: Int) -> UInt32 { loadUnaligned(fromByteOffset: offset, as: UInt32.self) }
}
#endif
