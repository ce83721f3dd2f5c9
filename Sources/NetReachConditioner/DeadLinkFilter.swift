import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// What a listener does while its link carries nothing (100% loss either way: a handshake needs
/// both): it drops every packet that reaches it in the kernel, with a socket filter (classic BPF,
/// `SO_ATTACH_FILTER`) that accepts none. A client's SYN then gets no answer and its `connect()`
/// retransmits until it times out (about 2 minutes with Linux's defaults), as over a dead link;
/// removed when the loss is lowered, the client's next retransmission (1, 3, 7... s after its
/// first try) is answered and it connects late, as when a link comes back. No root is needed: a
/// process may filter its own sockets.
///
/// The filter acts on the listening socket only, so on packets of connections not yet
/// established; connections already accepted are held by ``ConditionedConnection`` instead.
///
/// ```swift
/// DeadLinkFilter.apply(carriesNothing: true, to: listener)   // SYNs dropped from now on
/// ```
enum DeadLinkFilter {
    /// One classic BPF instruction, laid out as the kernel's `struct sock_filter`.
    private struct Instruction {
        var code: UInt16
        var jumpIfTrue: UInt8
        var jumpIfFalse: UInt8
        var k: UInt32
    }

    /// The kernel's `struct sock_fprog`: a count and a pointer (the kernel copies the program
    /// during `setsockopt`).
    private struct Program: @unchecked Sendable {
        // @unchecked: `instructions` points at `dropEverything`, which is never written or freed.
        var count: UInt16
        var instructions: UnsafePointer<Instruction>
    }

    /// `ret #0`: accept no byte of any packet (BPF_RET | BPF_K).
    nonisolated(unsafe) private static let dropEverything: UnsafePointer<Instruction> = {
        let instruction = UnsafeMutablePointer<Instruction>.allocate(capacity: 1)
        instruction.initialize(to: Instruction(code: 0x06, jumpIfTrue: 0, jumpIfFalse: 0, k: 0))
        return UnsafePointer(instruction)
    }()

    /// Attaches the filter to `listener` (or detaches it when the link carries packets). The
    /// future fails if the socket refused the filter; detaching one that is not there (ENOENT)
    /// is what was asked.
    @discardableResult
    static func apply(carriesNothing: Bool, to listener: any Channel) -> EventLoopFuture<Void> {
        guard let options = listener as? any SocketOptionProvider else {
            return listener.eventLoop.makeSucceededVoidFuture()
        }
        if carriesNothing {
            return options.unsafeSetSocketOption(
                level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_ATTACH_FILTER),
                value: Program(count: 1, instructions: dropEverything))
        }
        return options.unsafeSetSocketOption(
            level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_DETACH_FILTER), value: CInt(0)
        ).flatMapErrorThrowing { error in
            if let error = error as? IOError, error.errnoCode == ENOENT { return }
            throw error
        }
    }
}

extension LinkConditions {
    /// Whether the link carries no packet at all one way or the other (loss 1): no connection can
    /// be made over it.
    var carriesNothing: Bool { upstream.loss >= 1 || downstream.loss >= 1 }
}
