import NetReach
import NetReachSystem

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A network's own word on whether it holds you in a captive portal: the API of RFC 8908, whose
/// URL the network announces by DHCP (option 114, RFC 8910) or in router advertisements.
///
/// On Linux, systemd-networkd records the announced URL in its link state file
/// (`/run/systemd/netif/links/<ifindex>`, key `CAPTIVE_PORTAL`). When the path's preferred
/// interface has one, ``ConnectivityMonitor`` asks it at the start of each round, before any
/// probe: if it says `captive`, the level is ``ConnectivityLevel/portal(loginURL:)`` with its
/// `user-portal-url`, and no probe is sent. If it says not captive, or cannot be asked, the probes
/// decide as usual. Only an `https` URL is used, as RFC 8908 requires.
///
/// ```swift
/// let status = try CaptivePortalAPI.Status(parsing: Array(#"{"captive": true, "user-portal-url": "https://login.example/"}"#.utf8))
/// status.isCaptive        // true
/// status.userPortalURL    // https://login.example/
/// ```
public enum CaptivePortalAPI {
    /// The media type the API answers with (RFC 8908, section 5).
    public static let mediaType = "application/captive+json"

    /// Where systemd-networkd keeps its link state files.
    public static let networkdLinkStateDirectory = "/run/systemd/netif/links"

    /// What the API said.
    public struct Status: Sendable, Hashable {
        /// Whether the client is held in the portal (`captive`, required).
        public var isCaptive: Bool
        /// Where a person signs in (`user-portal-url`), if given.
        public var userPortalURL: URL?
        /// A page about the venue (`venue-info-url`), if given.
        public var venueInfoURL: URL?
        /// Seconds left before the session ends (`seconds-remaining`), if given.
        public var secondsRemaining: Int?

        public init(isCaptive: Bool, userPortalURL: URL? = nil, venueInfoURL: URL? = nil, secondsRemaining: Int? = nil)
        {
            self.isCaptive = isCaptive
            self.userPortalURL = userPortalURL
            self.venueInfoURL = venueInfoURL
            self.secondsRemaining = secondsRemaining
        }

        /// Parses an `application/captive+json` body; throws when it is not a JSON object with a
        /// boolean `captive`. Unknown keys are ignored, as RFC 8908 asks; a URL that is not
        /// `https` is left out.
        public init(parsing body: [UInt8]) throws(CaptivePortalAPIError) {
            let wire: Wire
            do {
                wire = try JSONDecoder().decode(Wire.self, from: Data(body))
            } catch DecodingError.keyNotFound {
                throw CaptivePortalAPIError("the answer has no \"captive\"")
            } catch DecodingError.typeMismatch(_, let context) {
                let key = context.codingPath.last?.stringValue ?? "the answer"
                throw CaptivePortalAPIError(
                    key == "the answer" ? "the answer is not a JSON object" : "\"\(key)\" has the wrong type")
            } catch {
                throw CaptivePortalAPIError("the answer is not JSON")
            }
            func secureURL(_ text: String?) -> URL? {
                guard let text, let url = URL(string: text), url.scheme?.lowercased() == "https",
                    url.host?.isEmpty == false
                else { return nil }
                return url
            }
            self.init(
                isCaptive: wire.captive, userPortalURL: secureURL(wire.userPortalURL),
                venueInfoURL: secureURL(wire.venueInfoURL),
                secondsRemaining: wire.secondsRemaining.flatMap { $0.isFinite && $0 >= 0 && $0 < 1e15 ? Int($0) : nil })
        }

        /// The keys NetReach reads; any other is ignored, as RFC 8908 asks. `captive` must be a
        /// JSON boolean (JSONDecoder refuses `1`).
        private struct Wire: Decodable {
            var captive: Bool
            var userPortalURL: String?
            var venueInfoURL: String?
            var secondsRemaining: Double?

            enum CodingKeys: String, CodingKey {
                case captive
                case userPortalURL = "user-portal-url"
                case venueInfoURL = "venue-info-url"
                case secondsRemaining = "seconds-remaining"
            }
        }
    }

    /// The API URL systemd-networkd recorded for the interface with index `interfaceIndex`, if
    /// any: `nil` when there is no state file (networkd does not manage the link, or does not
    /// run), no `CAPTIVE_PORTAL` key, or a URL that is not `https`.
    public static func announcedURL(interfaceIndex: Int, stateDirectory: String = networkdLinkStateDirectory) -> URL? {
        guard interfaceIndex > 0,
            let data = FileManager.default.contents(atPath: "\(stateDirectory)/\(interfaceIndex)")
        else { return nil }
        return announcedURL(inLinkState: String(decoding: data.prefix(256 * 1024), as: UTF8.self))
    }

    /// The `CAPTIVE_PORTAL` value of a networkd link state file (`KEY=value` lines), if it is an
    /// `https` URL with a host.
    public static func announcedURL(inLinkState text: String) -> URL? {
        for line in text.split(whereSeparator: \.isNewline) {
            guard line.hasPrefix("CAPTIVE_PORTAL=") else { continue }
            let value = line.dropFirst("CAPTIVE_PORTAL=".count).trimmingSpaces()
            guard let url = URL(string: value), url.scheme?.lowercased() == "https", url.host?.isEmpty == false else {
                return nil
            }
            return url
        }
        return nil
    }
}

/// Why an RFC 8908 API answer could not be used.
public struct CaptivePortalAPIError: Error, Sendable, Hashable, CustomStringConvertible {
    public var description: String

    public init(_ description: String) { self.description = description }
}

/// What asking an RFC 8908 API came to.
public enum CaptivePortalAnswer: Sendable, Hashable {
    /// It answered with a status, after `latency`.
    case answered(CaptivePortalAPI.Status, latency: Duration)
    /// It could not be asked, or its answer could not be used: the probes decide.
    case failed(String)
}
