import NIOCore

#if canImport(Glibc)
import Glibc
#endif

/// One client's connection through the proxy and its upstream connection: both sockets on one
/// event loop, each direction shaped by a ``DirectionShaper`` and the faults that act on it. All of
/// it runs on that event loop; the proxy reaches it through `eventLoop.execute`.
///
/// Bytes read wait in `pending` until they go on the wire: with a bandwidth, slice by slice on the
/// ``LinkWire`` the listener's connections share, each when the wire's credit lets it leave (the
/// next is asked for when that one may leave), so flows share the link's rate and a change of
/// conditions applies from the next slice; without one, at once. Credit is kept against the
/// monotonic clock, not against when the timer ran: a late timer puts every slice that is due on
/// the wire at once, so the link never idles for a timer's lateness. On the wire a slice is given
/// its delivery time (delay, jitter, loss) and waits in `queue` until then.
///
/// A side's end travels the same way as its bytes: its FIN (a half-close: the other way goes on)
/// is passed on as a FIN once the last byte before it is delivered, never ahead of it; a socket
/// gone (closed or reset) closes the other side once its bytes are delivered. Both sides are
/// closed when both ways have ended. A link that carries nothing (100% loss) holds bytes and ends
/// alike, and connects no upstream, until its loss is lowered.
final class ConditionedConnection {
    enum Side { case client, server }

    /// How the source of a direction ended.
    enum SourceEnd: Int, Comparable {
        /// Its FIN was read: a half-close, the other way may go on.
        case finished = 1
        /// Its socket is closed or was reset: nothing more goes to it.
        case gone = 2

        static func < (a: SourceEnd, b: SourceEnd) -> Bool { a.rawValue < b.rawValue }
    }

    /// One direction: bytes not yet on the wire, slices waiting for their delivery time, and the
    /// timers of both.
    struct Direction {
        var shaper: DirectionShaper
        /// Read, not yet on the wire, oldest first.
        var pending = CircularBuffer<(buffer: ByteBuffer, readAt: NIODeadline)>()
        /// On the wire or on their way, each with its delivery time.
        var queue = CircularBuffer<(at: NIODeadline, readAt: NIODeadline, buffer: ByteBuffer)>()
        /// Everything read and not delivered: pending and queued.
        var queuedBytes = 0
        var timer: Scheduled<Void>?
        /// Puts the next slices on the wire when this direction's last one may leave.
        var wireTimer: Scheduled<Void>?
        /// How its source ended, if it has.
        var sourceEnd: SourceEnd?
        /// The end passed on to the destination: a FIN (`finished`) or a close (`gone`).
        var passedEnd: SourceEnd?
        var limitReached = false
        var statistics = DirectionStatistics()
        /// When a slicer's last slice is delivered: the next read's slices come no earlier.
        var lastSliceAt: Duration?

        /// Nothing read is waiting, on the wire or before it.
        var isEmpty: Bool { pending.isEmpty && queue.isEmpty }
    }

    /// More than this queued in a direction stops reading its source until half of it is delivered.
    static let highWater = 1 << 20

    let id: Int
    let eventLoop: any EventLoop
    private let start: NIODeadline
    private var faults: [NamedFault]
    private var upstream: Direction
    private var downstream: Direction
    /// The listener's wires, shared by its connections.
    private let sharedWires: (upstream: LinkWire, downstream: LinkWire)
    /// This connection's own, for ``LinkConditions/bandwidthPerConnection``.
    private let ownWires = (upstream: LinkWire(), downstream: LinkWire())
    private var bandwidthPerConnection: Bool
    private var client: RelayHandler?
    private var server: RelayHandler?
    /// The timers of faults that act on the whole connection (reset_peer, timeout's close), armed
    /// again when the faults change.
    private var faultTimers: [Scheduled<Void>] = []
    /// When each timeout fault came into force for this connection: its close counts from then,
    /// however often other settings change.
    private var timeoutSince: [String: NIODeadline] = [:]
    /// Closes passed on later (slow_close), never cancelled by a change of settings.
    private var closeTimers: [Scheduled<Void>] = []
    /// reset_peer is resetting both sides: a side's close is not passed on.
    private var resetting = false
    /// A connect delay's timer, until the upstream is connected to.
    private var connectTimer: Scheduled<Void>?
    /// The upstream is not connected yet, nor has it failed.
    private var upstreamPending = true
    /// The upstream's connect, held while the link carries nothing.
    private var heldConnect: (() -> Void)?
    private var finished = false
    private let onFinish: (ConnectionStatistics) -> Void

    init(
        id: Int, eventLoop: any EventLoop, conditions: LinkConditions, faults: [NamedFault],
        wires: (upstream: LinkWire, downstream: LinkWire) = (LinkWire(), LinkWire()),
        onFinish: @escaping (ConnectionStatistics) -> Void
    ) {
        self.id = id
        self.eventLoop = eventLoop
        start = .now()
        self.faults = faults
        sharedWires = wires
        bandwidthPerConnection = conditions.bandwidthPerConnection
        let roundTrip = conditions.upstream.delay + conditions.downstream.delay
        upstream = Direction(
            shaper: DirectionShaper(
                conditions.upstream, roundTripDelay: roundTrip, seed: conditions.seed &+ UInt64(id) &* 2))
        downstream = Direction(
            shaper: DirectionShaper(
                conditions.downstream, roundTripDelay: roundTrip, seed: conditions.seed &+ UInt64(id) &* 2 &+ 1))
        self.onFinish = onFinish
    }

    // MARK: Wiring

    func attach(client handler: RelayHandler) {
        client = handler
        armConnectionFaults()
    }

    /// Nothing is relayed until `timer` connects the upstream (a connect delay); the timer is
    /// cancelled if the connection ends first.
    func holdUntilConnected(_ timer: Scheduled<Void>) {
        connectTimer = timer
    }

    /// Whether the connection has not finished.
    var isOpen: Bool { !finished }

    /// Connects the upstream with `connect` once the link carries packets: at once, or when its
    /// 100% loss is lowered (a dead link lets no connection through). Not once the connection has
    /// finished.
    func connectUpstream(_ connect: @escaping () -> Void) {
        connectTimer = nil
        guard !finished else { return }
        if carriesNothing {
            heldConnect = connect
        } else {
            connect()
        }
    }

    /// The upstream connection is up: bytes may flow, what the client sent meanwhile (and its FIN)
    /// first.
    func attach(server handler: RelayHandler) {
        connectTimer = nil
        upstreamPending = false
        guard !finished else {
            handler.close()
            return
        }
        server = handler
        pump(.upstream)
        armTimer(.upstream)
        passEndIfDelivered(.upstream)
        client?.resumeReading()
        handler.resumeReading()
    }

    /// The upstream could not be reached: the client's connection is closed.
    func upstreamFailed() {
        upstreamPending = false
        upstream.statistics.upstreamRefused = true
        client?.close()
        finish()
    }

    // MARK: Run-time changes

    func update(conditions: LinkConditions, faults: [NamedFault]) {
        let roundTrip = conditions.upstream.delay + conditions.downstream.delay
        upstream.shaper.change(to: conditions.upstream, roundTripDelay: roundTrip)
        downstream.shaper.change(to: conditions.downstream, roundTripDelay: roundTrip)
        bandwidthPerConnection = conditions.bandwidthPerConnection
        self.faults = faults
        for timer in faultTimers { timer.cancel() }
        faultTimers = []
        armConnectionFaults()
        // A timeout removed, or a 100% loss lowered, releases what it held: the queued bytes on
        // their schedule, what was read meanwhile onto the wire at the link's rate, a FIN after
        // them, and reads. New conditions apply from the next slice that goes on the wire.
        for direction in LinkDirection.allCases {
            armTimer(direction)
            pump(direction)
            passEndIfDelivered(direction)
        }
        if !carriesNothing, let connect = heldConnect {
            heldConnect = nil
            connect()
        }
        client?.resumeReading()
        server?.resumeReading()
    }

    func snapshot() -> ConnectionStatistics {
        ConnectionStatistics(id: id, upstream: upstream.statistics, downstream: downstream.statistics, isOpen: isOpen)
    }

    // MARK: Data

    /// Whether `side` may read more: the other side is there and writable, and not too much is queued.
    func mayRead(_ side: Side) -> Bool {
        guard let destination = side == .client ? server : client, destination.isWritable else { return false }
        // A held direction (timeout) reads on into its queue, up to the same mark: what a sender
        // sent before a close is then read, and the close is a FIN, not a reset for unread data.
        return self[side == .client ? .upstream : .downstream].queuedBytes < Self.highWater
    }

    func received(_ buffer: ByteBuffer, from side: Side) {
        let direction: LinkDirection = side == .client ? .upstream : .downstream
        let now = NIODeadline.now()
        self[direction].statistics.bytesRead += buffer.readableBytes
        if self[direction].limitReached { return }
        var buffer = buffer
        if let limit = limit(direction) {
            let allowed = max(0, limit - self[direction].statistics.bytesScheduled)
            if buffer.readableBytes >= allowed {
                buffer = buffer.getSlice(at: buffer.readerIndex, length: allowed) ?? ByteBuffer()
                self[direction].limitReached = true
            }
        }
        let count = buffer.readableBytes
        self[direction].statistics.bytesScheduled += count
        if isDead(direction) { self[direction].statistics.chunksHeldBack += 1 }
        if let destination = self.destination(of: direction), self[direction].shaper.isTransparent,
            slicer(direction) == nil, self[direction].isEmpty, !holds(direction)
        {
            if count > 0 {
                destination.write(buffer)
                self[direction].statistics.delivered(count, delay: .zero)
            }
            passEndIfDelivered(direction)
            return
        }
        // Also what the client sends (as a FIN makes NIO read it) before the upstream is connected.
        if count > 0 {
            self[direction].pending.append((buffer, now))
            self[direction].queuedBytes += count
        }
        pump(direction)
        passEndIfDelivered(direction)
    }

    // MARK: The wire

    /// The wire `direction`'s slices go on: the listener's, or this connection's own.
    private func wire(_ direction: LinkDirection) -> LinkWire {
        let wires = bandwidthPerConnection ? ownWires : sharedWires
        return direction == .upstream ? wires.upstream : wires.downstream
    }

    /// Puts what waits in `direction` on its way, unless a timeout holds it or its next slice is
    /// reserved already: without a bandwidth all of it at once; with one, every slice the wire's
    /// credit lets leave by now, then one more, and the rest when that one may leave, at the
    /// conditions in force then.
    ///
    /// `resuming` is the deadline of the wire timer that called: the bytes have waited since then
    /// (or since they were read, if later), however late the timer ran, so the credit that accrued
    /// meanwhile is theirs. Otherwise they wait from now.
    private func pump(_ direction: LinkDirection, resuming deadline: NIODeadline? = nil) {
        guard self[direction].wireTimer == nil, !holds(direction), !self[direction].pending.isEmpty,
            destination(of: direction) != nil
        else { return }
        let now = NIODeadline.now()
        guard let bandwidth = self[direction].shaper.conditions.bandwidth, bandwidth > 0 else {
            while let chunk = self[direction].pending.popFirst() {
                let parts = self[direction].shaper.schedule(chunk.buffer.readableBytes, at: Self.duration(now - start))
                enqueue(parts, of: chunk.buffer, readAt: chunk.readAt, in: direction)
            }
            armTimer(direction)
            return
        }
        let wire = wire(direction)
        let sliceSize = self[direction].shaper.sliceSize
        while var head = self[direction].pending.popFirst() {
            let size = min(sliceSize, head.buffer.readableBytes)
            guard let slice = head.buffer.readSlice(length: size) else { break }
            if head.buffer.readableBytes > 0 { self[direction].pending.prepend(head) }
            let waitingSince = deadline.map { max($0, head.readAt) } ?? now
            let leaves = wire.reserve(size, bandwidth: bandwidth, waitingSince: waitingSince)
            let at = self[direction].shaper.delivery(ofSliceSentAt: Self.duration(leaves - start), size: size)
            enqueue([DirectionShaper.Part(at: at, count: size)], of: slice, readAt: head.readAt, in: direction)
            if leaves > now {
                // Not due yet: the next slice is asked for when this one may leave.
                self[direction].wireTimer = eventLoop.assumeIsolated().scheduleTask(deadline: leaves) { [self] in
                    self[direction].wireTimer = nil
                    pump(direction, resuming: leaves)
                }
                break
            }
        }
        armTimer(direction)
    }

    /// Queues `buffer`'s bytes for delivery as `parts` say (cut again by a slicer fault).
    private func enqueue(
        _ parts: [DirectionShaper.Part], of buffer: ByteBuffer, readAt: NIODeadline, in direction: LinkDirection
    ) {
        var parts = parts
        if let slicer = slicer(direction) {
            var lastSliceAt = self[direction].lastSliceAt
            parts = Self.slice(parts, slicer, after: &lastSliceAt, random: &self[direction].shaper)
            self[direction].lastSliceAt = lastSliceAt
        }
        var buffer = buffer
        for part in parts {
            guard let slice = buffer.readSlice(length: part.count) else { break }
            self[direction].queue.append((start + TimeAmount(part.at), readAt, slice))
        }
    }

    /// The side whose reads feed `direction`.
    private func source(of direction: LinkDirection) -> RelayHandler? {
        direction == .upstream ? client : server
    }

    /// The side `direction` delivers to (`nil` before the upstream is connected, or once it is gone).
    private func destination(of direction: LinkDirection) -> RelayHandler? {
        direction == .upstream ? server : client
    }

    /// `side` sent its FIN: what it sent before goes on, then the FIN; the other way stays open.
    func inputClosed(_ side: Side) {
        let direction: LinkDirection = side == .client ? .upstream : .downstream
        guard self[direction].sourceEnd == nil else { return }
        self[direction].sourceEnd = .finished
        passEndIfDelivered(direction)
    }

    /// `side`'s socket is gone (closed, reset, or closed by NIO once both its ways had ended): what
    /// it sent goes on, then the other side is closed.
    func closed(_ side: Side) {
        let direction: LinkDirection = side == .client ? .upstream : .downstream
        self[direction].sourceEnd = .gone
        // What was on its way to the side that left has nowhere to go.
        let opposite: LinkDirection = direction == .upstream ? .downstream : .upstream
        self[opposite].timer?.cancel()
        self[opposite].timer = nil
        self[opposite].wireTimer?.cancel()
        self[opposite].wireTimer = nil
        self[opposite].queue.removeAll()
        self[opposite].pending.removeAll()
        self[opposite].queuedBytes = 0
        if side == .client { client = nil } else { server = nil }
        passEndIfDelivered(direction)
        // A client gone before the upstream answered: worth connecting only for what it sent.
        if client == nil && server == nil && !(upstreamPending && !upstream.isEmpty) { finish() }
    }

    func writabilityChanged() {
        client?.resumeReading()
        server?.resumeReading()
    }

    // MARK: Delivery

    private func armTimer(_ direction: LinkDirection) {
        guard self[direction].timer == nil, !holds(direction), let head = self[direction].queue.first else { return }
        self[direction].timer = eventLoop.assumeIsolated().scheduleTask(deadline: head.at) { [self] in
            self[direction].timer = nil
            deliverDue(direction)
        }
    }

    private func deliverDue(_ direction: LinkDirection) {
        guard let destination = direction == .upstream ? server : client, !holds(direction) else { return }
        let now = NIODeadline.now()
        var wrote = false
        while let head = self[direction].queue.first, head.at <= now {
            self[direction].queue.removeFirst()
            self[direction].queuedBytes -= head.buffer.readableBytes
            self[direction].statistics.delivered(head.buffer.readableBytes, delay: Self.duration(now - head.readAt))
            destination.write(head.buffer, flush: false)
            wrote = true
        }
        if wrote { destination.flush() }
        armTimer(direction)
        if self[direction].queuedBytes < Self.highWater / 2 { source(of: direction)?.resumeReading() }
        passEndIfDelivered(direction)
    }

    // MARK: Ends

    /// What to do once everything read in a direction is delivered.
    enum EndAction: Equatable {
        /// Nothing (yet).
        case none
        /// Close the destination's output: the source's FIN, passed on.
        case finish
        /// Close the destination: the source is gone.
        case close
        /// Close both sides: a data limit was reached.
        case closeBoth
    }

    /// What passes on after the bytes of a direction: its end once they are all delivered (never
    /// ahead of them), and not while the link carries nothing (a dead link carries no FIN either).
    static func endAction(
        isEmpty: Bool, carriesNothing: Bool, limitReached: Bool, sourceEnd: SourceEnd?, passedEnd: SourceEnd?
    ) -> EndAction {
        guard isEmpty, !carriesNothing else { return .none }
        if limitReached { return passedEnd == .gone ? .none : .closeBoth }
        guard let sourceEnd, passedEnd.map({ $0 < sourceEnd }) ?? true else { return .none }
        return sourceEnd == .finished ? .finish : .close
    }

    /// Passes `direction`'s end on to its destination when ``endAction`` says it is due.
    private func passEndIfDelivered(_ direction: LinkDirection) {
        guard destination(of: direction) != nil else { return }
        let action = Self.endAction(
            isEmpty: self[direction].isEmpty, carriesNothing: isDead(direction),
            limitReached: self[direction].limitReached, sourceEnd: self[direction].sourceEnd,
            passedEnd: self[direction].passedEnd)
        guard action != .none else { return }
        self[direction].passedEnd = action == .closeBoth ? .gone : self[direction].sourceEnd
        close(after: direction, action)
    }

    /// Passes an end on to the destination of `direction` (after a slow close's delay): a FIN, a
    /// close, or for a data limit a close of both. Once both ways have passed a FIN, both sides
    /// are closed (each has sent and been sent everything).
    private func close(after direction: LinkDirection, _ action: EndAction) {
        if resetting { return }
        let destination = self.destination(of: direction)
        let delay = slowCloseDelay(direction)
        let act = { [self] in
            switch action {
            case .none:
                break
            case .finish:
                destination?.closeOutput()
                if upstream.passedEnd != nil && downstream.passedEnd != nil {
                    client?.close()
                    server?.close()
                }
            case .close:
                destination?.close()
            case .closeBoth:
                client?.close()
                server?.close()
            }
        }
        if delay > .zero {
            closeTimers.append(eventLoop.assumeIsolated().scheduleTask(in: TimeAmount(delay)) { act() })
        } else {
            act()
        }
    }

    private func armConnectionFaults() {
        timeoutSince = timeoutSince.filter { name, _ in faults.contains { $0.name == name } }
        for named in faults {
            switch named.fault {
            case .resetPeer(let after):
                let deadline = start + TimeAmount(after)
                faultTimers.append(
                    eventLoop.assumeIsolated().scheduleTask(deadline: deadline) { [self] in
                        // Both sides get the RST: the first one's close must not pass on as a FIN.
                        resetting = true
                        client?.reset()
                        server?.reset()
                    })
            case .timeout(let after?) where after > .zero:
                let since = timeoutSince[named.name] ?? .now()
                timeoutSince[named.name] = since
                faultTimers.append(
                    eventLoop.assumeIsolated().scheduleTask(deadline: since + TimeAmount(after)) { [self] in
                        // The link is cut: not held up by a reader that stopped reading.
                        client?.closeNow()
                        server?.closeNow()
                    })
            default:
                break
            }
        }
    }

    private func finish() {
        guard !finished else { return }
        finished = true
        connectTimer?.cancel()
        heldConnect = nil
        upstream.timer?.cancel()
        downstream.timer?.cancel()
        upstream.wireTimer?.cancel()
        downstream.wireTimer?.cancel()
        for timer in faultTimers + closeTimers { timer.cancel() }
        faultTimers = []
        closeTimers = []
        onFinish(snapshot())
    }

    // MARK: Faults

    private func acting(_ direction: LinkDirection) -> [LinkFault] {
        faults.filter { $0.directions.contains(direction) }.map(\.fault)
    }

    /// Whether `direction` delivers nothing for now: a timeout fault, or a link that carries
    /// nothing (its bytes wait for the loss to be lowered, as TCP's retransmissions would).
    private func holds(_ direction: LinkDirection) -> Bool {
        isDead(direction) || acting(direction).contains { if case .timeout = $0 { true } else { false } }
    }

    /// Whether `direction` loses every packet.
    private func isDead(_ direction: LinkDirection) -> Bool {
        self[direction].shaper.conditions.loss >= 1
    }

    /// Whether the link carries no connection: a handshake needs both ways.
    private var carriesNothing: Bool { isDead(.upstream) || isDead(.downstream) }

    private func limit(_ direction: LinkDirection) -> Int? {
        acting(direction).compactMap { if case .limitData(let bytes) = $0 { max(0, bytes) } else { nil } }.min()
    }

    private func slicer(_ direction: LinkDirection) -> (average: Int, variation: Int, delay: Duration)? {
        for fault in acting(direction) {
            if case .slicer(let average, let variation, let delay) = fault {
                return (max(1, average), max(0, variation), delay)
            }
        }
        return nil
    }

    private func slowCloseDelay(_ direction: LinkDirection) -> Duration {
        acting(direction).compactMap { if case .slowClose(let delay) = $0 { delay } else { nil } }.max() ?? .zero
    }

    /// Cuts each part into slices of `average` ± `variation` bytes, `delay` apart.
    /// A read's slices follow the previous read's (`after`, updated), as toxiproxy's slicer sends
    /// one chunk's slices before the next chunk's: a slicer limits the rate however data is read.
    static func slice(
        _ parts: [DirectionShaper.Part], _ slicer: (average: Int, variation: Int, delay: Duration),
        after lastSliceAt: inout Duration?, random: inout DirectionShaper
    ) -> [DirectionShaper.Part] {
        var out: [DirectionShaper.Part] = []
        var at = lastSliceAt.map { $0 + slicer.delay } ?? .zero
        for part in parts {
            at = max(at, part.at)
            var remaining = part.count
            while remaining > 0 {
                let size = min(remaining, random.drawSliceSize(average: slicer.average, variation: slicer.variation))
                out.append(.init(at: at, count: size))
                remaining -= size
                if remaining > 0 { at += slicer.delay }
            }
        }
        if let last = out.last { lastSliceAt = last.at }
        return out
    }

    private subscript(direction: LinkDirection) -> Direction {
        get { direction == .upstream ? upstream : downstream }
        _modify {
            if direction == .upstream { yield &upstream } else { yield &downstream }
        }
    }
}

extension TimeAmount {
    init(_ duration: Duration) { self = .nanoseconds(duration.nanoseconds) }
}

extension ConditionedConnection {
    static func duration(_ amount: TimeAmount) -> Duration { .nanoseconds(amount.nanoseconds) }
}
