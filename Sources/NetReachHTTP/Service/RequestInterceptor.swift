import HTTPTypes

/// Adapts every attempt of a request before it is sent (add or refresh a token, sign it), and may
/// ask for one more attempt after an unsuccessful status (a 401 after a token expired), in the
/// manner of Alamofire's `RequestInterceptor`.
///
/// The service's safety rule still holds: the extra attempt is made only when repeating the
/// request is safe (``RetryAttempt/isSafeToRepeat``: an idempotent method, or an
/// `Idempotency-Key`). A POST without a key that got a 401 is not sent again, because the service
/// cannot know the server did not act on it.
///
/// ```swift
/// struct BearerToken: RequestInterceptor {
///     let tokens: TokenStore                      // your actor that refreshes tokens
///     func adapt(_ request: inout HTTPRequest, attempt: Int) async throws {
///         request.headerFields[.authorization] = "Bearer \(await tokens.current())"
///     }
///     func retry(after response: HTTPResponse, attempt: Int) async -> Bool {
///         guard response.status.code == 401 else { return false }
///         await tokens.refresh()
///         return true                             // adapt runs again with the new token
///     }
/// }
/// ```
public protocol RequestInterceptor: Sendable {
    /// Changes the head of attempt number `attempt` (1-based; every redirect hop too) before it is
    /// sent. Throwing fails the request with ``NetworkError/transport(_:path:)`` (kind `other`)
    /// and sends nothing.
    func adapt(_ request: inout HTTPRequest, attempt: Int) async throws

    /// Whether to send the request once more after `response`, whose status the policy does not
    /// accept. Asked at most once per request; the default is never.
    func retry(after response: HTTPResponse, attempt: Int) async -> Bool
}

extension RequestInterceptor {
    /// Never asks for another attempt.
    public func retry(after response: HTTPResponse, attempt: Int) async -> Bool { false }
}
