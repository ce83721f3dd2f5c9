import ArgumentParser
import NetReachCLI
import NetReachHTTP

extension CLIExitCode {
    /// The status `get` exits with after `error`.
    static func exitCode(for error: NetworkError) -> ExitCode {
        switch error.reason {
        case .unsuccessfulStatus: unsuccessfulStatus
        case .notConnected, .waitingForConnectivityTimedOut: notConnected
        case .connectionLost, .timedOut, .invalidResponse, .transport, .bodyTooLarge, .redirectRefused: requestFailed
        case .cannotWrite, .cannotRead: localFile
        case .invalidURL: ExitCode(64)   // validate() rejects these first; kept for completeness
        case .cancelled: interrupted
        }
    }
}
