import NIOCore
import NIOHTTP1
import NIOPosix

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A conditioned listener under a name, as the control API shows and changes it.
public struct ConditionedListener: Sendable {
    /// The name in the control API's paths (`/listeners/NAME`): letters, digits, `.`, `_`, `-`.
    public let name: String
    /// The proxy itself.
    public let proxy: ConditionedProxy

    public init(name: String, proxy: ConditionedProxy) {
        self.name = name
        self.proxy = proxy
    }
}

/// The conditioner's control API: JSON over HTTP/1.1 on loopback, to change conditioned
/// listeners while they run. `netreach condition` serves it; a test can too.
///
/// ```swift
/// let control = try await ConditionerControl.start(listeners: [ConditionedListener(name: "api", proxy: proxy)])
/// // curl -X PUT -d '{"profile":"3g"}' http://127.0.0.1:\(control.port)/listeners/api/conditions
/// try await control.stop()
/// ```
///
/// | Request | Does |
/// |---|---|
/// | `GET /listeners` | every listener: address, upstream, listening or down, profile, conditions, faults |
/// | `GET /listeners/NAME` | one listener |
/// | `PUT /listeners/NAME/conditions` | `{"profile": "3g"}`, or conditions (`{"upstream": {...}, "downstream": {...}}`) |
/// | `GET /listeners/NAME/faults` | its faults |
/// | `POST /listeners/NAME/faults` | adds one: `{"name": "cut", "direction": "downstream", "type": "limit_data", "bytes": 1000}` (201) |
/// | `DELETE /listeners/NAME/faults/FAULT` | removes one (204) |
/// | `POST /listeners/NAME/down`, `POST /listeners/NAME/up` | stops listening (and closes its connections), listens again |
/// | `GET /stats`, `GET /listeners/NAME/stats` | statistics per connection and direction |
///
/// Errors answer `{"error": "..."}` with 400 (malformed JSON, unknown profile, a value out of
/// range), 404 (no such listener, fault or path), 405 (another method), 409 (a fault's name is
/// taken; the port is taken when bringing a listener up), 413 (a body over 64 KiB).
public final class ConditionerControl: Sendable {
    /// The loopback address it listens on.
    public let host: String
    /// Its port.
    public let port: Int
    private let channel: any Channel
    private let group: any EventLoopGroup
    private let ownsGroup: Bool

    private init(host: String, port: Int, channel: any Channel, group: any EventLoopGroup, ownsGroup: Bool) {
        self.host = host
        self.port = port
        self.channel = channel
        self.group = group
        self.ownsGroup = ownsGroup
    }

    /// Serves the control API for `listeners` on `host:port` (port 0: a free one). The API has no
    /// authentication, so `host` must be a loopback address; anything else throws
    /// ``ConditionerError/cannotListen(_:_:)``, as does a port in use.
    public static func start(
        host: String = "127.0.0.1", port: Int = 0, listeners: [ConditionedListener],
        group: (any EventLoopGroup)? = nil
    ) async throws(ConditionerError) -> ConditionerControl {
        try await start(host: host, port: port, routes: ControlRoutes(listeners: listeners), group: group)
    }

    /// Serves `routes` (which may know the listeners' profiles) as ``start(host:port:listeners:group:)`` does.
    package static func start(
        host: String, port: Int, routes: ControlRoutes,
        group: (any EventLoopGroup)?
    ) async throws(ConditionerError) -> ConditionerControl {
        guard isLoopback(host) else {
            throw .cannotListen(
                "\(host):\(port)", "the control API has no authentication, so it listens on loopback only")
        }
        guard (0...65535).contains(port) else { throw .cannotListen("\(host):\(port)", "not a port") }
        let ownsGroup = group == nil
        let group = group ?? MultiThreadedEventLoopGroup(numberOfThreads: 1)
        do {
            let channel = try await ServerBootstrap(group: group)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .childChannelInitializer { channel in
                    channel.pipeline.configureHTTPServerPipeline(withErrorHandling: true).flatMapThrowing {
                        try channel.pipeline.syncOperations.addHandler(ControlHTTPHandler(routes: routes))
                    }
                }
                .bind(host: host, port: port).get()
            return ConditionerControl(
                host: host, port: channel.localAddress?.port ?? port, channel: channel,
                group: group, ownsGroup: ownsGroup)
        } catch {
            if ownsGroup { try? await group.shutdownGracefully() }
            throw .cannotListen("\(host):\(port)", ConditionedProxy.reason(error))
        }
    }

    /// Stops serving (the listeners are the caller's to stop).
    public func stop() async throws {
        try? await channel.close()
        if ownsGroup { try await group.shutdownGracefully() }
    }

    /// Whether `host` is a loopback address: 127.0.0.0/8, ::1 or `localhost`.
    static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" || host == "::1" || host == "[::1]" { return true }
        var address = in_addr()
        guard inet_pton(AF_INET, host, &address) == 1 else { return false }
        return UInt32(bigEndian: address.s_addr) >> 24 == 127
    }
}
