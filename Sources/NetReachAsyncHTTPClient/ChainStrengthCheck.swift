import NIOCore
import NIOPosix
import NIOSSL
import NetReachHTTP
import NetReachSystem

/// The certificate strength check of the connections a ``ClientSet`` makes with verification on,
/// run as AsyncHTTPClient's connection initialiser: after NIOSSL verified the chain and before the
/// pool hands the connection to any request, so a refused connection never carries a byte of one.
///
/// AsyncHTTPClient makes its own `NIOSSLClientHandler`, which shows the leaf certificate but not
/// the chain. So the leaf is judged on every connection, from that handler; the rest of the path
/// is read on a handshake of its own to the same address, which stops at the server's certificates
/// (its verification callback fails it: nothing is sent) and is made once per leaf certificate in
/// the process (``verdicts``). Through a proxy the leaf alone is judged (Docs/DesignNotes.md,
/// "TLS floor and certificate strength").
///
/// ```swift
/// let check = ChainStrengthCheck(tls: configuration, connectTimeout: .seconds(10))
/// clientConfiguration.http1_1ConnectionDebugInitializer = { check.check($0, host: "example.com", direct: true) }
/// ```
final class ChainStrengthCheck: Sendable {
    /// The handshake that reads the chain: the client's own TLS settings (the same versions and
    /// ciphers, so the server chooses the same certificate), verification by a callback.
    private let tls: TLSConfiguration
    private let context = Locked<NIOSSLContext?>(nil)
    private let connectTimeout: TimeAmount

    /// What each leaf certificate's path came to (`nil`: strong enough), by its DER.
    static let verdicts = Locked<[[UInt8]: TLSFailureReason?]>([:])
    /// Past this many leaves the verdicts are forgotten and read again.
    static let verdictLimit = 512

    init(tls: TLSConfiguration, connectTimeout: TimeAmount) {
        var tls = tls
        // The callback replaces verification (NIOSSL skips it when verification is `.none`), so no
        // roots need loading: the connection that asked was verified by NIOSSL already.
        tls.certificateVerification = .noHostnameVerification
        tls.trustRoots = .certificates([])
        tls.additionalTrustRoots = []
        self.tls = tls
        self.connectTimeout = connectTimeout
    }

    /// Succeeds when the certificates of `channel`'s server are strong enough; fails with a
    /// ``StrengthRefusal`` otherwise. `direct`: the channel goes to the server, not to a proxy.
    @Sendable func check(_ channel: Channel, host: String, direct: Bool) -> EventLoopFuture<Void> {
        let loop = channel.eventLoop
        return loop.submit { () -> (leaf: [UInt8], address: SocketAddress?) in
            let handler = try channel.pipeline.syncOperations.handler(type: NIOSSLClientHandler.self)
            guard let leaf = handler.peerCertificate, let der = try? leaf.toDERBytes() else {
                throw StrengthRefusal(unreadable: "the server sent no certificate")
            }
            if let reason = CertificateStrength.weakness(ofChain: [try Self.facts(der)]) {
                throw StrengthRefusal(reason: reason)
            }
            return (der, channel.remoteAddress)
        }.flatMap { found in
            let (leaf, address) = found
            if let verdict = Self.verdicts.withLock({ $0[leaf] }) {
                return Self.outcome(verdict, on: loop)
            }
            guard direct, let address else { return loop.makeSucceededVoidFuture() }
            return self.readChain(from: address, host: host, on: loop).flatMapThrowing { presented in
                guard presented.first == leaf else {
                    throw StrengthRefusal(unreadable: "the server presented another certificate on a second connection")
                }
                let verdict = CertificateStrength.weakness(ofChain: try presented.map(Self.facts))
                Self.verdicts.withLock { verdicts in
                    if verdicts.count >= Self.verdictLimit { verdicts.removeAll() }
                    verdicts[leaf] = verdict
                }
                if let verdict { throw StrengthRefusal(reason: verdict) }
            }
        }
    }

    private static func outcome(_ verdict: TLSFailureReason?, on loop: any EventLoop) -> EventLoopFuture<Void> {
        guard let verdict else { return loop.makeSucceededVoidFuture() }
        return loop.makeFailedFuture(StrengthRefusal(reason: verdict))
    }

    private static func facts(_ der: [UInt8]) throws -> CertificateFacts {
        do {
            return try CertificateFacts(derEncoded: der)
        } catch {
            throw StrengthRefusal(unreadable: "a certificate of the server's chain is not DER this client can read")
        }
    }

    /// The certificates `address` presents, leaf first, read on a handshake that ends when they
    /// arrive (the callback fails it, so the server sees no request).
    private func readChain(
        from address: SocketAddress, host: String, on loop: any EventLoop
    ) -> EventLoopFuture<
        [[UInt8]]
    > {
        let promise = loop.makePromise(of: [[UInt8]].self)
        let context: NIOSSLContext
        do {
            context = try self.context.withLock { context in
                if let context { return context }
                let made = try NIOSSLContext(configuration: tls)
                context = made
                return made
            }
        } catch {
            return loop.makeFailedFuture(StrengthRefusal(unreadable: "\(error)"))
        }
        // SNI names a host, never an address (NIOSSL refuses one), as AsyncHTTPClient does.
        let serverName = ServerIdentity.addressBytes(host) == nil ? host : nil
        let bootstrap = ClientBootstrap(group: loop)
            .connectTimeout(connectTimeout)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let handler = try NIOSSLClientHandler(
                        context: context, serverHostname: serverName,
                        customVerificationCallback: { certificates, verification in
                            promise.completeWith(Result(catching: { try certificates.map { try $0.toDERBytes() } }))
                            verification.succeed(.failed)
                        })
                    try channel.pipeline.syncOperations.addHandler(handler)
                }
            }
        bootstrap.connect(to: address).whenComplete { result in
            switch result {
            case .failure(let error):
                promise.fail(StrengthRefusal(unreadable: "\(error)"))
            case .success(let channel):
                // Whichever comes first: the certificates, the handshake's end without them, the timeout.
                let timeout = loop.scheduleTask(in: self.connectTimeout) {
                    promise.fail(StrengthRefusal(unreadable: "no certificates within the connect timeout"))
                }
                channel.closeFuture.whenComplete { _ in
                    promise.fail(StrengthRefusal(unreadable: "the connection closed before the certificates came"))
                }
                promise.futureResult.whenComplete { _ in
                    timeout.cancel()
                    channel.close(promise: nil)
                }
            }
        }
        return promise.futureResult
    }
}

/// A connection refused by ``ChainStrengthCheck``: a certificate too weak, or a chain it could not
/// read (then it refuses rather than let an unjudged chain through).
struct StrengthRefusal: Error, Sendable, CustomStringConvertible {
    let reason: TLSFailureReason

    init(reason: TLSFailureReason) {
        self.reason = reason
    }

    init(unreadable why: String) {
        reason = .other("the server's certificate chain could not be read for its strength check (\(why))")
    }

    var description: String { reason.description }
}
