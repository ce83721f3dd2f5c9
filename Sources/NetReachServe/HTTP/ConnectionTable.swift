/// Which connections serve holds, and which of them may be closed to admit a new one: a value,
/// kept by ``ConnectionGate`` under its lock.
///
/// At most `capacity` connections are held. Beyond that, a new connection is admitted in place of
/// the connection that has been idle longest (between requests on keep-alive, or not yet through
/// its first request's header: the ones a flood of idle or slowloris clients is made of); when
/// every held connection is in a request or an event stream, the new one is refused. So a scraper
/// gets in while idle clients fill the table, and once in, its request is never cut short.
///
/// ```swift
/// var table = ConnectionTable<String>(capacity: 1)
/// table.admit("a")                  // .admitted(0)
/// table.admit("b")                  // .admitted(1, evicting: "a"): a was idle
/// table.setIdle(1, false)           // b is in a request
/// table.admit("c")                  // .refused
/// ```
package struct ConnectionTable<Connection> {
    package enum Admission {
        case admitted(UInt64, evicting: Connection?)
        case refused
    }

    private struct Entry {
        var connection: Connection
        /// When it became idle, in the table's own order; `nil` while in a request or a stream.
        var idleSince: UInt64?
    }

    package let capacity: Int
    private var entries: [UInt64: Entry] = [:]
    private var nextID: UInt64 = 0
    /// Counts every change to idle, so that "idle longest" needs no clock.
    private var tick: UInt64 = 0

    package init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    /// How many connections are held.
    package var count: Int { entries.count }

    /// Admits `connection`, idle (it has sent no request yet); when the table is full, in place
    /// of the connection idle longest, which the caller closes.
    package mutating func admit(_ connection: Connection) -> Admission {
        var evicted: Connection?
        if entries.count >= capacity {
            // A scan only when full: a thousand comparisons, against a second index to keep right
            // on every request.
            var oldest: (id: UInt64, since: UInt64)?
            for (id, entry) in entries {
                if let since = entry.idleSince, since < oldest?.since ?? .max { oldest = (id, since) }
            }
            guard let oldest else { return .refused }
            evicted = entries.removeValue(forKey: oldest.id)?.connection
        }
        defer { nextID += 1 }
        tick += 1
        entries[nextID] = Entry(connection: connection, idleSince: tick)
        return .admitted(nextID, evicting: evicted)
    }

    /// Marks connection `id` idle (its response ended, none under way) or busy (a request began).
    package mutating func setIdle(_ id: UInt64, _ idle: Bool) {
        guard entries[id] != nil else { return }
        if idle {
            guard entries[id]?.idleSince == nil else { return }
            tick += 1
            entries[id]?.idleSince = tick
        } else {
            entries[id]?.idleSince = nil
        }
    }

    /// Forgets connection `id` (it closed); nothing if it was evicted already.
    package mutating func remove(_ id: UInt64) {
        entries.removeValue(forKey: id)
    }
}
