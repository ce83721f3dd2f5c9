import NIOCore
import NIOPosix
import NetReachSystem

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A TCP proxy that makes a link bad on purpose: the root-free stand-in for `tc netem`, in the
/// manner of Apple's Network Link Conditioner and Shopify's toxiproxy. Start one in front of a
/// test server, point the client at ``port``, and change its conditions while the test runs.
///
/// ```swift
/// let proxy = try await ConditionedProxy.start(upstreamHost: "127.0.0.1", upstreamPort: server.port,
///                                              conditions: LinkProfile.threeG.conditions)
/// // ... the client talks to 127.0.0.1:\(proxy.port) ...
/// try proxy.setConditions(LinkProfile.loss100.conditions)     // every connection, from now on
/// try proxy.addFault(.resetPeer(after: .milliseconds(50)), directions: [.downstream], name: "reset")
/// try await proxy.stop()
/// ```
///
/// The listener is the link: its connections share each direction's bandwidth, as flows share a
/// real link (``LinkConditions/bandwidthPerConnection`` gives each its own). Conditions and faults
/// apply to open connections as well as new ones, from the next slice that goes on the wire.
///
/// A half-close is relayed as one: a side's FIN reaches the other side after its last byte, and
/// the other way goes on. While the loss is 100% (``LinkProfile/loss100``) the listener answers no
/// connect and open connections hold their bytes.
public final class ConditionedProxy: Sendable {
    /// The address it listens on.
    public let host: String
    /// The port it listens on.
    public let port: Int
    /// Where it connects each client to.
    public let upstreamHost: String
    /// The upstream's port.
    public let upstreamPort: Int

    private let group: any EventLoopGroup
    private let ownsGroup: Bool
    /// The listening socket; `nil` while the listener is down.
    private let listener: Locked<(any Channel)?>
    private let state: ProxyState

    private init(
        host: String, port: Int, upstreamHost: String, upstreamPort: Int, group: any EventLoopGroup,
        ownsGroup: Bool, listener: any Channel, state: ProxyState
    ) {
        self.host = host
        self.port = port
        self.upstreamHost = upstreamHost
        self.upstreamPort = upstreamPort
        self.group = group
        self.ownsGroup = ownsGroup
        self.listener = Locked(listener)
        self.state = state
    }

    /// Listens on `host:port` (port 0: a free one) and relays each connection to the upstream
    /// under `conditions`. Throws ``ConditionerError/cannotListen(_:_:)`` when the address is taken
    /// or invalid, ``ConditionerError/invalidConditions(_:)`` or ``ConditionerError/invalidFault(_:)``
    /// for values out of range. `connectionFinished` is called (on an event loop) with each
    /// connection's statistics when it ends.
    public static func start(
        host: String = "127.0.0.1", port: Int = 0, upstreamHost: String, upstreamPort: Int,
        conditions: LinkConditions = .none, faults: [NamedFault] = [], group: (any EventLoopGroup)? = nil,
        connectionFinished: (@Sendable (ConnectionStatistics) -> Void)? = nil
    ) async throws(ConditionerError) -> ConditionedProxy {
        guard (0...65535).contains(port) else { throw .cannotListen("\(host):\(port)", "not a port") }
        guard !upstreamHost.isEmpty, (1...65535).contains(upstreamPort) else {
            throw .invalidUpstream("\(upstreamHost):\(upstreamPort)")
        }
        try conditions.validate()
        for named in faults { try named.validate() }
        let ownsGroup = group == nil
        let group = group ?? MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let state = ProxyState(conditions: conditions, faults: faults, connectionFinished: connectionFinished)
        do {
            let listener = try await bind(
                host: host, port: port, group: group, upstreamHost: upstreamHost,
                upstreamPort: upstreamPort, state: state)
            let bound = listener.localAddress?.port ?? port
            return ConditionedProxy(
                host: host, port: bound, upstreamHost: upstreamHost, upstreamPort: upstreamPort,
                group: group, ownsGroup: ownsGroup, listener: listener, state: state)
        } catch {
            if ownsGroup { try? await group.shutdownGracefully() }
            throw .cannotListen("\(host):\(port)", Self.reason(error))
        }
    }

    private static func bind(
        host: String, port: Int, group: any EventLoopGroup, upstreamHost: String,
        upstreamPort: Int, state: ProxyState
    ) async throws -> any Channel {
        try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .serverChannelOption(.backlog, value: 256)
            // Before it listens: no connection gets through a link that carries nothing.
            .serverChannelInitializer { listener in
                DeadLinkFilter.apply(carriesNothing: state.current.conditions.carriesNothing, to: listener)
            }
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelOption(.recvAllocator, value: Self.reads)
            // A FIN closes the input only: the other way goes on until its own FIN (half-closure).
            .childChannelOption(.allowRemoteHalfClosure, value: true)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try Self.accept(channel, upstreamHost: upstreamHost, upstreamPort: upstreamPort, state: state)
                }
            }
            .bind(host: host, port: port).get()
    }

    /// Reads grow up to 256 KiB (NIO's default stops at 64 KiB): a bulk transfer then takes a
    /// quarter of the read and write calls; small messages still get small buffers.
    static let reads = AdaptiveRecvByteBufferAllocator(minimum: 64, initial: 2048, maximum: 256 << 10)

    /// `host:port`, with an IPv6 host in brackets: `[::1]:8080`.
    package static func address(_ host: String, _ port: Int) -> String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    /// Why a bind failed, as a person reads it: `Address already in use (errno 98)`.
    static func reason(_ error: any Error) -> String {
        if let io = error as? IOError { return "\(String(cString: strerror(io.errnoCode))) (errno \(io.errnoCode))" }
        return "\(error)"
    }

    /// Whether the listener accepts connections (it is not down).
    public var isListening: Bool { listener.withLock { $0 != nil } }

    /// Takes the listener down: stops listening (a client's connect is refused) and closes every
    /// open connection, as toxiproxy does when a proxy is disabled. Conditions, faults and
    /// statistics stay. Does nothing if it is down already.
    public func takeDown() async {
        let channel = listener.withLock { channel in
            defer { channel = nil }
            return channel
        }
        try? await channel?.close()
        await state.closeAll()
    }

    /// Brings the listener up again on the same address and port. Throws
    /// ``ConditionerError/cannotListen(_:_:)`` if the port was taken meanwhile. Does nothing if it
    /// is up.
    public func bringUp() async throws(ConditionerError) {
        guard !isListening else { return }
        do {
            let channel = try await Self.bind(
                host: host, port: port, group: group, upstreamHost: upstreamHost,
                upstreamPort: upstreamPort, state: state)
            let raced = listener.withLock { current -> Bool in
                if current != nil { return true }
                current = channel
                return false
            }
            if raced { try? await channel.close() }
        } catch {
            throw .cannotListen("\(host):\(port)", Self.reason(error))
        }
    }

    /// The conditions now in force.
    public var conditions: LinkConditions { state.current.conditions }

    /// The faults now in force.
    public var faults: [NamedFault] { state.current.faults }

    /// Changes the conditions, for open connections too. Throws
    /// ``ConditionerError/invalidConditions(_:)`` (and changes nothing) for values out of range.
    public func setConditions(_ conditions: LinkConditions) throws(ConditionerError) {
        try conditions.validate()
        state.change { $0.conditions = conditions }
        guard let channel = listener.withLock({ $0 }) else { return }
        // On the listener's loop, from the settings then in force: the last change wins.
        channel.eventLoop.execute { [state] in
            DeadLinkFilter.apply(carriesNothing: state.current.conditions.carriesNothing, to: channel)
        }
    }

    /// Adds a fault under `name`, acting on `directions`. Throws
    /// ``ConditionerError/duplicateFault(_:)`` if that name is taken,
    /// ``ConditionerError/invalidFault(_:)`` for values out of range.
    public func addFault(
        _ fault: LinkFault, directions: Set<LinkDirection> = Set(LinkDirection.allCases),
        name: String
    ) throws(ConditionerError) {
        try addFault(NamedFault(name: name, fault: fault, directions: directions))
    }

    /// Adds a named fault; throws as ``addFault(_:directions:name:)`` does.
    public func addFault(_ named: NamedFault) throws(ConditionerError) {
        try named.validate()
        try state.changeThrowing { settings throws(ConditionerError) in
            guard !settings.faults.contains(where: { $0.name == named.name }) else { throw .duplicateFault(named.name) }
            settings.faults.append(named)
        }
    }

    /// Removes the fault named `name`; throws ``ConditionerError/noSuchFault(_:)`` if there is none.
    public func removeFault(named name: String) throws(ConditionerError) {
        try state.changeThrowing { settings throws(ConditionerError) in
            guard settings.faults.contains(where: { $0.name == name }) else { throw .noSuchFault(name) }
            settings.faults.removeAll { $0.name == name }
        }
    }

    /// Every connection so far, open ones as they are now.
    public func statistics() async -> [ConnectionStatistics] {
        await state.statistics()
    }

    /// Stops listening and closes every connection; the proxy cannot be brought up again.
    public func stop() async throws {
        await takeDown()
        if ownsGroup { try await group.shutdownGracefully() }
    }

    /// Sets up one accepted client: its handler now, the upstream connection on the same loop.
    private static func accept(
        _ channel: any Channel, upstreamHost: String, upstreamPort: Int, state: ProxyState
    ) throws {
        let settings = state.current
        let id = state.nextID()
        let connection = ConditionedConnection(
            id: id, eventLoop: channel.eventLoop, conditions: settings.conditions,
            faults: settings.faults, wires: state.wires
        ) { statistics in state.finished(statistics) }
        let clientHandler = RelayHandler(side: .client, connection: connection)
        try channel.pipeline.syncOperations.addHandler(clientHandler)
        connection.attach(client: clientHandler)
        state.register(connection, channel: channel)
        let loop = channel.eventLoop
        let bound = NIOLoopBound(connection, eventLoop: loop)
        let delay = settings.conditions.connectDelay
        // Not over a link that carries nothing (a connection that came in before its loss rose):
        // the connection holds the connect until the loss is lowered.
        let connectUpstream = {
            bound.value.connectUpstream { connect(bound, upstreamHost: upstreamHost, upstreamPort: upstreamPort) }
        }
        guard delay > .zero else {
            connectUpstream()
            return
        }
        // A slow name lookup: the client waits before the proxy even tries the upstream.
        let timer = loop.assumeIsolated().scheduleTask(in: TimeAmount(delay)) { connectUpstream() }
        connection.holdUntilConnected(timer)
    }

    private static func connect(_ bound: NIOLoopBound<ConditionedConnection>, upstreamHost: String, upstreamPort: Int) {
        let loop = bound.value.eventLoop
        ClientBootstrap(group: loop)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelOption(.allowRemoteHalfClosure, value: true)
            .channelOption(.recvAllocator, value: Self.reads)
            .channelInitializer { upstream in
                upstream.eventLoop.makeCompletedFuture {
                    // It attaches itself to the connection once the upstream is connected.
                    try upstream.pipeline.syncOperations.addHandler(
                        RelayHandler(side: .server, connection: bound.value))
                }
            }
            .connect(host: upstreamHost, port: upstreamPort)
            .assumeIsolated()
            .whenFailure { _ in bound.value.upstreamFailed() }
    }
}

/// What can go wrong setting a conditioner up or changing it.
public enum ConditionerError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The listening address is taken, not an address, or not allowed.
    case cannotListen(String, String)
    /// The upstream is not a host and port.
    case invalidUpstream(String)
    /// A value of the conditions is out of range.
    case invalidConditions(String)
    /// A value of a fault is out of range.
    case invalidFault(String)
    /// A fault of that name exists already.
    case duplicateFault(String)
    /// No fault has that name.
    case noSuchFault(String)

    public var description: String {
        switch self {
        case .cannotListen(let address, let why): "cannot listen on \(address): \(why)"
        case .invalidUpstream(let upstream): "not an upstream host:port: \(upstream)"
        case .invalidConditions(let why): "invalid conditions: \(why)"
        case .invalidFault(let why): "invalid fault: \(why)"
        case .duplicateFault(let name): "a fault named \(name) exists already"
        case .noSuchFault(let name): "no fault is named \(name)"
        }
    }
}

/// The proxy's shared state: settings, the open connections (each reached on its event loop)
/// and the statistics of closed ones.
final class ProxyState: Sendable {
    struct Settings: Sendable {
        var conditions: LinkConditions
        var faults: [NamedFault]
    }

    private struct Open: Sendable {
        var eventLoop: any EventLoop
        var connection: NIOLoopBound<ConditionedConnection>
        var channel: any Channel
    }

    private struct Contents {
        var settings: Settings
        var open: [Int: Open] = [:]
        var finished: [ConnectionStatistics] = []
        var lastID = 0
    }

    private let contents: Locked<Contents>
    private let connectionFinished: (@Sendable (ConnectionStatistics) -> Void)?
    /// The listener's link, each direction's wire shared by its connections.
    let wires = (upstream: LinkWire(), downstream: LinkWire())

    init(
        conditions: LinkConditions, faults: [NamedFault],
        connectionFinished: (@Sendable (ConnectionStatistics) -> Void)?
    ) {
        contents = Locked(Contents(settings: Settings(conditions: conditions, faults: faults)))
        self.connectionFinished = connectionFinished
    }

    var current: Settings { contents.withLock { $0.settings } }

    func nextID() -> Int {
        contents.withLock {
            $0.lastID += 1
            return $0.lastID
        }
    }

    func register(_ connection: ConditionedConnection, channel: any Channel) {
        let open = Open(
            eventLoop: connection.eventLoop, connection: NIOLoopBound(connection, eventLoop: connection.eventLoop),
            channel: channel)
        contents.withLock { $0.open[connection.id] = open }
    }

    func finished(_ statistics: ConnectionStatistics) {
        contents.withLock {
            $0.open[statistics.id] = nil
            $0.finished.append(statistics)
        }
        connectionFinished?(statistics)
    }

    func change(_ body: (inout Settings) -> Void) {
        changeThrowing(body)
    }

    /// Changes the settings under the lock (nothing changes if `body` throws), then passes them to
    /// every open connection on its event loop.
    func changeThrowing<Failure: Error>(_ body: (inout Settings) throws(Failure) -> Void) throws(Failure) {
        let outcome: Result<(Settings, [Open]), Failure> = contents.withLock { contents in
            var changed = contents.settings
            do throws(Failure) { try body(&changed) } catch { return .failure(error) }
            contents.settings = changed
            return .success((changed, Array(contents.open.values)))
        }
        let (settings, open) = try outcome.get()
        for connection in open {
            connection.eventLoop.execute {
                connection.connection.value.update(conditions: settings.conditions, faults: settings.faults)
            }
        }
    }

    func statistics() async -> [ConnectionStatistics] {
        let (finished, open) = contents.withLock { ($0.finished, Array($0.open.values)) }
        var all = finished
        for connection in open {
            if let snapshot = try? await connection.eventLoop.submit({ connection.connection.value.snapshot() }).get() {
                all.append(snapshot)
            }
        }
        return all.sorted { $0.id < $1.id }
    }

    func closeAll() async {
        let open = contents.withLock { Array($0.open.values) }
        for connection in open { try? await connection.channel.close() }
    }
}
