import HTTPTypes
import NetReach

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A request started waiting for connectivity: the counterpart of URLSession's
/// `urlSession(_:taskIsWaitingForConnectivity:)`, fired once per wait.
///
/// ```swift
/// Task {
///     for await event in service.waitingEvents {
///         print("\(event.method) \(event.url) waits: \(event.reason)")
///     }
/// }
/// ```
public struct WaitingEvent: Sendable {
    /// The request's method.
    public var method: HTTPRequest.Method
    /// The request's URL.
    public var url: URL
    /// Why it cannot go now.
    public var reason: NotConnectedReason
    /// The path when the wait began.
    public var path: NetworkPath
}
