import HTTPTypes

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A response with its whole body, and what it took to get it.
///
/// ```swift
/// let response = try await service.send(.get("/v1/me"))
/// let me = try response.decode(User.self)      // a DecodingError, never a NetworkError
/// print(response.attempts, response.waitedForConnectivity)
/// ```
public struct Response: Sendable {
    /// The status.
    public var status: HTTPResponse.Status
    /// The header fields.
    public var headerFields: HTTPFields
    /// The body.
    public var body: Data
    /// The URL the final attempt went to.
    public var url: URL
    /// How many attempts were made (1 when the first one succeeded).
    public var attempts: Int
    /// How long the request waited for connectivity before its attempts.
    public var waitedForConnectivity: Duration

    /// Creates a response.
    public init(
        status: HTTPResponse.Status, headerFields: HTTPFields = [:], body: Data = Data(), url: URL,
        attempts: Int = 1, waitedForConnectivity: Duration = .zero
    ) {
        self.status = status
        self.headerFields = headerFields
        self.body = body
        self.url = url
        self.attempts = attempts
        self.waitedForConnectivity = waitedForConnectivity
    }

    /// Decodes the body as JSON. Decoding is apart from transport: a failure here throws the
    /// decoder's `DecodingError`, not a ``NetworkError``.
    public func decode<Value: Decodable>(_ type: Value.Type, using decoder: JSONDecoder = JSONDecoder()) throws -> Value
    {
        try decoder.decode(type, from: body)
    }

    /// The body as UTF-8 text (invalid bytes replaced).
    public var text: String { String(decoding: body, as: UTF8.self) }
}
