import FuzzSupport

@testable import NetReach

// One input is the payload of one recv() on a NETLINK_ROUTE socket: any number of nlmsghdr
// messages, as the kernel packs them (Tests/NetReachTests/Linux/Fixtures holds real ones). It goes
// through every reader the engine's thread hands such a buffer to:
//
// - notifications (`NetlinkEngine.drain`): `RtnetlinkParser.parse`, then each message into
//   `SnapshotStore.absorb(_:watching:)`, then the snapshot through `PathEvaluator.evaluate`, as
//   a monitor evaluates what the engine publishes;
// - a dump reply (`NetlinkEngine.dump`): the same parse, then the dump loop's handling of
//   NLM_F_DUMP_INTR, NLMSG_DONE, NLMSG_ERROR (ENOBUFS/EBUSY/EINTR retry, others fail) and
//   `SnapshotStore.apply`, answering the request whose sequence and port the first header names;
// - a route lookup or neighbour answer (`RouteQuery.answer`, `RouteQuery.neighbourAnswer`), on
//   the same sequence.
//
// AddressSanitizer checks that nothing reads past the buffer (libFuzzer's copy is exactly `size`
// bytes long); the properties below check what the engine relies on.

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRtnetlink(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    let results = RtnetlinkParser.parse(bytes)
    checkFraming(results, of: bytes)
    checkAlignmentIndependence(results, of: bytes)
    checkMessagesParseAlone(results, of: bytes)
    absorbAsNotifications(results)
    absorbAsDumpReply(results, of: bytes)
    readAsLookupAnswers(bytes)
    return 0
}

/// At most one framing failure, and only as the last result: after it, the next message's start
/// is unknown, so the parser must stop rather than read on from a guessed offset. Each result
/// stands for at least a 16-byte header, so a buffer cannot yield more results than headers fit.
private func checkFraming(_ results: [Result<RtnetlinkEnvelope, NetlinkParseError>], of bytes: UnsafeRawBufferPointer) {
    expect(bytes.isEmpty == results.isEmpty, "\(results.count) results from \(bytes.count) bytes")
    expect(
        results.count <= bytes.count / RtnetlinkParser.headerSize + 1,
        "\(results.count) results from \(bytes.count) bytes")
    for (index, result) in results.enumerated() {
        guard case .failure(let error) = result, error.breaksFraming else { continue }
        expect(index == results.count - 1, "parsing went on after a framing failure (\(error)) at result \(index)")
    }
}

/// The engine's buffer is 8-byte aligned, a test's array may not be, and the kernel only aligns to 4:
/// every load must be unaligned-safe and give the same answer at any address.
private func checkAlignmentIndependence(
    _ results: [Result<RtnetlinkEnvelope, NetlinkParseError>], of bytes: UnsafeRawBufferPointer
) {
    let shifted = UnsafeMutableRawBufferPointer.allocate(byteCount: bytes.count + 3, alignment: 8)
    defer { shifted.deallocate() }
    let copy = UnsafeMutableRawBufferPointer(rebasing: shifted[3..<(bytes.count + 3)])
    if let base = bytes.baseAddress, !bytes.isEmpty { copy.baseAddress!.copyMemory(from: base, byteCount: bytes.count) }
    let again = RtnetlinkParser.parse(UnsafeRawBufferPointer(copy))
    expect(again == results, "the parse depends on the buffer's address: \(again) against \(results)")
}

/// Messages are independent: a buffer split after its first (aligned) message parses as the first
/// part followed by the rest, error offsets counted from the rest's start. The kernel splits a dump
/// across datagrams at any message, so the engine sees both ways.
private func checkMessagesParseAlone(
    _ results: [Result<RtnetlinkEnvelope, NetlinkParseError>], of bytes: UnsafeRawBufferPointer
) {
    guard bytes.count >= RtnetlinkParser.headerSize else { return }
    let length = Int(bytes.loadU32(at: 0))
    let cut = RtnetlinkParser.align(length)
    guard length >= RtnetlinkParser.headerSize, cut < bytes.count else { return }
    let first = RtnetlinkParser.parse(UnsafeRawBufferPointer(rebasing: bytes[..<cut]))
    let rest = RtnetlinkParser.parse(UnsafeRawBufferPointer(rebasing: bytes[cut...])).map { result in
        result.mapError { error -> NetlinkParseError in
            switch error {
            case .truncatedHeader(let offset, let available):
                return .truncatedHeader(offset: offset + cut, available: available)
            case .badLength(let offset, let length, let available):
                return .badLength(offset: offset + cut, length: length, available: available)
            case .truncatedBody, .badAttribute, .badAddress:
                return error
            }
        }
    }
    expect(first.count == 1, "one message gave \(first.count) results: \(first)")
    expect(first + rest == results, "split after the first message: \(first + rest) against \(results)")
}

/// The route lookup addresses a default monitor watches, and the fixtures' gateways as the gateways
/// its last lookups named, so that coverage checks and neighbour entries can match.
private let watch = SnapshotStore.LookupWatch(
    addresses: SystemPathSource.Configuration.defaultRouteLookupAddresses + [IPAddress("10.66.0.9")!],
    gateways: [IPAddress("10.66.0.2")!, IPAddress("2001:db8:66::2")!])

/// `NetlinkEngine.drain`: every message absorbed in order, as notifications.
private func absorbAsNotifications(_ results: [Result<RtnetlinkEnvelope, NetlinkParseError>]) {
    var store = SnapshotStore()
    for case .success(let envelope) in results {
        let before = store.snapshot
        let absorbed = store.absorb(envelope.message, watching: watch)
        expect(
            absorbed.changed == (store.snapshot != before),
            "absorb(\(envelope.message)) said changed: \(absorbed.changed), but the snapshot "
                + (store.snapshot != before ? "changed" : "did not change"))
        // A changed snapshot must ask the kernel's route choice again, or a stale one is published.
        expect(
            !absorbed.changed || !absorbed.asksLookups.isEmpty,
            "absorb(\(envelope.message)) changed without asking lookups")
    }
    checkStore(store.snapshot)
    // The evaluator reads whatever the store keeps (once here: it costs more than all the rest).
    _ = PathEvaluator.evaluate(store.snapshot)
}

/// `NetlinkEngine.dump`, one datagram of it: the reply to the request whose sequence and port the
/// first header names (the kernel echoes them), other messages skipped, as the engine's loop does.
private func absorbAsDumpReply(
    _ results: [Result<RtnetlinkEnvelope, NetlinkParseError>], of bytes: UnsafeRawBufferPointer
) {
    guard bytes.count >= RtnetlinkParser.headerSize else { return }
    let sequence = bytes.loadU32(at: 8)
    let portID = bytes.loadU32(at: 12)
    var store = SnapshotStore()
    // (Whether the dump stays consistent, which the engine also tracks, decides nothing here.)
    messages: for case .success(let envelope) in results {
        guard envelope.sequence == sequence && envelope.portID == portID else { continue }
        switch envelope.message {
        case .done:
            break messages
        case .error(let code) where code != 0:
            // ENOBUFS, EBUSY and EINTR retry the dump; any other code fails the resync.
            break messages
        case let message:
            let before = store.snapshot
            let changed = store.apply(message)
            expect(
                changed == (store.snapshot != before),
                "apply(\(message)) said changed: \(changed), but the snapshot "
                    + (store.snapshot != before ? "changed" : "did not change"))
        }
    }
    checkStore(store.snapshot)
}

/// What the store may hold, whatever it was sent.
private func checkStore(_ snapshot: SystemSnapshot) {
    for (index, link) in snapshot.links { expect(index == link.index, "link \(link) kept under index \(index)") }
    for (key, address) in snapshot.addressTable { expect(key == address.key, "address \(address) kept as \(key)") }
    for route in snapshot.defaultRoutes {
        expect(route.table == SystemSnapshot.DefaultRoute.mainTable, "a default route of another table: \(route)")
    }
}

/// `RouteQuery`: the buffer as the requests socket's answer to a lookup with the first header's
/// sequence.
private func readAsLookupAnswers(_ bytes: UnsafeRawBufferPointer) {
    guard bytes.count >= RtnetlinkParser.headerSize else { return }
    let sequence = bytes.loadU32(at: 8)
    if let answer = RouteQuery.answer(in: bytes, sequence: sequence, ticksPerSecond: 100) {
        // The engine sleeps until an expiry: a negative, infinite or NaN one would spin or never wake.
        if let expiresIn = answer.expiresIn {
            expect(expiresIn > 0 && expiresIn.isFinite, "a route expiring in \(expiresIn) s")
        }
    }
    _ = RouteQuery.neighbourAnswer(in: bytes, sequence: sequence)
}
