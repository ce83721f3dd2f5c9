import NetReachConditioner

/// The long help of `netreach condition`: the profiles' figures (from ``LinkProfile``, the same
/// table the documentation shows), the faults, the control API and the exit statuses.
enum ConditionHelp {
    static var discussion: String {
        """
        A TCP proxy: clients connect to --listen, and each connection is relayed to --upstream \
        through a link that is as bad as asked, in each direction on its own (up is client to \
        server, down is server to client). No root, no kernel module: on loopback, in a container, \
        in CI.

        Bandwidth is serialisation on a virtual wire (a burst takes size/bandwidth to pass); delay \
        is added to every byte; jitter varies it without reordering bytes; loss cannot be done by \
        a TCP proxy (TCP resends what is lost), so a lost 1448-byte segment costs what TCP's \
        retransmission would: its bytes and all after them arrive one retransmission timeout \
        (200 ms, or the round trip if longer) later. Loss 100% delivers nothing.

        PROFILES (Apple's Network Link Conditioner, same figures)
        \(profileTable)

        high-latency-dns: a TCP proxy never sees name lookups, so the 3 s are charged where a \
        client pays them, before its connection: nothing is relayed for 3 s after each accept.

        FAULTS (toxiproxy's, with --fault TYPE:KEY=VALUE,...; each also takes \
        direction=upstream|downstream|both and name=NAME)
          reset_peer:after=500ms          reset both connections (TCP RST) this long after each starts
          timeout[:after=2s]              hold the connection, deliver nothing; close it after `after` (never without)
          slow_close:delay=1s             pass a close on this much later
          limit_data:bytes=1000           close the connection once this many bytes were delivered
          slicer:size=64,variation=16,delay=10ms
                                          cut what is delivered into size±variation byte slices, delay apart

        CONTROL API (JSON over HTTP on --control, loopback only)
          GET    /listeners                        every listener: address, upstream, listening, profile, conditions, faults
          GET    /listeners/NAME                   one listener
          PUT    /listeners/NAME/conditions        {"profile":"3g"}, or {"upstream":{"bandwidth":41250,"delayMilliseconds":100},
                                                   "downstream":{...},"connectDelayMilliseconds":0,"seed":1} (bandwidth in bytes/s)
          POST   /listeners/NAME/faults            {"name":"cut","direction":"downstream","type":"limit_data","bytes":1000}
          DELETE /listeners/NAME/faults/FAULT      remove a fault
          POST   /listeners/NAME/down | up         stop listening and close its connections | listen again
          GET    /stats, /listeners/NAME/stats     per connection and direction: bytes read, scheduled, delivered,
                                                   chunks, delay total and max
          Errors: {"error":"..."} with 400, 404, 405, 409 (name or port taken), 413 (body over 64 KiB).
          curl -X PUT -d '{"profile":"edge"}' http://127.0.0.1:PORT/listeners/1/conditions

        Conditions and faults changed while it runs apply to open connections too; bytes \
        already scheduled keep their schedule. SIGINT or SIGTERM stops it.

        EXAMPLES
          netreach condition --listen 127.0.0.1:8001 --upstream 127.0.0.1:8080 --profile 3g
          netreach condition --listen 127.0.0.1:8001 --upstream 127.0.0.1:8080 --delay 50ms --jitter 10ms --seed 7
          netreach condition --listen api=127.0.0.1:8001 --listen db=127.0.0.1:8002 \\
              --upstream 127.0.0.1:8080 --upstream 127.0.0.1:5432 --fault reset_peer:after=2s,direction=downstream

        EXIT STATUS
          0   stopped by SIGINT or SIGTERM
          3   a --listen or --control address cannot be listened on (in use, not an address, --control not loopback)
          64  usage error (unknown profile, an invalid value, an option given twice)
          74  the output could not be written (closed, full, or its reader gone)
        """
    }

    /// ``LinkProfile/table`` as aligned plain text.
    static var profileTable: String {
        let rows = LinkProfile.table.split(separator: "\n").enumerated().compactMap { index, line -> [String]? in
            guard index != 1 else { return nil }   // the Markdown rule
            return line.split(separator: "|", omittingEmptySubsequences: false).dropFirst().dropLast()
                .map { $0.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: "`", with: "") }
        }
        let widths = (0..<(rows.first?.count ?? 0)).map { column in rows.map { $0[column].count }.max() ?? 0 }
        return rows.map { row in
            "  " + zip(row, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }.joined(separator: "  ")
                .trimmingCharacters(in: .whitespaces)
        }.joined(separator: "\n")
    }
}
