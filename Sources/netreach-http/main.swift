import NetReachGetCommand

// `netreach-http`: the commands of `netreach` that send HTTP (see NetreachHTTPCommand), on
// AsyncHTTPClient. `get --transport urlsession` runs netreach-http-urlsession in its place.
await NetreachHTTPCommand.run()
