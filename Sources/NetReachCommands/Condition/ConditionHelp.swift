import NetReachConditioner

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

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
        (200 ms, or the round trip if longer) later. Loss 100% carries nothing: a connect \
        gets no answer, open connections hold their bytes until the loss is lowered.

        PROFILES (Apple's Network Link Conditioner, same figures)
        \(profileTable)

        high-latency-dns (Apple's High Latency DNS): every lookup takes 3 s. A TCP proxy \
        never sees name lookups, so the 3 s are charged where a client pays them, before \
        its connection: nothing is relayed for 3 s after each accept. 100-loss is Apple's \
        100% Loss, very-bad its Very Bad Network; the others are named as Apple names them.

        FAULTS (toxiproxy's): --fault TYPE[:KEY=VALUE,...]; each also takes \
        direction=upstream|downstream|both (default both) and name=NAME (default TYPE).
          reset_peer:after=500ms    reset both sides (TCP RST) this long after accept
          timeout[:after=2s]        hold: deliver nothing; close after `after` if given
          slow_close:delay=1s       pass a close on this much later
          limit_data:bytes=1000     close once this many bytes were delivered
          slicer:size=64,variation=16,delay=10ms
                                    deliver in size±variation byte slices, delay apart

        CONTROL API (JSON over HTTP on --control, loopback only)
          GET    /listeners                   every listener and its settings
          GET    /listeners/NAME              one listener
          PUT    /listeners/NAME/conditions   {"profile":"3g"} or conditions:
                 {"upstream":{"bandwidth":41250,"delayMilliseconds":100,
                 "jitterMilliseconds":0,"loss":0},"downstream":{...},
                 "connectDelayMilliseconds":0,"seed":1,
                 "bandwidthPerConnection":false}   (bandwidth in bytes/s,
                 shared by the listener's connections unless per connection)
          POST   /listeners/NAME/faults       {"name":"cut","type":"limit_data",
                 "bytes":1000,"direction":"downstream"}   (keys as in FAULTS, in
                 camelCase with units: afterMilliseconds, delayMilliseconds,
                 bytes, averageSize, sizeVariation)
          DELETE /listeners/NAME/faults/FAULT remove a fault
          POST   /listeners/NAME/down         stop listening, close its connections
          POST   /listeners/NAME/up           listen again on the same port
          GET    /stats                       per listener, connection, direction:
                 bytes read, scheduled, delivered; chunks; delay total and max
                 (also GET /listeners/NAME/stats)
          Errors are {"error":"..."} with 400, 404, 405, 409 (a name or the port
          is taken) or 413 (a body over 64 KiB). For example:
          curl -X PUT -d '{"profile":"edge"}' \\
              http://127.0.0.1:PORT/listeners/1/conditions

        Conditions and faults changed while it runs apply to open connections too; bytes \
        already scheduled keep their schedule. SIGINT or SIGTERM stops it.

        EXAMPLES
          netreach condition --listen 127.0.0.1:8001 --upstream 127.0.0.1:8080 \\
              --profile 3g
          netreach condition --listen 127.0.0.1:8001 --upstream 127.0.0.1:8080 \\
              --delay 50ms --jitter 10ms --seed 7
          netreach condition --listen api=127.0.0.1:8001 --listen db=127.0.0.1:8002 \\
              --upstream 127.0.0.1:8080 --upstream 127.0.0.1:5432 \\
              --fault reset_peer:after=2s,direction=downstream

        \(ExitStatusTable.help(for: "condition"))
        """
    }

    /// The figures of ``LinkProfile/table`` (Apple's names aside) as aligned plain text that fits
    /// 80 columns.
    static var profileTable: String {
        var rows = [["profile", "down", "delay", "up", "delay", "loss"]]
        for profile in LinkProfile.allCases {
            let c = profile.conditions
            rows.append([
                profile.name, LinkProfile.rate(c.downstream.bandwidth), LinkProfile.milliseconds(c.downstream.delay),
                LinkProfile.rate(c.upstream.bandwidth), LinkProfile.milliseconds(c.upstream.delay),
                LinkProfile.percent(c.downstream.loss),
            ])
        }
        // Built without Foundation's padding and trimming: every command's configuration (so
        // this table) is made when the tool starts, whatever it was asked to do.
        let widths = (0..<rows[0].count).map { column in rows.map { $0[column].count }.max() ?? 0 }
        return rows.map { row in
            var line = " "
            for (cell, width) in zip(row, widths) {
                line += " " + cell + String(repeating: " ", count: width - cell.count + 1)
            }
            while line.last == " " { line.removeLast() }
            return line
        }.joined(separator: "\n")
    }
}
