import NetReachGetCommand
import NetReachHTTP
import NetReachURLSession

// `netreach-http-urlsession`: `netreach-http` with the URLSession transport linked in, which
// `netreach get --transport urlsession` runs. Apart so the default path never loads
// FoundationNetworking and libcurl.
LinkedTransports.registerURLSession { settings throws(TransportSettingsError) in try URLSessionTransport(settings: settings) }
await NetreachHTTPCommand.run()
