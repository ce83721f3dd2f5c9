import NetReachConditioner

#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// What `netreach condition` prints: lines for people, or JSON lines with `--json`.
struct ConditionOutput {
    var json: Bool

    private struct ListenerLine: Encodable {
        var name: String
        var listen: String
        var upstream: String
        var profile: String?
        var conditions: LinkConditions
        var faults: [NamedFault]
    }

    private struct Ready: Encodable {
        var event = "ready"
        var control: String
        var listeners: [ListenerLine]
    }

    private struct Connection: Encodable {
        var event = "connection"
        var listener: String
        var id: Int
        var upstream: DirectionStatistics
        var downstream: DirectionStatistics
        var isOpen: Bool
    }

    private struct Stopped: Encodable {
        var event = "stopped"
        var connections: Int
    }

    func ready(
        listeners: [ConditionedListener], control: ConditionerControl, profile: LinkProfile?,
        conditions: LinkConditions, faults: [NamedFault]
    ) throws(StandardStream.WriteError) {
        let controlAddress = ConditionedProxy.address(control.host, control.port)
        if json {
            let lines = listeners.map {
                ListenerLine(
                    name: $0.name, listen: ConditionedProxy.address($0.proxy.host, $0.proxy.port),
                    upstream: ConditionedProxy.address($0.proxy.upstreamHost, $0.proxy.upstreamPort),
                    profile: profile?.name, conditions: conditions, faults: faults)
            }
            try write(Ready(control: controlAddress, listeners: lines))
            return
        }
        var lines = ["control API: http://\(controlAddress)/listeners"]
        let described = (profile.map { "profile \($0.name): " } ?? "") + Self.describe(conditions)
        for listener in listeners {
            let proxy = listener.proxy
            lines.append(
                "listener \(listener.name): \(ConditionedProxy.address(proxy.host, proxy.port)) -> "
                    + "\(ConditionedProxy.address(proxy.upstreamHost, proxy.upstreamPort)), \(described)")
        }
        for fault in faults { lines.append("fault \(fault.name): \(Self.describe(fault))") }
        try StandardStream.output.writeLine(lines.joined(separator: "\n"))
    }

    func connection(listener: String, _ statistics: ConnectionStatistics) throws(StandardStream.WriteError) {
        let refused = statistics.upstream.upstreamRefused
        if refused {
            StandardStream.complain(
                "listener \(listener), connection \(statistics.id): the upstream could not be connected to; the client's connection was closed"
            )
        }
        if json {
            try write(
                Connection(
                    listener: listener, id: statistics.id, upstream: statistics.upstream,
                    downstream: statistics.downstream, isOpen: statistics.isOpen))
            return
        }
        if refused { return }
        try StandardStream.output.writeLine(
            "listener \(listener), connection \(statistics.id): up \(Self.describe(statistics.upstream)); "
                + "down \(Self.describe(statistics.downstream))")
    }

    func stopped(connections: Int) throws(StandardStream.WriteError) {
        if json {
            try write(Stopped(connections: connections))
        } else {
            try StandardStream.output.writeLine("stopped after \(connections) connection\(connections == 1 ? "" : "s")")
        }
    }

    private func write(_ value: some Encodable) throws(StandardStream.WriteError) {
        try StandardStream.output.writeLine(JSONLine.text(value) ?? #"{"version":"\#(NetreachCommand.version)"}"#)
    }

    /// `down 780 kbit/s +100 ms, up 330 kbit/s +100 ms`, or `no conditions`.
    static func describe(_ conditions: LinkConditions) -> String {
        if conditions.upstream.isNone && conditions.downstream.isNone && conditions.connectDelay == .zero {
            return "no conditions"
        }
        var parts = ["down \(describe(conditions.downstream))", "up \(describe(conditions.upstream))"]
        if conditions.connectDelay > .zero {
            parts.append("\(milliseconds(conditions.connectDelay)) before each connection")
        }
        return parts.joined(separator: ", ")
    }

    static func describe(_ direction: DirectionConditions) -> String {
        if direction.loss >= 1 { return "nothing (100% loss)" }
        var parts = [direction.bandwidth.map(rate) ?? "unlimited"]
        if direction.delay > .zero || direction.jitter > .zero {
            parts.append(
                "+\(milliseconds(direction.delay))"
                    + (direction.jitter > .zero ? " ±\(milliseconds(direction.jitter))" : ""))
        }
        if direction.loss > 0 { parts.append("\(Self.number(direction.loss * 100))% loss") }
        return parts.joined(separator: " ")
    }

    static func describe(_ fault: NamedFault) -> String {
        let directions = fault.directions.count == 1 ? fault.directions.first!.rawValue : "both directions"
        let what =
            switch fault.fault {
            case .resetPeer(let after): "reset_peer after \(milliseconds(after))"
            case .timeout(let after):
                "timeout, " + (after.map { "closed after \(milliseconds($0))" } ?? "held for ever")
            case .slowClose(let delay): "slow_close by \(milliseconds(delay))"
            case .limitData(let bytes): "limit_data at \(bytes) bytes"
            case .slicer(let size, let variation, let delay):
                "slicer \(size)±\(variation) B every \(milliseconds(delay))"
            }
        return "\(what), \(directions)"
    }

    static func describe(_ direction: DirectionStatistics) -> String {
        var text =
            "\(direction.bytesRead) B read, \(direction.bytesDelivered) B delivered in \(direction.chunksDelivered) chunk"
            + (direction.chunksDelivered == 1 ? "" : "s")
        if direction.chunksDelivered > 0 && direction.totalDelayMilliseconds > 0 {
            text +=
                ", delay mean \(number(direction.totalDelayMilliseconds / Double(direction.chunksDelivered))) ms, "
                + "max \(number(direction.maximumDelayMilliseconds)) ms"
        }
        return text
    }

    static func rate(_ bytesPerSecond: Int) -> String {
        let bits = Double(bytesPerSecond) * 8
        if bits >= 1e6 { return "\(number(bits / 1e6)) Mbit/s" }
        if bits >= 1e3 { return "\(number(bits / 1e3)) kbit/s" }
        return "\(number(bits)) bit/s"
    }

    static func milliseconds(_ duration: Duration) -> String {
        let milliseconds = Double(duration.components.seconds) * 1e3 + Double(duration.components.attoseconds) / 1e15
        return milliseconds >= 1000 && milliseconds.truncatingRemainder(dividingBy: 1000) == 0
            ? "\(Int(milliseconds / 1000)) s" : "\(number(milliseconds)) ms"
    }

    /// At most one decimal, none when whole: `100`, `97.5`.
    static func number(_ value: Double) -> String {
        let rounded = (value * 10).rounded() / 10
        return rounded == rounded.rounded() ? "\(Int(rounded))" : "\(rounded)"
    }
}
