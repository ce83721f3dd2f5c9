import Hummingbird
import NIOCore

/// Hummingbird's request context with the connection's channel, so that an event-stream client
/// dropped for not reading can have its connection closed.
package struct ServeRequestContext: RequestContext {
    package var coreContext: CoreRequestContextStorage
    /// The client's connection.
    package let channel: any Channel

    package init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
    }
}
