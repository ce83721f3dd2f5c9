#if os(Linux)
@testable import NetReach

extension RouteNotificationFilter {
    /// Runs the program on `packet` as the kernel would (a datagram the socket is about to queue);
    /// returns whether it is kept. The kernel is the reference (`RouteFilterIntegrationTests`);
    /// this reads its rules for the tests that need many packets.
    func keeps(_ packet: [UInt8]) -> Bool {
        var interpreter = ClassicBPFInterpreter(packet: packet)
        return interpreter.run(instructions) != 0
    }
}

/// Classic BPF as the kernel runs it, for the opcodes the assembler emits: loads past the packet
/// end the program with 0 (drop), as `bpf_convert_filter`'s checks do.
struct ClassicBPFInterpreter {
    let packet: [UInt8]
    var a: UInt32 = 0
    var x: UInt32 = 0
    var memory = [UInt32](repeating: 0, count: 16)

    init(packet: [UInt8]) { self.packet = packet }

    private func load(_ offset: UInt32, size: Int) -> UInt32? {
        let start = Int(offset)
        guard start + size <= packet.count else { return nil }
        return packet[start..<(start + size)].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
    }

    mutating func run(_ program: [RouteNotificationFilter.Instruction]) -> UInt32 {
        var pc = 0
        while pc < program.count {
            let instruction = program[pc]
            let k = instruction.value
            pc += 1
            switch instruction.code {
            case BPF.ld | BPF.imm: a = k
            case BPF.ld | BPF.len: a = UInt32(packet.count)
            case BPF.ld | BPF.mem: a = memory[Int(k)]
            case BPF.ld | BPF.byte | BPF.abs, BPF.ld | BPF.byte | BPF.ind, BPF.ld | BPF.word | BPF.ind:
                let indirect = instruction.code & BPF.ind != 0
                let offset = indirect ? x &+ k : k
                guard let value = load(offset, size: instruction.code & BPF.byte != 0 ? 1 : 4) else { return 0 }
                a = value
            case BPF.ldx | BPF.imm: x = k
            case BPF.ldx | BPF.mem: x = memory[Int(k)]
            case BPF.st: memory[Int(k)] = a
            case BPF.stx: memory[Int(k)] = x
            case BPF.misc | BPF.tax: x = a
            case BPF.misc | BPF.txa: a = x
            case BPF.ret | BPF.k: return k
            case let code where code & 0x07 == BPF.alu:
                let operand = code & BPF.x != 0 ? x : k
                switch code & 0xf0 {
                case BPF.add: a = a &+ operand
                case BPF.sub: a = a &- operand
                case BPF.or: a |= operand
                case BPF.and: a &= operand
                case BPF.lsh: a = operand >= 32 ? 0 : a << operand
                case BPF.xor: a ^= operand
                default: return 0
                }
            case let code where code & 0x07 == BPF.jmp:
                if code & 0xf0 == BPF.ja {
                    pc += Int(k)
                    continue
                }
                let operand = code & BPF.x != 0 ? x : k
                let holds: Bool
                switch code & 0xf0 {
                case BPF.jeq: holds = a == operand
                case BPF.jgt: holds = a > operand
                case BPF.jge: holds = a >= operand
                default: return 0
                }
                pc += Int(holds ? instruction.jumpIfTrue : instruction.jumpIfFalse)
            default:
                return 0
            }
        }
        return 0
    }
}
#endif
