import ArgumentParser
import NetReachHTTP

extension CLIExitCode {
    /// The status `get` exits with after `error`: curl's number for the same failure.
    static func exitCode(for error: NetworkError) -> ExitCode {
        switch error.reason {
        case .unsuccessfulStatus: unsuccessfulStatus
        case .notConnected, .waitingForConnectivityTimedOut: notConnected
        case .connectionLost: connectionLost
        case .timedOut: requestTimedOut
        case .invalidResponse: invalidResponse
        case .bodyTooLarge: bodyTooLarge
        case .redirectRefused: redirectRefused
        case .cannotWrite: cannotWrite
        case .cannotRead: cannotRead
        case .invalidURL: ExitCode(64) // validate() rejects these first; kept for completeness
        case .cancelled: interrupted
        case .transport(let failure, _): exitCode(for: failure)
        }
    }

    /// The status for a transport failure, by its kind (and, for TLS, its reason).
    static func exitCode(for failure: TransportError) -> ExitCode {
        switch failure.kind {
        case .cannotConnect: cannotConnect
        case .dnsFailure, .hostNotFound: hostNotResolved
        case .proxyFailure: proxyFailed
        case .connectTimeout, .timedOut: requestTimedOut
        case .connectionLost, .other: connectionLost
        case .partialBody: partialFile
        case .invalidResponse: invalidResponse
        case .badContentEncoding: badContentEncoding
        case .decodedBodyTooLarge: bodyTooLarge
        case .invalidRequest: ExitCode(64)
        case .cancelled: interrupted
        case .tlsFailure:
            failure.tlsFailureReason?.isCertificateRejection == true ? certificateRefused : tlsHandshakeFailed
        }
    }
}
