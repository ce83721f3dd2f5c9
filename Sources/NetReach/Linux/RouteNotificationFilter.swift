#if os(Linux)
/// A classic BPF program for the events socket that drops, in the kernel, the route notifications
/// that cannot change any answer: those ``SnapshotStore/absorb(_:watching:)`` would read as a
/// route that covers none of the watched addresses. A router with a full table, or a host whose
/// container runtime adds a /32 per container, announces thousands of such routes a second; each
/// one used to wake the engine's thread (4-6 µs of CPU, most of it the wake-up itself) to be read
/// and ignored.
///
/// The program keeps a message (returns "accept") unless all of this holds, so anything it does not
/// understand reaches the parser as before:
/// - the datagram is exactly one netlink message (a notification always is), of type
///   RTM_NEWROUTE or RTM_DELROUTE, of family AF_INET or AF_INET6;
/// - its destination prefix is not empty (a default route, kept by the store, has length 0) and
///   it has no source prefix (a source-specific route may apply to any destination);
/// - its attributes are well formed up to its RTA_DST (within the first ``attributesSearched``),
///   whose length fits the family;
/// - the prefix covers none of the watched addresses of its family.
///
/// The table, type and next hops do not matter: a covering route of any table asks again, as
/// `absorb` does. Messages of every other kind (links, addresses, rules, neighbours, nexthop
/// objects, netconf) are always kept.
struct RouteNotificationFilter: Equatable, CustomStringConvertible {
    /// One `struct sock_filter`: the layout `SO_ATTACH_FILTER` reads.
    struct Instruction: Equatable {
        var code: UInt16
        var jumpIfTrue: UInt8
        var jumpIfFalse: UInt8
        var value: UInt32
    }

    /// The program, at most ``maximumLength`` instructions.
    let instructions: [Instruction]

    /// The kernel's limit on a classic BPF program (BPF_MAXINSNS).
    static let maximumLength = 4096
    /// How many attributes are looked at for RTA_DST before the message is kept unread. The
    /// kernel puts RTA_TABLE first and RTA_DST second (`rtm_fill_info`, `rt6_fill_node`).
    static let attributesSearched = 8

    /// The filter that keeps every route notification covering one of `addresses`, or `nil` when
    /// the program would be longer than the kernel accepts (hundreds of IPv6 destinations): the
    /// socket then reads every message, as it did without a filter.
    init?(watching addresses: [IPAddress]) {
        var assembler = Assembler()
        assembler.program(watching: Array(Set(addresses)).sorted { $0.precedes($1) })
        guard assembler.code.count <= Self.maximumLength else { return nil }
        instructions = assembler.code
    }

    var description: String { "RouteNotificationFilter(\(instructions.count) instructions)" }
}

// MARK: Classic BPF

/// Opcodes of classic BPF (linux/filter.h, linux/bpf_common.h).
enum BPF {
    static let ld: UInt16 = 0x00, ldx: UInt16 = 0x01, st: UInt16 = 0x02, stx: UInt16 = 0x03
    static let alu: UInt16 = 0x04, jmp: UInt16 = 0x05, ret: UInt16 = 0x06, misc: UInt16 = 0x07
    static let word: UInt16 = 0x00, byte: UInt16 = 0x10
    static let imm: UInt16 = 0x00, abs: UInt16 = 0x20, ind: UInt16 = 0x40, mem: UInt16 = 0x60, len: UInt16 = 0x80
    static let add: UInt16 = 0x00, sub: UInt16 = 0x10, or: UInt16 = 0x40, and: UInt16 = 0x50, lsh: UInt16 = 0x60
    static let xor: UInt16 = 0xa0
    static let ja: UInt16 = 0x00, jeq: UInt16 = 0x10, jgt: UInt16 = 0x20, jge: UInt16 = 0x30
    static let k: UInt16 = 0x00, x: UInt16 = 0x08
    static let tax: UInt16 = 0x00, txa: UInt16 = 0x80
}

/// The scratch memory slots the program uses.
private enum Slot {
    static let prefixLength: UInt32 = 0
    static let offset: UInt32 = 2
    static let attributeLength: UInt32 = 3
    static let masks: UInt32 = 4 // 4...7
    static let words: UInt32 = 8 // 8...11
    static let scratch: UInt32 = 12
    static let messageEnd: UInt32 = 14
}

private struct Assembler {
    var code: [RouteNotificationFilter.Instruction] = []
    /// Unconditional jumps waiting for their label's position: label → indices of `ja`s.
    private var pending: [Int: [Int]] = [:]
    private var nextLabel = 0

    static let keep: UInt32 = 0xffff_ffff
    static let drop: UInt32 = 0

    mutating func emit(_ code: UInt16, _ value: UInt32 = 0, _ jumpIfTrue: UInt8 = 0, _ jumpIfFalse: UInt8 = 0) {
        self.code.append(.init(code: code, jumpIfTrue: jumpIfTrue, jumpIfFalse: jumpIfFalse, value: value))
    }

    mutating func label() -> Int {
        nextLabel += 1
        return nextLabel
    }

    mutating func jump(to label: Int) {
        pending[label, default: []].append(code.count)
        emit(BPF.jmp | BPF.ja)
    }

    mutating func place(_ label: Int) {
        for index in pending.removeValue(forKey: label) ?? [] {
            code[index].value = UInt32(code.count - index - 1)
        }
    }

    /// Keeps the message when `A <test> operand` holds (operand `value`, or X with `BPF.x`).
    mutating func keep(if test: UInt16, _ value: UInt32 = 0, source: UInt16 = BPF.k) {
        emit(BPF.jmp | test | source, value, 0, 1)
        emit(BPF.ret | BPF.k, Self.keep)
    }

    /// Keeps the message unless `A <test> operand` holds.
    mutating func keep(unless test: UInt16, _ value: UInt32 = 0, source: UInt16 = BPF.k) {
        emit(BPF.jmp | test | source, value, 1, 0)
        emit(BPF.ret | BPF.k, Self.keep)
    }

    /// A = the host-order u16 at X + `offset`; X is reloaded from `Slot.offset` afterwards.
    mutating func loadHostU16(atX offset: UInt32) {
        #if _endian(little)
        let (low, high) = (offset, offset + 1)
        #else
        let (low, high) = (offset + 1, offset)
        #endif
        emit(BPF.ld | BPF.byte | BPF.ind, high)
        emit(BPF.alu | BPF.lsh | BPF.k, 8)
        emit(BPF.st, Slot.scratch)
        emit(BPF.ld | BPF.byte | BPF.ind, low)
        emit(BPF.misc | BPF.tax)
        emit(BPF.ld | BPF.mem, Slot.scratch)
        emit(BPF.alu | BPF.or | BPF.x)
        emit(BPF.ldx | BPF.mem, Slot.offset)
    }

    mutating func program(watching addresses: [IPAddress]) {
        // One message, and all of it in the datagram: nlmsg_len (host order; a route message is
        // shorter than 64 KiB) at least a route header, at most the datagram, and no room for
        // a second message after it.
        emit(BPF.ldx | BPF.imm, 0)
        emit(BPF.st, Slot.offset) // A is 0: the first loads are relative to X = 0
        emit(BPF.ld | BPF.len)
        keep(unless: BPF.jge, 28)
        #if _endian(little)
        let highHalf: UInt32 = 2
        #else
        let highHalf: UInt32 = 0
        #endif
        emit(BPF.ld | BPF.byte | BPF.abs, highHalf)
        keep(unless: BPF.jeq, 0)
        emit(BPF.ld | BPF.byte | BPF.abs, highHalf + 1)
        keep(unless: BPF.jeq, 0)
        loadHostU16(atX: 2 - highHalf)
        emit(BPF.st, Slot.messageEnd)
        keep(unless: BPF.jge, 28)
        emit(BPF.misc | BPF.tax)
        emit(BPF.ld | BPF.len)
        keep(unless: BPF.jge, 0, source: BPF.x) // datagram ≥ nlmsg_len
        emit(BPF.ld | BPF.mem, Slot.messageEnd)
        emit(BPF.alu | BPF.add | BPF.k, 3)
        emit(BPF.alu | BPF.and | BPF.k, ~3)
        emit(BPF.misc | BPF.tax)
        emit(BPF.ld | BPF.len)
        keep(if: BPF.jgt, 0, source: BPF.x) // datagram > NLMSG_ALIGN(nlmsg_len): more follows
        emit(BPF.ldx | BPF.imm, 0)
        // RTM_NEWROUTE (24) or RTM_DELROUTE (25).
        loadHostU16(atX: 4)
        emit(BPF.alu | BPF.sub | BPF.k, 24)
        keep(if: BPF.jgt, 1)
        // struct rtmsg at 16: family, dst_len, src_len.
        let ipv4 = label()
        let ipv6 = label()
        emit(BPF.ld | BPF.byte | BPF.abs, 16)
        emit(BPF.jmp | BPF.jeq | BPF.k, 2, 0, 1)
        jump(to: ipv4)
        emit(BPF.jmp | BPF.jeq | BPF.k, 10, 0, 1)
        jump(to: ipv6)
        emit(BPF.ret | BPF.k, Self.keep)
        place(ipv4)
        family(bits: 32, watching: addresses.filter { $0.family == .ipv4 })
        place(ipv6)
        family(bits: 128, watching: addresses.filter { $0.family == .ipv6 })
    }

    /// The rest of the program for one family: prefix lengths, RTA_DST, the comparisons.
    private mutating func family(bits: UInt32, watching addresses: [IPAddress]) {
        let bytes = bits / 8
        emit(BPF.ld | BPF.byte | BPF.abs, 17) // rtm_dst_len
        keep(if: BPF.jeq, 0)
        keep(if: BPF.jgt, bits)
        emit(BPF.st, Slot.prefixLength)
        emit(BPF.ld | BPF.byte | BPF.abs, 18) // rtm_src_len
        keep(unless: BPF.jeq, 0)
        // The attributes from 28: find RTA_DST (type 1, NLA_TYPE_MASK applied).
        let found = label()
        emit(BPF.ldx | BPF.imm, 28)
        for _ in 0..<RouteNotificationFilter.attributesSearched {
            emit(BPF.stx, Slot.offset)
            emit(BPF.misc | BPF.txa)
            emit(BPF.alu | BPF.add | BPF.k, 4)
            emit(BPF.ldx | BPF.mem, Slot.messageEnd)
            keep(if: BPF.jgt, 0, source: BPF.x) // no room for another attribute: no RTA_DST
            emit(BPF.ldx | BPF.mem, Slot.offset)
            loadHostU16(atX: 0) // rta_len
            emit(BPF.st, Slot.attributeLength)
            keep(unless: BPF.jge, 4)
            emit(BPF.alu | BPF.add | BPF.x)
            emit(BPF.ldx | BPF.mem, Slot.messageEnd)
            keep(if: BPF.jgt, 0, source: BPF.x) // runs past the message
            emit(BPF.ldx | BPF.mem, Slot.offset)
            loadHostU16(atX: 2) // rta_type
            emit(BPF.alu | BPF.and | BPF.k, 0x3fff)
            emit(BPF.jmp | BPF.jeq | BPF.k, 1, 0, 1)
            jump(to: found)
            emit(BPF.ld | BPF.mem, Slot.attributeLength)
            emit(BPF.alu | BPF.add | BPF.k, 3)
            emit(BPF.alu | BPF.and | BPF.k, ~3)
            emit(BPF.alu | BPF.add | BPF.x)
            emit(BPF.misc | BPF.tax)
        }
        emit(BPF.ret | BPF.k, Self.keep)
        place(found)
        emit(BPF.ld | BPF.mem, Slot.attributeLength)
        keep(unless: BPF.jeq, 4 + bytes)
        let words = bytes / 4
        for word in 0..<words {
            emit(BPF.ld | BPF.word | BPF.ind, 4 + 4 * word) // network order: the address's own value
            emit(BPF.st, Slot.words + word)
        }
        // Each word's mask: the prefix's bits that fall in it.
        for word in 0..<words {
            let full = label()
            let none = label()
            let next = label()
            emit(BPF.ld | BPF.mem, Slot.prefixLength)
            emit(BPF.jmp | BPF.jge | BPF.k, 32 * (word + 1), 0, 1)
            jump(to: full)
            emit(BPF.jmp | BPF.jgt | BPF.k, 32 * word, 1, 0)
            jump(to: none)
            // 0xffffffff << (32 − bits in this word), bits in 1...31.
            emit(BPF.alu | BPF.sub | BPF.k, 32 * word)
            emit(BPF.st, Slot.scratch)
            emit(BPF.ld | BPF.imm, 32)
            emit(BPF.ldx | BPF.mem, Slot.scratch)
            emit(BPF.alu | BPF.sub | BPF.x)
            emit(BPF.misc | BPF.tax)
            emit(BPF.ld | BPF.imm, 0xffff_ffff)
            emit(BPF.alu | BPF.lsh | BPF.x)
            emit(BPF.st, Slot.masks + word)
            jump(to: next)
            place(full)
            emit(BPF.ld | BPF.imm, 0xffff_ffff)
            emit(BPF.st, Slot.masks + word)
            jump(to: next)
            place(none)
            emit(BPF.ld | BPF.imm, 0)
            emit(BPF.st, Slot.masks + word)
            place(next)
        }
        // Kept if the prefix covers a watched address: every word equal under its mask.
        let perAddress = 5 * Int(words) + 1
        for address in addresses {
            for word in 0..<Int(words) {
                let value = address.bytes[(4 * word)..<(4 * word + 4)].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
                emit(BPF.ld | BPF.mem, Slot.words + UInt32(word))
                emit(BPF.alu | BPF.xor | BPF.k, value)
                emit(BPF.ldx | BPF.mem, Slot.masks + UInt32(word))
                emit(BPF.alu | BPF.and | BPF.x)
                // Differs: skip this address's remaining words and its `ret`.
                let remaining = perAddress - 5 * (word + 1)
                emit(BPF.jmp | BPF.jeq | BPF.k, 0, 0, UInt8(remaining))
            }
            emit(BPF.ret | BPF.k, Self.keep)
        }
        emit(BPF.ret | BPF.k, Self.drop)
    }
}
#endif
