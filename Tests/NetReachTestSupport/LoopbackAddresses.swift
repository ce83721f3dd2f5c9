/// An address in 127.0.0.0/8 other than 127.0.0.1, picked at random: the kernel delivers the whole
/// /8 to loopback, and the tests' servers listen on 127.0.0.1.
///
/// - A connection to any port there is refused (nothing listens), whatever other tests start.
/// - A listener there keeps its port to itself: when it stops, a server another test starts on
///   127.0.0.1 cannot take over the port and answer a connection that must be refused (seen:
///   "refused" checks answered by another test's server in a parallel run).
///
/// ```swift
/// let host = otherLoopbackAddress()
/// let server = try await FaultInjectingServer.start(host: host)
/// ```
public func otherLoopbackAddress() -> String {
    "127.0.\(Int.random(in: 1...254)).\(Int.random(in: 1...254))"
}
