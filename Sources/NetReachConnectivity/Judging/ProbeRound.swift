#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// One round of probes for one family, reduced to a level with a quorum: `full` when at least
/// `quorum` probes passed; otherwise `portal` when any answered in the server's place (with the
/// first login URL one gave), else `limited`.
enum ProbeRound {
    static func level(of results: [ProbeResult], quorum: Int) -> ConnectivityLevel {
        let passed = results.filter { $0.verdict == .passed }.count
        if passed >= max(1, min(quorum, results.count)) && passed > 0 { return .full }
        let answeredInPlace = results.filter { $0.verdict.answeredInPlace }
        if !answeredInPlace.isEmpty {
            let login = answeredInPlace.lazy.compactMap { result -> URL? in
                if case .portal(let url?, _) = result.verdict { return url }
                return nil
            }.first
            return .portal(loginURL: login)
        }
        return .limited
    }
}
