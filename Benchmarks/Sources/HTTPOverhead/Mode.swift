/// Whether requests go straight to the transport or through a NetworkService over it.
enum Mode: String, Codable, Sendable {
    case bare
    case service
    /// Diagnostic (`--diagnose`): a NetworkService with no monitor, so no path check.
    case serviceWithoutMonitor = "svc-nomon"
    /// Diagnostic (`--diagnose`): the bare transport, with the service's URL and head building
    /// (``ServiceSteps``) done for every request.
    case bareWithServiceSteps = "bare+steps"

    static let measured: [Mode] = [.bare, .service]
    static let diagnostic: [Mode] = [.serviceWithoutMonitor, .bareWithServiceSteps]
}
