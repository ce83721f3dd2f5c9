import HummingbirdBcrypt
import NetReachSystem

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Checks `Authorization: Basic` against `basic_auth_users`, as exporter-toolkit does: a name it
/// does not know costs the same bcrypt as one it knows (so timing does not tell which names
/// exist), and each answer is remembered for the same name, hash and password, so a scraper pays
/// bcrypt's ~0.1 s once rather than on every scrape.
///
/// bcrypt runs on one thread of its own, never on the event loop: a stream of wrong passwords
/// takes that thread and nothing else (health checks, the answers remembered, the server's other
/// work go on), and a request that waits longer than `timeout` is answered ``Verdict/busy``.
///
/// ```swift
/// let check = BasicAuthentication(users: ["prometheus": hash])
/// switch await check.verdict(authorization: request.headers[.authorization]) {
/// case .allowed: break
/// case .denied, .busy: return unauthorized
/// }
/// ```
package final class BasicAuthentication: Sendable {
    /// What a request's credentials come to.
    package enum Verdict: Sendable, Equatable {
        /// A known user with the right password, or no users configured.
        case allowed
        /// No credentials, a name not known, or a wrong password: 401.
        case denied
        /// bcrypt's thread did not get to it within the timeout: 503.
        case busy
    }

    /// Answers remembered, at most this many; beyond it, the oldest go.
    static let rememberedCapacity = 256

    private struct Remembered {
        var answers: [String: Bool] = [:]
        var order: [String] = []
    }

    private let users: [String: String]
    /// The cost of the users' hashes: the decoy's.
    private let decoyCost: Int
    /// What a name not known is checked against, made on bcrypt's thread the first time one
    /// comes (a hash of the users' cost takes as long to make as to check).
    private let decoy = Locked<String?>(nil)
    private let remembered = Locked(Remembered())
    private let bcrypt: BlockingWork.Pool
    private let timeout: Duration

    /// - Parameters:
    ///   - users: each user's bcrypt hash (checked by ``WebConfiguration``); empty: everyone is allowed.
    ///   - bcrypt: the thread bcrypt runs on; shared by the authenticators a reload makes.
    ///   - timeout: how long a request waits for its check; a check that started goes on after
    ///     it, and its answer is remembered, so a very costly hash answers the next request.
    package init(
        users: [String: String], bcrypt: BlockingWork.Pool = BlockingWork.Pool(named: "netreach-bcrypt", width: 1),
        timeout: Duration = .seconds(10)
    ) {
        self.users = users.mapValues(BcryptHash.normalized)
        decoyCost = users.values.map(BcryptHash.cost).max() ?? 10
        self.bcrypt = bcrypt
        self.timeout = timeout
    }

    /// The hash `user`'s password is checked against, as the bcrypt in C reads it; `nil` for a
    /// name not known.
    func knownHash(_ user: String) -> String? { users[user] }

    /// Whether any user is configured (without one, every request is allowed).
    package var isEnabled: Bool { !users.isEmpty }

    /// The verdict on a request's `Authorization` field.
    package func verdict(authorization: String?) async -> Verdict {
        guard isEnabled else { return .allowed }
        guard let (user, password) = authorization.flatMap(Self.credentials) else { return .denied }
        let known = users[user]
        // NUL, which no credential holds, keeps the parts apart: no name and password can be cut
        // to look like another's.
        let key = [user, known ?? "", password].joined(separator: "\0")
        if let answer = remembered.withLock({ $0.answers[key] }) { return answer && known != nil ? .allowed : .denied }
        let check: @Sendable () -> Bool = { [self] in
            let matches = Bcrypt.verify(password, hash: known ?? decoyHash())
            remember(key, matches)
            return matches
        }
        guard let matches = await bcrypt.run(until: .now + timeout, check) else { return .busy }
        return matches && known != nil ? .allowed : .denied
    }

    private func decoyHash() -> String {
        if let made = decoy.withLock({ $0 }) { return made }
        let made = Bcrypt.hash(UUID().uuidString, cost: UInt8(decoyCost))
        decoy.withLock { $0 = made }
        return made
    }

    private func remember(_ key: String, _ answer: Bool) {
        remembered.withLock { remembered in
            if remembered.answers.updateValue(answer, forKey: key) == nil { remembered.order.append(key) }
            while remembered.order.count > Self.rememberedCapacity {
                remembered.answers[remembered.order.removeFirst()] = nil
            }
        }
    }

    /// `Basic base64(user:password)` (RFC 7617), the scheme's name in any case; `nil` for any
    /// other scheme, bad base64, no colon, text that is not UTF-8, or a NUL (which the bcrypt in
    /// C would take as the password's end).
    static func credentials(_ field: String) -> (String, String)? {
        let parts = field.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "basic",
            let data = Data(base64Encoded: parts[1].trimmingSpaces()),
            let text = String(validating: data, as: UTF8.self), !text.contains("\0"),
            let colon = text.firstIndex(of: ":")
        else { return nil }
        return (String(text[..<colon]), String(text[text.index(after: colon)...]))
    }
}
